// The shared block math (src/quant/quant_math.h): parameters, rounding, packing, the
// stochastic-rounding hash. These functions are what the CUDA kernels call per element.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "quant/quant_math.h"

namespace zcoll {
namespace quant {
namespace {

uint32_t absBits(float f) { return floatBits(f) & 0x7fffffffu; }

TEST(QuantMath, SymmetricScaleAndZeroBlock) {
  BlockParams p = symmetricParams(absBits(127.0f), 8);
  EXPECT_EQ(p.scale, 1.0f);
  EXPECT_EQ(symmetricParams(absBits(-7.0f), 4).scale, 1.0f);
  BlockParams z = symmetricParams(0u, 8);
  EXPECT_EQ(z.scale, 0.0f);
  EXPECT_FALSE(paramsQuantizable(z));
}

TEST(QuantMath, NonFiniteGivesNanScale) {
  for (float v : {std::numeric_limits<float>::infinity(), std::nanf("")}) {
    EXPECT_TRUE(std::isnan(symmetricParams(absBits(v), 8).scale));
    BlockParams a = asymmetricParams(absBits(v), 0.0f, 1.0f, 4);
    EXPECT_TRUE(std::isnan(a.scale));
    EXPECT_TRUE(std::isnan(a.zero));
  }
}

TEST(QuantMath, UnderflowingScaleBecomesSmallestSubnormal) {
  float tiny = bitsFloat(5u);  // 5 * 2^-149
  BlockParams p = symmetricParams(absBits(tiny), 8);
  EXPECT_EQ(floatBits(p.scale), 1u);
  EXPECT_EQ(quantizeValue(tiny, p, quantReciprocal(p.scale), 8, true, false, 0.0f), 5);
  EXPECT_EQ(dequantizeValue(5, p.scale, 0.0f, true), tiny);  // exact
}

TEST(QuantMath, AsymmetricCanonicalZeroAndOverflow) {
  BlockParams p = asymmetricParams(0u, -0.0f, 0.0f, 8);
  EXPECT_EQ(floatBits(p.zero), 0u);  // -0 became +0
  EXPECT_EQ(p.scale, 0.0f);
  BlockParams q = asymmetricParams(absBits(1.0f), -1.0f, 1.0f, 8);
  EXPECT_EQ(q.zero, -1.0f);
  EXPECT_EQ(q.scale, 2.0f / 255.0f);
  float big = 3.0e38f;  // max - min overflows fp32: the block is NaN, not garbage
  EXPECT_TRUE(std::isnan(asymmetricParams(absBits(big), -big, big, 8).scale));
}

TEST(QuantMath, RoundToNearestEvenAndClamp) {
  BlockParams p{1.0f, 0.0f};
  EXPECT_EQ(quantizeValue(2.5f, p, quantReciprocal(p.scale), 8, true, false, 0.0f), 2);
  EXPECT_EQ(quantizeValue(3.5f, p, quantReciprocal(p.scale), 8, true, false, 0.0f), 4);
  EXPECT_EQ(quantizeValue(-2.5f, p, quantReciprocal(p.scale), 8, true, false, 0.0f), -2);
  EXPECT_EQ(quantizeValue(200.0f, p, quantReciprocal(p.scale), 8, true, false, 0.0f), 127);
  EXPECT_EQ(quantizeValue(-200.0f, p, quantReciprocal(p.scale), 8, true, false, 0.0f), -127);
  EXPECT_EQ(quantizeValue(9.0f, p, quantReciprocal(p.scale), 4, true, false, 0.0f), 7);
  EXPECT_EQ(quantizeValue(-1.0f, p, quantReciprocal(p.scale), 4, false, false, 0.0f), 0);
  EXPECT_EQ(quantizeValue(99.0f, p, quantReciprocal(p.scale), 4, false, false, 0.0f), 15);
}

// Wire format v2: t = x * RN(1/scale), not x / scale. Here x / scale = 1.5 - 2^-24 rounds to 1.5
// (a tie, to even), then to 2; x * RN(1/scale) = 1.5 - 2^-24 - 2^-46 rounds to 1.5 - 2^-23, then
// to 1.
TEST(QuantMath, ScaledValueMultipliesByTheRoundedReciprocal) {
  BlockParams p{0x1.000002p+0f, 0.0f};
  float x = 0x1.800002p+0f;
  EXPECT_EQ(std::nearbyint(x / p.scale), 2.0f);  // what a division would give
  EXPECT_EQ(quantizeValue(x, p, quantReciprocal(p.scale), 8, true, false, 0.0f), 1);
  EXPECT_EQ(quantReciprocal(0x1p-120f), 0x1p120f);
  EXPECT_EQ(quantReciprocal(bitsFloat(1u)), 0.0f);  // 1/scale overflows: divide instead
}

TEST(QuantMath, StochasticRoundingPicksNeighbours) {
  BlockParams p{1.0f, 0.0f};
  EXPECT_EQ(quantizeValue(2.25f, p, quantReciprocal(p.scale), 8, true, true, 0.0f), 3);    // u < 0.25: up
  EXPECT_EQ(quantizeValue(2.25f, p, quantReciprocal(p.scale), 8, true, true, 0.3f), 2);    // u >= 0.25: down
  EXPECT_EQ(quantizeValue(-2.25f, p, quantReciprocal(p.scale), 8, true, true, 0.7f), -2);  // frac(-2.25) = 0.75
  EXPECT_EQ(quantizeValue(-2.25f, p, quantReciprocal(p.scale), 8, true, true, 0.8f), -3);
  EXPECT_EQ(quantizeValue(4.0f, p, quantReciprocal(p.scale), 8, true, true, 0.0f), 4);     // integers stay
}

TEST(QuantMath, NibblePacking) {
  EXPECT_EQ(packNibbles(1, 2), 0x21);
  EXPECT_EQ(packNibbles(-7, 7), 0x79);
  EXPECT_EQ(unpackNibble(0x79, 0, true), -7);
  EXPECT_EQ(unpackNibble(0x79, 1, true), 7);
  EXPECT_EQ(unpackNibble(0xf0, 1, false), 15);
  EXPECT_EQ(unpackByte(0x81, true), -127);
  EXPECT_EQ(unpackByte(0x81, false), 129);
}

TEST(QuantMath, HashIsDeterministicUniformAndSeedDependent) {
  double sum = 0;
  int same = 0;
  const int n = 1 << 16;
  for (int i = 0; i < n; ++i) {
    float u = srUniform(7, static_cast<uint64_t>(i));
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    ASSERT_EQ(u, srUniform(7, static_cast<uint64_t>(i)));
    sum += u;
    same += u == srUniform(8, static_cast<uint64_t>(i));
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);
  EXPECT_LT(same, 8);
  // The upper index half matters too.
  EXPECT_NE(srUniform(7, 5), srUniform(7, (uint64_t{1} << 32) + 5));
}

TEST(QuantMath, LayoutIsAligned) {
  for (size_t n : {1, 31, 32, 33, 1000, 4097}) {
    for (int bits : {4, 8}) {
      for (bool sym : {true, false}) {
        Layout l = layoutOf(n, 32, bits, sym);
        EXPECT_EQ(l.zerosOffset % 16, 0u);
        EXPECT_EQ(l.valuesOffset % 16, 0u);
        EXPECT_EQ(l.totalBytes % 16, 0u);
        EXPECT_GE(l.totalBytes, l.valuesOffset + l.valuesBytes);
        EXPECT_EQ(l.nblocks, (n + 31) / 32);
      }
    }
  }
}

}  // namespace
}  // namespace quant
}  // namespace zcoll
