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
};

void printSetup(const Collective& coll, const Options& opt, const RankInfo& info,
                const std::vector<std::string>& rankLines);
void printTableHeader(const Collective& coll);
void printRow(const Collective& coll, const Options& opt, const Row& row);
void printSummary(uint64_t wrong, double avgBusBw);

// The per-rank line of the setup block ("#  Rank  0 Pid ... on host node 0 local rank 0").
std::string rankLine(const RankInfo& info);

}  // namespace perf
}  // namespace zcoll
