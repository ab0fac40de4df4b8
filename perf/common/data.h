// Test data for the perf binaries: deterministic per-rank inputs whose expected results are
// exactly representable in all ten dtypes, typed fill and verify over raw buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "zcoll/zcoll.h"

namespace zcoll {
namespace perf {

// What a value function may depend on besides (rank, index).
struct Pattern {
  zcollRedOp_t op;
  int nranks;
  int root;
  size_t count;  // the count argument of the call (per-rank chunk for the gather/scatter kinds)
};

// Value of element i on `rank` (an input, or an expected output).
using ValueFn = std::function<double(const Pattern&, int rank, size_t i)>;

// Values are small non-negative integers (<= 120), so every dtype holds them and every sum,
// product and average below is exact in int8, half and bfloat16 (up to 120 ranks).
// A pure-movement value; distinct ranks give distinct values at the same index.
double movedValue(int rank, size_t i);
// Input of rank `rank` at index i for a reduction with p.op over p.nranks ranks.
double reduceInput(const Pattern& p, int rank, size_t i);
// The reduction of reduceInput over all ranks at index i (Avg divided, exact).
double reduceResult(const Pattern& p, size_t i);

// A value no pattern produces: fills output buffers before a checked run.
constexpr double kPoison = 125;

void fillValues(void* buf, zcollDataType_t t, size_t n, const Pattern& p, int rank,
                const ValueFn& value);
void fillConstant(void* buf, zcollDataType_t t, size_t n, double value);

struct Verdict {
  uint64_t wrong = 0;     // elements off by more than the tolerance (NaN counts)
  double maxError = 0;    // largest |got - expected|
};
Verdict verifyValues(const void* buf, zcollDataType_t t, size_t n, const Pattern& p, int rank,
                     const ValueFn& expected, double tolerance);

// Sets element i to a value no pattern produces (the --test-corrupt knob).
void spoilValue(void* buf, zcollDataType_t t, size_t i);

}  // namespace perf
}  // namespace zcoll
