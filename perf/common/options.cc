// Command-line parsing for the perf binaries (nccl-tests' short flags plus long forms).
#include "common/options.h"

#include <getopt.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/driver.h"

namespace zcoll {
namespace perf {
namespace {

struct Named {
  const char* name;
  int value;
};

// Accepted spellings; the first of each value is the one printed.
const Named kTypes[] = {
    {"int8", zcollInt8},       {"uint8", zcollUint8},     {"int32", zcollInt32},
    {"uint32", zcollUint32},   {"int64", zcollInt64},     {"uint64", zcollUint64},
    {"half", zcollFloat16},    {"float16", zcollFloat16}, {"float", zcollFloat32},
    {"float32", zcollFloat32}, {"double", zcollFloat64},  {"float64", zcollFloat64},
    {"bfloat16", zcollBfloat16}};
const Named kOps[] = {{"sum", zcollSum}, {"prod", zcollProd}, {"max", zcollMax},
                      {"min", zcollMin}, {"avg", zcollAvg}};

template <size_t N>
const char* nameOf(const Named (&table)[N], int value) {
  for (const Named& n : table)
    if (n.value == value) return n.name;
  return "?";
}

template <size_t N>
bool lookUp(const Named (&table)[N], const char* name, int* value) {
  for (const Named& n : table) {
    if (strcasecmp(n.name, name) == 0) {
      *value = n.value;
      return true;
    }
  }
  return false;
}

// Every type and op, in nccl-tests' order (zcoll's enums follow NCCL's).
std::vector<zcollDataType_t> everyType() {
  std::vector<zcollDataType_t> all;
  for (int t = zcollInt8; t <= zcollBfloat16; ++t) all.push_back(zcollDataType_t(t));
  return all;
}
std::vector<zcollRedOp_t> everyOp() {
  std::vector<zcollRedOp_t> all;
  for (int o = zcollSum; o <= zcollAvg; ++o) all.push_back(zcollRedOp_t(o));
  return all;
}

std::vector<zcollDataType_t> typesOf(const Collective& coll) {
  return coll.types.empty() ? everyType() : coll.types;
}
std::vector<zcollRedOp_t> opsOf(const Collective& coll) {
  return coll.ops.empty() ? everyOp() : coll.ops;
}

// "float, half, bfloat16 or all": the values a flag takes, by their printed names.
template <typename T>
std::string listValues(const std::vector<T>& values, const char* (*name)(T)) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ", ";
    out += name(values[i]);
  }
  return out + " or all";
}

template <typename T>
bool contains(const std::vector<T>& values, T v) {
  for (T x : values)
    if (x == v) return true;
  return false;
}

// Codes of the long options that have no short form.
enum LongOnly { kDevice = 1000, kTestCorrupt, kOutputFormat };

void printUsage(const char* prog, const Collective& coll) {
  std::printf(
      "usage: %s [options]   (%s benchmark over %s)\n"
      "nccl-tests' flags, with nccl-tests' meaning:\n"
      "  -b, --minbytes N      smallest size in bytes (K/M/G suffixes), default 32M\n"
      "  -e, --maxbytes N      largest size, default 32M\n"
      "  -i, --stepbytes N     add N bytes per step, default 1M\n"
      "  -f, --stepfactor F    multiply the size by F per step (overrides -i)\n"
      "  -n, --iters N         timed iterations per size, default 20\n"
      "  -w, --warmup_iters N  untimed iterations per size before timing, default 5\n"
      "  -m, --agg_iters N     calls per timed iteration (run back to back), default 1\n"
      "  -c, --check N         verify the results of N calls per size and mode (each\n"
      "                        refilled) and count wrong values; 0: no check; default 1\n"
      "  -d, --datatype T      the type, default float; all: one sweep per type. Takes\n"
      "                        %s\n"
      "                        (half is also float16, float float32, double float64)\n"
      "  -o, --op OP           %s; all: one sweep per op; default sum%s\n"
      "  -r, --root R          root rank, or all: one sweep per rank; default 0%s\n"
      "  -y, --stream_null 0|1 1: device calls on CUDA's default stream (NULL) instead of a\n"
      "                        non-blocking one (--device 1; host calls take no stream), default 0\n"
      "  -a, --average 0|1|2|3 time over ranks: 0 rank 0's, 1 mean, 2 min, 3 max;\n"
      "                        default 3 (nccl-tests' default is 1)\n"
      "  -z, --blocking 0|1    1: wait for each call to complete before the next (with\n"
      "                        --device 1; host calls always return complete), default 0\n"
      "  -T, --timeout SEC     seconds any wait may last (the communicator's timeout);\n"
      "                        default 0: ZCOLL_TIMEOUT\n"
      "  -C, --report_cputime 0|1  1: report the process's CPU time (all its threads)\n"
      "                        per call instead of wall time, default 0\n"
      "  -N, --run_cycles N    run the whole sweep N times (0: until stopped), default 1\n"
      "  -J, --output_file FILE  also write the results to FILE for plotting: JSON, or CSV\n"
      "                        when FILE ends in .csv (rank 0; rewritten after each cycle)\n"
      "  --output-format csv|json  the format of -J's file, whatever its name\n"
      "  -g, --ngpus 1         GPUs per thread: 1 (zcoll runs one device per rank; start\n"
      "                        one rank per GPU)\n"
      "  -t, --nthreads 1      threads per process: 1 (one rank per process)\n"
      "  -p, --parallel_init 0|1  accepted; no effect (one rank per process)\n"
      "  -G, --cudagraph 0     CUDA graph launches: 0 (these binaries do not capture;\n"
      "                        zcoll captures only stream-triggered calls); device\n"
      "                        buffers are --device 1\n"
      "zcoll's:\n"
      "  --device 0|1          1: buffers in CUDA device memory (device LOCAL_RANK %% device\n"
      "                        count), calls on a non-blocking stream; default 0 (host)\n"
      "  -R, --register 0|1    1: host buffers from zcollMemAllocHost (node peers read them\n"
      "                        in place); default 0 (ordinary memory)\n"
      "  --test-corrupt R      (tests) rank R spoils one value before the check\n"
      "  -h, --help            this text\n",
      prog, coll.name.c_str(), coll.over.c_str(), listValues(typesOf(coll), typeName).c_str(),
      listValues(opsOf(coll), opName).c_str(), coll.reduces ? "" : " (ignored here)",
      coll.rooted ? "" : " (ignored here)");
  if (!coll.usage.empty()) {
    std::printf("%s's own:\n", coll.name.c_str());
    for (const std::string& line : coll.usage) std::printf("%s\n", line.c_str());
  }
  std::printf(
      "Sizes are the total bytes nccl-tests would report: for all-gather, reduce-scatter and\n"
      "all-to-all the whole buffer across ranks, for the others one rank's buffer.\n");
}

bool parseInt(const char* text, long minimum, long* value) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < minimum) return false;
  *value = v;
  return true;
}

