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

void printUsage(const char* prog, const Collective& coll) {
  std::printf(
      "usage: %s [options]   (%s benchmark over %s)\n"
      "  -b, --minbytes N      smallest size in bytes (K/M/G suffixes), default 32M\n"
      "  -e, --maxbytes N      largest size, default 32M\n"
      "  -i, --stepbytes N     add N bytes per step, default 1M\n"
      "  -f, --stepfactor F    multiply the size by F per step (overrides -i)\n"
      "  -n, --iters N         timed iterations per size, default 20\n"
      "  -w, --warmup_iters N  untimed iterations per size before timing, default 5\n"
      "  -c, --check 0|1       verify the results and count wrong values, default 1\n"
      "  -d, --datatype T      int8 uint8 int32 uint32 int64 uint64 half|float16\n"
      "                        float|float32 double|float64 bfloat16; default float\n"
      "  -o, --op OP           sum prod max min avg, default sum%s\n"
      "  -r, --root R          root rank, default 0%s\n"
      "  -G, --device 0|1      1: buffers in CUDA device memory (device LOCAL_RANK %% device\n"
      "                        count), calls on a non-blocking stream; default 0 (host)\n"
      "  -R, --register 0|1    1: host buffers from zcollMemAllocHost (node peers read them\n"
      "                        in place); default 0 (ordinary memory)\n"
      "  --test-corrupt R      (tests) rank R spoils one value before the check\n"
      "  -h, --help            this text\n"
      "Sizes are the total bytes nccl-tests would report: for all-gather, reduce-scatter and\n"
      "all-to-all the whole buffer across ranks, for the others one rank's buffer.\n",
      prog, coll.name.c_str(), coll.over.c_str(), coll.reduces ? "" : " (ignored here)",
      coll.rooted ? "" : " (ignored here)");
}

bool parseInt(const char* text, long minimum, long* value) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < minimum) return false;
  *value = v;
  return true;
}

// Applies one option; false on a bad value.
bool applyOption(int c, const char* arg, Options* opt) {
  long v = 0;
  int named = 0;
  switch (c) {
    case 'b': return parseSize(arg, &opt->minBytes);
    case 'e': return parseSize(arg, &opt->maxBytes);
    case 'i': return parseSize(arg, &opt->stepBytes);
    case 'f': if (!parseInt(arg, 1, &v)) return false; opt->stepFactor = size_t(v); return true;
    case 'n': if (!parseInt(arg, 1, &v)) return false; opt->iters = int(v); return true;
    case 'w': if (!parseInt(arg, 0, &v)) return false; opt->warmup = int(v); return true;
    case 'c': if (!parseInt(arg, 0, &v) || v > 1) return false; opt->check = v; return true;
    case 'r': if (!parseInt(arg, 0, &v)) return false; opt->root = int(v); return true;
    case 'C': if (!parseInt(arg, 0, &v)) return false; opt->corruptRank = int(v); return true;
    case 'G': if (!parseInt(arg, 0, &v) || v > 1) return false; opt->device = v; return true;
    case 'R': if (!parseInt(arg, 0, &v) || v > 1) return false; opt->registered = v; return true;
    case 'd':
      if (!lookUp(kTypes, arg, &named)) return false;
      opt->dtype = zcollDataType_t(named);
      return true;
    case 'o':
      if (!lookUp(kOps, arg, &named)) return false;
      opt->op = zcollRedOp_t(named);
      return true;
    default: return false;
  }
}

const char* checkRanges(const Options& opt) {
  if (opt.minBytes > opt.maxBytes) return "minbytes (-b) is larger than maxbytes (-e)";
  if (opt.stepFactor > 1 && opt.minBytes == 0) return "-b 0 cannot grow by a factor (-f)";
  if (opt.stepFactor <= 1 && opt.stepBytes == 0 && opt.minBytes != opt.maxBytes)
    return "stepbytes (-i) is 0";
  if (opt.device && opt.registered) return "-R 1 registers host buffers; -G 1 uses device ones";
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
      {"check", required_argument, nullptr, 'c'},     {"datatype", required_argument, nullptr, 'd'},
      {"op", required_argument, nullptr, 'o'},        {"root", required_argument, nullptr, 'r'},
      {"test-corrupt", required_argument, nullptr, 'C'}, {"help", no_argument, nullptr, 'h'},
      {"device", required_argument, nullptr, 'G'},   {"register", required_argument, nullptr, 'R'},
      {nullptr, 0, nullptr, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "b:e:i:f:n:w:c:d:o:r:G:R:h", kLong, nullptr)) != -1) {
    if (c == 'h') {
      printUsage(argv[0], coll);
      return 0;
    }
    if (c == '?' || !applyOption(c, optarg, opt)) {
      if (c != '?') std::fprintf(stderr, "%s: bad value '%s' for -%c\n", argv[0], optarg, c);
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

const char* typeName(zcollDataType_t t) { return nameOf(kTypes, t); }
const char* opName(zcollRedOp_t op) { return nameOf(kOps, op); }

}  // namespace perf
}  // namespace zcoll
