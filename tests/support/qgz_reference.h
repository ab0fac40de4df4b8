// What the qgZ tests (zeropp_reducescatter_test.cc, zeropp_allreduce_test.cc) check outputs
// against: the layout as the test placed the ranks, qgZ's error-bound factor F for that layout
// (docs/ZEROPP.md "qgZ", composed over both hops), seeded inputs whose blocks have different
// scales, one unit in the last place of a floating dtype, and a call as the tests name it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "support/ranks.h"
#include "support/values.h"

namespace zcoll::test {

// ---- The layout as the test placed it ---------------------------------------------------------

struct LayoutShape {
  int w = 1, nodes = 1;
  std::vector<int> nodeOf, perNode;  // each rank's node; how many ranks each node holds
  bool forcedFlat = false;  // ZCOLL_ALGO_QUANTIZED_REDUCESCATTER=flat on equal nodes
  bool uniform() const {
    return std::all_of(perNode.begin(), perNode.end(), [&](int n) { return n == perNode[0]; });
  }
  int local() const { return perNode[0]; }
};

inline LayoutShape shapeOf(const RankSetup& s) {
  LayoutShape sh;
  sh.w = s.nranks;
  sh.nodes = s.nodes;
  sh.perNode.assign(s.nodes, 0);
  for (int r = 0; r < s.nranks; ++r) {
    sh.nodeOf.push_back(nodeOfRank(s, r));
    ++sh.perNode[sh.nodeOf.back()];
  }
  return sh;
}

// ---- Error bounds -----------------------------------------------------------------------------

// k / q of one quantization at `bits`: q = 2^(bits-1) - 1 (7 for INT4, 127 for INT8), k = 1/2
// (round to nearest) or 1 (stochastic rounding).
inline double quantStep(int bits, int rounding) {
  const double k = rounding == zcollRoundStochastic ? 1.0 : 0.5;
  return k / ((1 << (bits - 1)) - 1);
}

// The first (intra-node) hop's error per unit of A_s, ei: ki/qi at intraBits 4 or 8; at
// intraBits 16 (16-bit floats, docs/ZEROPP.md "qgZ") 2^-8 for Float32 (rounded to bf16 to
// nearest even: |error| <= 2^-8 |x| <= 2^-8 A_s) and 0 for Float16/Bfloat16 (carried exactly).
inline double intraStep(int intraBits, int rounding, zcollDataType_t t) {
  if (intraBits == 16) return t == zcollFloat32 ? 0x1.0p-8 : 0.0;
  return quantStep(intraBits, rounding);
}

// qgZ's F: |out - sum_s x_s| <= F * sum_s A_s, A_s = max |x_s| over the block holding the element.
//   F = ei + (1 + ei) * ke/qe   two hops (N > 1, L > 1)
//     = ei                      N = 1 (intra hop only, intra bits)
//     = ke/qe                   L = 1, unequal nodes, or flat forced (inter bits)
inline double qgzBoundFactor(const LayoutShape& sh, int intraBits, int interBits, int rounding,
                             zcollDataType_t t) {
  const double ei = intraStep(intraBits, rounding, t), ee = quantStep(interBits, rounding);
  if (!sh.uniform() || sh.forcedFlat || (sh.local() == 1 && sh.nodes > 1)) return ee;
  if (sh.nodes == 1) return ei;
  return ei + (1 + ei) * ee;
}

// One unit in the last place of v in t (fp32, fp16 or bf16); the subnormal unit below the
// smallest normal.
inline double ulpOf(double v, zcollDataType_t t) {
  const int mant = t == zcollFloat16 ? 10 : t == zcollBfloat16 ? 7 : 23;
  const int emin = t == zcollFloat16 ? -14 : -126;
  const int e = v == 0.0 ? emin : std::max(emin, std::ilogb(std::fabs(v)));
  return std::ldexp(1.0, e - mant);
}

// ---- Seeded inputs ----------------------------------------------------------------------------

inline uint64_t splitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Element i of rank src's input under `seed`, already rounded to t: uniform in [-a, a], the
// amplitude a cycling through 0, 0.05, 1, 4 every `period` elements (blocks with different
// scales, some all zero), shifted by one step per rank.
inline double seededInputAt(uint64_t seed, int src, size_t i, zcollDataType_t t, size_t period) {
  static const double kAmp[4] = {0.0, 0.05, 1.0, 4.0};
  const double u = double(splitMix64(seed ^ splitMix64(uint64_t(src) << 40 ^ i)) >> 11) * 0x1.0p-53;
  unsigned char tmp[8];
  setElement(tmp, t, 0, kAmp[(i / period + src) % 4] * (2 * u - 1));
  return getElement(tmp, t, 0);
}

// ---- One call as the tests run it ------------------------------------------------------------

// A call of a quantized collective: the test's configuration (its own Cfg, with a `name`), the
// dtype, the op, the count, in place or not, and the seed of the inputs.
template <class Cfg>
struct QuantCall {
  const Cfg* cfg;
  zcollDataType_t t;
  zcollRedOp_t op;
  size_t count;
  bool inPlace;
  uint64_t seed;
};

template <class Cfg>
std::string describe(const QuantCall<Cfg>& c) {
  return std::string(c.cfg->name) + " dtype " + std::to_string(c.t) + " op " +
         std::to_string(c.op) + " count " + std::to_string(c.count) +
         (c.inPlace ? " in place" : "");
}

}  // namespace zcoll::test