// -d T: a type the collective takes, or all; else why names the accepted ones.
bool applyType(const char* arg, const Collective& coll, Options* opt, std::string* why) {
  const std::vector<zcollDataType_t> types = typesOf(coll);
  int named = 0;
  if (strcasecmp(arg, "all") == 0) {
    opt->allTypes = true;
    return true;
  }
  if (!lookUp(kTypes, arg, &named))
    *why = "bad value '" + std::string(arg) + "' for -d: takes " + listValues(types, typeName);
  else if (!contains(types, zcollDataType_t(named)))
    *why = "-d " + std::string(arg) + ": " + coll.name + " takes " + listValues(types, typeName);
  else
    opt->dtype = zcollDataType_t(named);
  return why->empty();
}

// -o OP: an op the collective takes, or all (any op for a collective that does not reduce: it
// is ignored there).
bool applyOp(const char* arg, const Collective& coll, Options* opt, std::string* why) {
  const std::vector<zcollRedOp_t> ops = coll.reduces ? opsOf(coll) : everyOp();
  int named = 0;
  if (strcasecmp(arg, "all") == 0) {
    opt->allOps = true;
    return true;
  }
  if (!lookUp(kOps, arg, &named))
    *why = "bad value '" + std::string(arg) + "' for -o: takes " + listValues(ops, opName);
  else if (!contains(ops, zcollRedOp_t(named)))
    *why = "-o " + std::string(arg) + ": " + coll.name + " takes " + listValues(ops, opName);
  else
    opt->op = zcollRedOp_t(named);
  return why->empty();
}

