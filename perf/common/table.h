// Output of the perf binaries, in nccl-tests' layout: setup lines, a two-line table header,
// one row per size (out-of-place half, in-place half), and the summary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/driver.h"

namespace zcoll {
namespace perf {

struct Row {
  size_t bytes = 0;
  size_t count = 0;
  Measurement modes[2];  // [0] out-of-place, [1] in-place
  int cycle = 0;         // -N: which run of the sweep
  zcollDataType_t dtype = zcollFloat32;  // this row's type, op and root (-d/-o/-r all vary them)
  zcollRedOp_t op = zcollSum;
  int root = 0;
};

void printSetup(const Collective& coll, const Options& opt, const RankInfo& info,
                const std::vector<std::string>& rankLines);
// The time columns are titled "cputime" under -C 1 (`cpuTime`), as nccl-tests titles them.
void printTableHeader(const Collective& coll, bool cpuTime = false);
void printRow(const Collective& coll, const Options& opt, const Row& row);
void printSummary(uint64_t wrong, double avgBusBw);

// -J FILE: every row so far, for plotting, as JSON (one object: the setup and a "results" array
// of rows, each with its out_of_place and in_place measurements) or CSV (one line per row and
// mode); the format from --output-format, else from the name (.csv: CSV, else JSON). The file
// is written whole each time. False, with a message on stderr, when it cannot be written.
bool writeResults(const Collective& coll, const Options& opt, int nranks, int nodes,
                  const std::vector<Row>& rows);

// The per-rank line of the setup block ("#  Rank  0 Pid ... on host node 0 local rank 0").
std::string rankLine(const RankInfo& info);

}  // namespace perf
}  // namespace zcoll
