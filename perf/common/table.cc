// Table printing. Every cell is a string right-aligned in its column, so extra columns of
// other collectives line up without special cases.
#include "common/table.h"

#include <strings.h>
#include <unistd.h>

#include <cerrno>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/dtype.h"
#include "zcoll/zcoll_version.h"

namespace zcoll {
namespace perf {
namespace {

struct Column {
  std::string title, unit;
  int width;
};

const std::vector<Column> kLeadColumns = {
    {"size", "(B)", 12}, {"count", "(elements)", 12}, {"type", "", 8},
    {"redop", "", 6},    {"root", "", 6}};

std::vector<Column> modeColumns(const Collective& coll, bool cpuTime = false) {
  std::vector<Column> cols = {{cpuTime ? "cputime" : "time", "(us)", 10},
                              {"algbw", "(GB/s)", 7},
                              {"busbw", "(GB/s)", 7},
                              {"#wrong", "", 6}};
  for (const ExtraColumn& e : coll.extraColumns) cols.push_back({e.title, e.unit, e.width});
  return cols;
}

std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

// Fewer decimals as times grow, so the column stays narrow.
std::string formatTime(double us) {
  return format(us < 1e4 ? "%.2f" : us < 1e6 ? "%.1f" : "%.0f", us);
}

// Prints cells right-aligned in their columns; `lead` is '#' for header lines, ' ' for rows.
void printCells(char lead, const std::vector<Column>& cols, const std::vector<std::string>& cells) {
  std::string line(1, lead);
  for (size_t i = 0; i < cols.size(); ++i) {
    std::string cell = i < cells.size() ? cells[i] : "";
    int pad = cols[i].width - int(cell.size());
    line += std::string(pad > 0 ? pad + 1 : 1, ' ') + cell;
  }
  std::printf("%s\n", line.c_str());
}

int totalWidth(const std::vector<Column>& cols) {
  int w = 0;
  for (const Column& c : cols) w += c.width + 1;
  return w;
}

// Lead columns, then the out-of-place and the in-place halves.
std::vector<Column> allColumns(const Collective& coll, bool cpuTime = false) {
  std::vector<Column> all = kLeadColumns;
  std::vector<Column> mode = modeColumns(coll, cpuTime);
  all.insert(all.end(), mode.begin(), mode.end());
  all.insert(all.end(), mode.begin(), mode.end());
  return all;
}

std::vector<std::string> modeCells(const Collective& coll, const Measurement& m) {
  size_t n = 4 + coll.extraColumns.size();
  if (!m.ran) return std::vector<std::string>(n, "N/A");
  std::vector<std::string> cells = {formatTime(m.timeUs), format("%.2f", m.algBw),
                                    format("%.2f", m.busBw),
                                    m.checked ? format("%.0f", double(m.wrong)) : "N/A"};
  for (const ExtraColumn& e : coll.extraColumns) cells.push_back(e.format(m));
  return cells;
}

std::string centered(const std::string& text, int width) {
  int left = (width - int(text.size())) / 2;
  return std::string(left > 0 ? left : 0, ' ') + text +
         std::string(width - left - int(text.size()) > 0 ? width - left - int(text.size()) : 0, ' ');
}

// The mode of ZCOLL_REDUCE_PARTIALS the communicator read at init (empty or unset: fp32).
void printPartialsMode() {
  const char* env = std::getenv("ZCOLL_REDUCE_PARTIALS");
  std::string mode = env != nullptr && *env != '\0' ? env : "fp32";
  if (mode == "fp32")
    std::printf("# 16-bit partials: fp32 (ZCOLL_REDUCE_PARTIALS=fp32: the ring carries fp32 partial "
                "sums, about twice the bytes; =dtype rounds at every hop as NCCL does, for an "
                "NCCL-comparable busbw)\n");
  else
    std::printf("# 16-bit partials: %s (ZCOLL_REDUCE_PARTIALS=%s; dtype: the ring rounds partial "
                "sums to the data type at every hop, as NCCL does)\n", mode.c_str(), mode.c_str());
}

}  // namespace

std::string rankLine(const RankInfo& info) {
  char host[64] = {0};
  gethostname(host, sizeof(host) - 1);
  char buf[256];
  std::snprintf(buf, sizeof(buf), "#  Rank %2d Pid %6d on %10s node %2d local rank %2d (%s)",
                info.rank, int(getpid()), host, info.node, info.localRank, info.memory.c_str());
  return buf;
}

void printSetup(const Collective& coll, const Options& opt, const RankInfo& info,
                const std::vector<std::string>& rankLines) {
  std::printf("# zcoll %d.%d.%d %s_perf\n", ZCOLL_MAJOR, ZCOLL_MINOR, ZCOLL_PATCH,
              coll.name.c_str());
  for (const std::string& note : coll.notes) std::printf("%s\n", note.c_str());
  std::printf("# nThread 1 nGpus 1 nRanks %d nNodes %d minBytes %zu maxBytes %zu step: %zu(%s) "
              "warmup iters: %d iters: %d agg iters: %d validation: %d graph: 0\n",
              info.nranks, info.nodes, opt.minBytes, opt.maxBytes,
              opt.stepFactor > 1 ? opt.stepFactor : opt.stepBytes,
              opt.stepFactor > 1 ? "factor" : "bytes", opt.warmup, opt.iters, opt.aggIters,
              int(opt.check));
  static const char* const kAverage[] = {"rank 0's", "mean over ranks", "min over ranks",
                                         "max over ranks"};
  std::printf("# time: %s per call, %s (-a %d)%s%s\n", opt.cpuTime ? "process CPU time" : "wall time",
              kAverage[opt.average], opt.average, opt.blocking ? "; blocking calls (-z 1)" : "",
              opt.cycles != 1 ? "; sweep repeated (-N)" : "");
  if (opt.device)
    std::printf("# device buffers (--device 1): cudaMalloc'd, calls on %s; time: host "
                "clock around %d enqueued calls + cudaStreamSynchronize\n",
                opt.streamNull ? "the default stream (-y 1)" : "a non-blocking stream", opt.iters);
  const bool sixteenBit = opt.dtype == zcollFloat16 || opt.dtype == zcollBfloat16;
  if (coll.ringPartials && (sixteenBit || opt.allTypes)) printPartialsMode();  // -d all: has them
  if (opt.registered)
    std::printf("# registered host buffers (-R 1): from zcollMemAllocHost, read in place by the "
                "node's peers\n");
  std::printf("#\n# Using ranks\n");
  for (const std::string& line : rankLines) std::printf("%s\n", line.c_str());
  std::printf("#\n");
}

void printTableHeader(const Collective& coll, bool cpuTime) {
  std::vector<Column> mode = modeColumns(coll, cpuTime);
  std::string banner = "#" + std::string(totalWidth(kLeadColumns), ' ') +
                       centered("out-of-place", totalWidth(mode)) +
                       centered("in-place", totalWidth(mode));
  std::printf("%s\n", banner.c_str());
  std::vector<Column> all = allColumns(coll, cpuTime);
  std::vector<std::string> titles, units;
  for (const Column& c : all) {
    titles.push_back(c.title);
    units.push_back(c.unit);
  }
  printCells('#', all, titles);
  printCells('#', all, units);
}

void printRow(const Collective& coll, const Options&, const Row& row) {
  std::vector<std::string> cells = {
      std::to_string(row.bytes), std::to_string(row.count), typeName(row.dtype),
      coll.reduces ? opName(row.op) : "none", std::to_string(coll.rooted ? row.root : -1)};
  for (const Measurement& m : row.modes) {
    std::vector<std::string> half = modeCells(coll, m);
    cells.insert(cells.end(), half.begin(), half.end());
  }
  printCells(' ', allColumns(coll), cells);
  std::fflush(stdout);  // rows appear as they are measured, even through a pipe
}

void printSummary(uint64_t wrong, double avgBusBw) {
  std::printf("# Out of bounds values : %llu %s\n", (unsigned long long)wrong,
              wrong ? "FAILED" : "OK");
  std::printf("# Avg bus bandwidth    : %g \n#\n", avgBusBw);
  std::fflush(stdout);
}

namespace {

// A cell as a JSON value: a number when it is one, null for N/A, else a string.
std::string jsonValue(const std::string& cell) {
  if (cell == "N/A") return "null";
  char* end = nullptr;
  std::strtod(cell.c_str(), &end);
  if (!cell.empty() && end != nullptr && *end == '\0') return cell;
  std::string out = "\"";
  for (char c : cell) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The measurement's named values, as in the table (extra columns by their title).
std::vector<std::pair<std::string, std::string>> namedValues(const Collective& coll,
                                                             const Measurement& m) {
  std::vector<std::string> cells = modeCells(coll, m);
  std::vector<std::pair<std::string, std::string>> out = {
      {"time_us", cells[0]}, {"algbw_GBps", cells[1]}, {"busbw_GBps", cells[2]},
      {"wrong", cells[3]}};
  for (size_t i = 0; i < coll.extraColumns.size(); ++i) {
    const ExtraColumn& e = coll.extraColumns[i];
    std::string key = e.title;
    if (e.unit == "(B)") key += "_bytes";
    out.push_back({key, cells[4 + i]});
  }
  return out;
}

const char* const kModeNames[2] = {"out_of_place", "in_place"};

void writeJson(FILE* f, const Collective& coll, const Options& opt, int nranks, int nodes,
               const std::vector<Row>& rows) {
  std::fprintf(f, "{\n  \"benchmark\": \"%s_perf\",\n  \"zcoll_version\": \"%d.%d.%d\",\n",
               coll.name.c_str(), ZCOLL_MAJOR, ZCOLL_MINOR, ZCOLL_PATCH);
  std::fprintf(f, "  \"nranks\": %d,\n  \"nnodes\": %d,\n  \"memory\": \"%s\",\n", nranks,
               nodes, opt.device ? "device" : opt.registered ? "registered host" : "host");
  std::fprintf(f, "  \"iters\": %d,\n  \"agg_iters\": %d,\n  \"warmup_iters\": %d,\n"
               "  \"average\": %d,\n  \"time\": \"%s\",\n  \"results\": [",
               opt.iters, opt.aggIters, opt.warmup, opt.average, opt.cpuTime ? "cpu" : "wall");
  for (size_t r = 0; r < rows.size(); ++r) {
    const Row& row = rows[r];
    std::fprintf(f, "%s\n    {\"cycle\": %d, \"size\": %zu, \"count\": %zu, \"type\": \"%s\", "
                 "\"redop\": \"%s\", \"root\": %d", r ? "," : "", row.cycle, row.bytes,
                 row.count, typeName(row.dtype), coll.reduces ? opName(row.op) : "none",
                 coll.rooted ? row.root : -1);
    for (int mode = 0; mode < 2; ++mode) {
      std::fprintf(f, ", \"%s\": ", kModeNames[mode]);
      if (!row.modes[mode].ran) {
        std::fprintf(f, "null");
        continue;
      }
      std::fprintf(f, "{");
      bool first = true;
      for (const auto& kv : namedValues(coll, row.modes[mode])) {
        std::fprintf(f, "%s\"%s\": %s", first ? "" : ", ", kv.first.c_str(),
                     jsonValue(kv.second).c_str());
        first = false;
      }
      std::fprintf(f, "}");
    }
    std::fprintf(f, "}");
  }
  std::fprintf(f, "\n  ]\n}\n");
}

void writeCsv(FILE* f, const Collective& coll, const std::vector<Row>& rows) {
  std::fprintf(f, "cycle,size,count,type,redop,root,mode");
  for (const auto& kv : namedValues(coll, Measurement{})) std::fprintf(f, ",%s", kv.first.c_str());
  std::fprintf(f, "\n");
  for (const Row& row : rows)
    for (int mode = 0; mode < 2; ++mode) {
      if (!row.modes[mode].ran) continue;
      std::fprintf(f, "%d,%zu,%zu,%s,%s,%d,%s", row.cycle, row.bytes, row.count,
                   typeName(row.dtype), coll.reduces ? opName(row.op) : "none",
                   coll.rooted ? row.root : -1, kModeNames[mode]);
      for (const auto& kv : namedValues(coll, row.modes[mode]))
        std::fprintf(f, ",%s", kv.second == "N/A" ? "" : kv.second.c_str());
      std::fprintf(f, "\n");
    }
}

}  // namespace

bool writeResults(const Collective& coll, const Options& opt, int nranks, int nodes,
                  const std::vector<Row>& rows) {
  const std::string& path = opt.outputFile;
  bool csv = opt.outputFormat.empty()
                 ? path.size() >= 4 && strcasecmp(path.c_str() + path.size() - 4, ".csv") == 0
                 : opt.outputFormat == "csv";
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "-J %s: cannot write %s: %s\n", path.c_str(), tmp.c_str(),
                 std::strerror(errno));
    return false;
  }
  if (csv) writeCsv(f, coll, rows);
  else writeJson(f, coll, opt, nranks, nodes, rows);
  bool ok = std::fflush(f) == 0 && !std::ferror(f);
  ok = std::fclose(f) == 0 && ok;
  if (ok && std::rename(tmp.c_str(), path.c_str()) == 0) return true;
  std::fprintf(stderr, "-J %s: cannot write it: %s\n", path.c_str(), std::strerror(errno));
  std::remove(tmp.c_str());
  return false;
}

}  // namespace perf
}  // namespace zcoll