// Applies one option; false on a bad value (with `why` set when a plain "bad value" would not
// say enough).
bool applyOption(int c, const char* arg, const Collective& coll, Options* opt, std::string* why) {
  long v = 0;
  switch (c) {
    case 'b': return parseSize(arg, &opt->minBytes);
    case 'e': return parseSize(arg, &opt->maxBytes);
    case 'i': return parseSize(arg, &opt->stepBytes);
    case 'f': if (!parseInt(arg, 1, &v)) return false; opt->stepFactor = size_t(v); return true;
    case 'n': if (!parseInt(arg, 1, &v)) return false; opt->iters = int(v); return true;
    case 'w': if (!parseInt(arg, 0, &v)) return false; opt->warmup = int(v); return true;
    case 'm': if (!parseInt(arg, 1, &v)) return false; opt->aggIters = int(v); return true;
    case 'c':
      if (parseInt(arg, 0, &v) && v <= 0x7fffffff) {
        opt->check = int(v);
        return true;
      }
      *why = "bad value '" + std::string(arg) + "' for -c: takes a count of checked calls "
             "(0: no check)";
      return false;
    case 'y': if (!parseInt(arg, 0, &v) || v > 1) return false; opt->streamNull = v; return true;
    case 'r':
      if (strcasecmp(arg, "all") == 0) {
        opt->allRoots = true;
        return true;
      }
      if (parseInt(arg, 0, &v)) {
        opt->root = int(v);
        return true;
      }
      *why = "bad value '" + std::string(arg) + "' for -r: takes a rank (0 or more) or all";
      return false;
    case 'a': if (!parseInt(arg, 0, &v) || v > 3) return false; opt->average = int(v); return true;
    case 'z': if (!parseInt(arg, 0, &v) || v > 1) return false; opt->blocking = v; return true;
    case 'p': return parseInt(arg, 0, &v) && v <= 1;  // no effect: one rank per process
    case 'T': if (!parseInt(arg, 0, &v)) return false; opt->timeoutSec = int(v); return true;
    case 'C': if (!parseInt(arg, 0, &v) || v > 1) return false; opt->cpuTime = v; return true;
    case 'N': if (!parseInt(arg, 0, &v)) return false; opt->cycles = int(v); return true;
    case 'J': opt->outputFile = arg; return !opt->outputFile.empty();
    case kOutputFormat:
      if (std::strcmp(arg, "csv") != 0 && std::strcmp(arg, "json") != 0) return false;
      opt->outputFormat = arg;
      return true;
    case 'g':
      if (!parseInt(arg, 0, &v)) return false;
      if (v == 1) return true;
      *why = "-g " + std::string(arg) + ": zcoll runs one device per rank (one process per GPU): "
             "use -g 1 and start one rank per GPU (e.g. tools/zcollrun -n GPUS)";
      return false;
    case 't':
      if (!parseInt(arg, 0, &v)) return false;
      if (v == 1) return true;
      *why = "-t " + std::string(arg) + ": zcoll runs one rank per process, on one thread: use "
             "-t 1 and start more ranks instead";
      return false;
    case 'G':
      if (!parseInt(arg, 0, &v)) return false;
      if (v == 0) return true;
      *why = "-G " + std::string(arg) + " (nccl-tests: CUDA graph launches): these binaries "
             "do not capture (zcoll captures only stream-triggered calls), so only -G 0; for "
             "device buffers use --device 1";
      return false;
    case kTestCorrupt: if (!parseInt(arg, 0, &v)) return false; opt->corruptRank = int(v); return true;
    case kDevice: if (!parseInt(arg, 0, &v) || v > 1) return false; opt->device = v; return true;
    case 'R': if (!parseInt(arg, 0, &v) || v > 1) return false; opt->registered = v; return true;
    case 'd': return applyType(arg, coll, opt, why);
    case 'o': return applyOp(arg, coll, opt, why);
    default: return false;
  }
}

// The flag as typed: "-b", or "--device" for a long-only option.
std::string flagName(int c) {
  if (c == kDevice) return "--device";
  if (c == kTestCorrupt) return "--test-corrupt";
  if (c == kOutputFormat) return "--output-format";
  return std::string("-") + char(c);
}

const char* checkRanges(const Options& opt) {
  if (opt.minBytes > opt.maxBytes) return "minbytes (-b) is larger than maxbytes (-e)";
  if (opt.stepFactor > 1 && opt.minBytes == 0) return "-b 0 cannot grow by a factor (-f)";
  if (opt.stepFactor <= 1 && opt.stepBytes == 0 && opt.minBytes != opt.maxBytes)
    return "stepbytes (-i) is 0";
  if (opt.device && opt.registered)
    return "-R 1 registers host buffers; --device 1 uses device ones";
  return nullptr;
}

}  // namespace

