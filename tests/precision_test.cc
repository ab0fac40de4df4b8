// 16-bit reductions against an fp64 reference, every algorithm forced, at 3, 5 and 6 ranks with
// about 10^6 elements: what zcoll.h promises for fp16/bf16 (accumulated in fp32, rounded once to
// the data type) and what ZCOLL_REDUCE_PARTIALS=dtype trades for half the ring's bytes.
//
// Inputs have at most 11 significant bits and exponents in [-6, 0], so any sum of up to 6 of them
// is exact in fp32: with fp32 partials every algorithm must return exactly the correctly rounded
// sum, element by element; rounding partials at every hop misses that for a large share.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "support/ranks.h"
#include "support/values.h"

namespace zcoll::test {
namespace {

constexpr size_t kElems = 1000003;  // reduced elements per call (all-reduce count; RS total)

// Input of `rank` at element i: +-[2^-6, 1) with the dtype's precision (a hash, no period).
double input(int rank, size_t i) {
  uint64_t h = (uint64_t(rank) << 40) ^ (i * 0x9e3779b97f4a7c15ull);
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  double mant = 1.0 + double(h & 0x3ff) / 1024.0;  // 11 significant bits
  int exp = -int((h >> 10) % 7) - 1;               // 2^-7 .. 2^-1 times [1, 2)
  return ((h >> 20) & 1 ? -1.0 : 1.0) * std::ldexp(mant, exp);
}

// v (exact in fp32) rounded to nearest even in the 16-bit dtype.
double roundTo(zcollDataType_t t, double v) {
  float f = static_cast<float>(v);
  return t == zcollBfloat16 ? bf16ToFloat(floatToBf16(f)) : halfToFloat(floatToHalf(f));
}

double ulpOf(zcollDataType_t t, double v) {
  int e;
  std::frexp(v == 0 ? 1e-30 : v, &e);
  // fp16 below 2^-14 is subnormal: its spacing stays 2^-24 (bf16 keeps fp32's range)
  return std::max(std::ldexp(1.0, e - (t == zcollBfloat16 ? 8 : 11)),
                  t == zcollFloat16 ? std::ldexp(1.0, -24) : 0.0);
}

struct Case {
  bool reduceScatter;
  const char* algo;
};

// Runs one call on every rank and checks each output element against the fp64 sum: exactly the
// rounded sum (Sum) or within one rounding of fp32 division (Avg) with fp32 partials; within
// one 16-bit rounding per hop with partials in the data type.
void checkCall(const RankSetup& s, const Case& c, zcollDataType_t t, zcollRedOp_t op,
               bool partialsInDtype) {
  const int w = s.nranks;
  const size_t count = c.reduceScatter ? kElems / w : kElems;  // per-call count argument
  runRanks(s, [&](int rank, zcollComm_t comm) {
    const size_t inElems = c.reduceScatter ? count * w : count;
    std::vector<unsigned char> send = makeBuffer(t, inElems), recv = makeBuffer(t, count);
    for (size_t i = 0; i < inElems; ++i) setElement(send.data(), t, i, input(rank, i));
    zcollResult_t r = c.reduceScatter
                          ? zcollReduceScatter(send.data(), recv.data(), count, t, op, comm, nullptr)
                          : zcollAllReduce(send.data(), recv.data(), count, t, op, comm, nullptr);
    ASSERT_EQ(r, zcollSuccess) << zcollGetLastError(comm);
    const size_t first = c.reduceScatter ? rank * count : 0;
    size_t bad = 0, notRoundedOnce = 0;
    for (size_t i = 0; i < count; ++i) {
      double sum = 0, mag = 0;
      for (int p = 0; p < w; ++p) {
        double x = roundTo(t, input(p, first + i));
        sum += x;
        mag += std::fabs(x);
      }
      double exact = op == zcollAvg ? sum / w : sum;
      double got = getElement(recv.data(), t, i);
      double err = std::fabs(got - exact);
      double half = 0.5 * ulpOf(t, std::max(std::fabs(got), std::fabs(exact)));
      double bound = partialsInDtype ? (w - 1) * 0.5 * ulpOf(t, mag) + half
                                     : half + (op == zcollAvg ? std::ldexp(std::fabs(exact), -24) : 0);
      if (!(err <= bound) && bad++ < 3)
        ADD_FAILURE() << c.algo << (t == zcollFloat16 ? " fp16" : " bf16") << " op " << op
                      << " rank " << rank << " element " << i << ": got " << got
                      << " exact " << exact << " bound " << bound;
      if (got != roundTo(t, exact)) ++notRoundedOnce;
    }
    EXPECT_EQ(bad, 0u);
    if (!partialsInDtype && op == zcollSum) {
      EXPECT_EQ(notRoundedOnce, 0u) << c.algo << (t == zcollFloat16 ? " fp16" : " bf16");
    }
  });
}

class Precision16 : public testing::TestWithParam<int> {};

TEST_P(Precision16, Fp32PartialsRoundOnceInEveryAlgorithm) {
  RankSetup s;
  s.nranks = GetParam();
  s.nodes = 2;
  // hierarchical runs as such at 6 ranks (2 nodes x 3), as the ring at 3 and 5 (unequal nodes).
  const Case cases[] = {{true, "ring"}, {true, "direct"}, {true, "hierarchical"}, {false, "ring"},
                        {false, "recursive_doubling"}};
  for (const Case& c : cases) {
    ScopedEnv algo(c.reduceScatter ? "ZCOLL_ALGO_REDUCESCATTER" : "ZCOLL_ALGO_ALLREDUCE", c.algo);
    for (zcollDataType_t t : {zcollFloat16, zcollBfloat16})
      for (zcollRedOp_t op : {zcollSum, zcollAvg}) checkCall(s, c, t, op, false);
  }
}

// ZCOLL_REDUCE_PARTIALS=dtype: the ring rounds every hop (NCCL's behaviour), within its bound.
TEST_P(Precision16, PartialsInDtypeStayWithinTheHopBound) {
  RankSetup s;
  s.nranks = GetParam();
  ScopedEnv partials("ZCOLL_REDUCE_PARTIALS", "dtype");
  for (bool rs : {true, false}) {
    ScopedEnv algo(rs ? "ZCOLL_ALGO_REDUCESCATTER" : "ZCOLL_ALGO_ALLREDUCE", "ring");
    for (zcollDataType_t t : {zcollFloat16, zcollBfloat16}) checkCall(s, {rs, "ring"}, t, zcollSum, true);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, Precision16, testing::Values(3, 5, 6),
                         [](const testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "ranks";
                         });

}  // namespace
}  // namespace zcoll::test