bool parseSize(const char* text, size_t* bytes) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text || text[0] == '-') return false;
  unsigned shift = 0;
  switch (*end) {
    case 'k': case 'K': shift = 10; ++end; break;
    case 'm': case 'M': shift = 20; ++end; break;
    case 'g': case 'G': shift = 30; ++end; break;
    default: break;
  }
  if (*end != '\0' || (shift && v > (~0ull >> shift))) return false;
  *bytes = size_t(v << shift);
  return true;
}

int parseOptions(int argc, char** argv, const Collective& coll, Options* opt) {
  static const option kLong[] = {
      {"minbytes", required_argument, nullptr, 'b'},  {"maxbytes", required_argument, nullptr, 'e'},
      {"stepbytes", required_argument, nullptr, 'i'}, {"stepfactor", required_argument, nullptr, 'f'},
      {"iters", required_argument, nullptr, 'n'},     {"warmup_iters", required_argument, nullptr, 'w'},
      {"agg_iters", required_argument, nullptr, 'm'}, {"check", required_argument, nullptr, 'c'},
      {"datatype", required_argument, nullptr, 'd'},  {"op", required_argument, nullptr, 'o'},
      {"root", required_argument, nullptr, 'r'},      {"average", required_argument, nullptr, 'a'},
      {"stream_null", required_argument, nullptr, 'y'},
      {"blocking", required_argument, nullptr, 'z'},  {"parallel_init", required_argument, nullptr, 'p'},
      {"timeout", required_argument, nullptr, 'T'},   {"report_cputime", required_argument, nullptr, 'C'},
      {"run_cycles", required_argument, nullptr, 'N'}, {"output_file", required_argument, nullptr, 'J'},
      {"output-format", required_argument, nullptr, kOutputFormat},
      {"ngpus", required_argument, nullptr, 'g'},     {"nthreads", required_argument, nullptr, 't'},
      {"cudagraph", required_argument, nullptr, 'G'}, {"device", required_argument, nullptr, kDevice},
      {"register", required_argument, nullptr, 'R'},  {"test-corrupt", required_argument, nullptr, kTestCorrupt},
      {"help", no_argument, nullptr, 'h'},            {nullptr, 0, nullptr, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "b:e:i:f:n:w:m:c:d:o:r:a:z:p:T:C:N:J:g:t:G:R:y:h", kLong,
                          nullptr)) != -1) {
    if (c == 'h') {
      printUsage(argv[0], coll);
      return 0;
    }
    std::string why;
    if (c == '?' || !applyOption(c, optarg, coll, opt, &why)) {
      if (!why.empty()) std::fprintf(stderr, "%s: %s\n", argv[0], why.c_str());
      else if (c != '?')
        std::fprintf(stderr, "%s: bad value '%s' for %s\n", argv[0], optarg, flagName(c).c_str());
      std::fprintf(stderr, "run '%s -h' for the options\n", argv[0]);
      return 2;
    }
  }
  const char* problem = optind < argc ? "unexpected argument" : checkRanges(*opt);
  if (problem) {
    std::fprintf(stderr, "%s: %s\nrun '%s -h' for the options\n", argv[0], problem, argv[0]);
    return 2;
  }
  return -1;
}

std::vector<size_t> sizeList(const Options& opt) {
  std::vector<size_t> sizes;
  size_t size = opt.minBytes;
  while (size <= opt.maxBytes) {
    sizes.push_back(size);
    size_t next = opt.stepFactor > 1 ? size * opt.stepFactor : size + opt.stepBytes;
    if (next <= size) break;  // overflow, or a zero step with min == max
    size = next;
  }
  return sizes;
}

std::vector<Options> expandRuns(const Options& opt, const Collective& coll, int nranks) {
  std::vector<zcollDataType_t> types = opt.allTypes ? typesOf(coll) : std::vector<zcollDataType_t>{opt.dtype};
  std::vector<zcollRedOp_t> ops = opt.allOps && coll.reduces ? opsOf(coll) : std::vector<zcollRedOp_t>{opt.op};
  std::vector<int> roots = {opt.root};
  if (opt.allRoots && coll.rooted) {
    roots.clear();
    for (int r = 0; r < nranks; ++r) roots.push_back(r);
  }
  std::vector<Options> runs;
  for (zcollDataType_t t : types)
    for (zcollRedOp_t op : ops)
      for (int root : roots) {
        Options run = opt;
        run.dtype = t;
        run.op = op;
        run.root = root;
        runs.push_back(run);
      }
  return runs;
}

const char* typeName(zcollDataType_t t) { return nameOf(kTypes, t); }
const char* opName(zcollRedOp_t op) { return nameOf(kOps, op); }

}  // namespace perf
}  // namespace zcoll
