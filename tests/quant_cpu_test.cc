// CPU quantization kernels: error bounds on seeded data of every distribution and odd sizes,
// exact agreement with the element-wise reference of quant_math.h, idempotence, NaN/Inf,
// sums and requantization against fp64, and byte identity of every ISA variant.
#include <algorithm>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <tuple>

#include "quant_support.h"

namespace zcoll {
namespace quant {
namespace test {
namespace {

using Cfg = std::tuple<zcollDataType_t, int, bool>;  // dtype, bits, symmetric

constexpr int kBlock = 256;

Bytes quantizeOrDie(const Bytes& in, zcollDataType_t dt, size_t n, const QuantParams& p) {
  Bytes q(quantizedBytes(n, p), 0xcd);  // poison: every byte must be written
  EXPECT_EQ(quantize(in.data(), dt, n, p, q.data()), zcollSuccess);
  return q;
}

Bytes dequantizeOrDie(const Bytes& q, size_t n, const QuantParams& p, zcollDataType_t dt) {
  Bytes out(dequantizedBytes(n, dt), 0xcd);
  EXPECT_EQ(dequantize(q.data(), n, p, out.data(), dt), zcollSuccess);
  return out;
}

// Checks every element of x' = dequantize(q) against x; returns the number of violations.
size_t countBoundViolations(const std::vector<float>& x, const Bytes& q, const Bytes& deq,
                            const QuantParams& p, zcollDataType_t dt, const std::string& what) {
  std::vector<float> xq = fromDtype(deq.data(), x.size(), dt);
  size_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    BlockParams bp = blockParamsOf(q, x.size(), p, i / p.blockSize);
    double err = std::fabs(static_cast<double>(x[i]) - xq[i]);
    double bound = elementBound(x[i], xq[i], bp, dt);
    if (!(err <= bound) && bad++ < 3) {
      ADD_FAILURE() << what << " element " << i << ": x=" << x[i] << " x'=" << xq[i]
                    << " err=" << err << " bound=" << bound << " scale=" << bp.scale;
    }
  }
  return bad;
}

class QuantCpu : public ::testing::TestWithParam<Cfg> {
 protected:
  zcollDataType_t dt() const { return std::get<0>(GetParam()); }
  QuantParams params(bool sr = false, int block = kBlock) const {
    return makeParams(std::get<1>(GetParam()), block, std::get<2>(GetParam()), sr, 1234);
  }
};

// Every distribution, sizes 1, 7, B-1, B+1 and a few blocks, every ISA: bytes equal the
// reference, and every element is within the bound.
TEST_P(QuantCpu, ErrorBoundAndReferenceBytes) {
  QuantParams p = params();
  for (Isa isa : supportedIsas()) {
    IsaGuard guard(isa);
    for (Dist d : allDists()) {
      for (size_t n : {size_t{1}, size_t{7}, size_t{kBlock - 1}, size_t{kBlock + 1}, size_t{5000}}) {
        std::string what = std::string(isaName(isa)) + "/" + distName(d) + "/" + dtName(dt()) +
                           "/" + paramStr(p) + "/n=" + std::to_string(n);
        std::vector<float> x = genData(d, n, dt(), 17 + n);
        Bytes q = quantizeOrDie(toDtype(x, dt()), dt(), n, p);
        Bytes ref = refQuantize(x, p);
        ASSERT_EQ(firstDiff(q, ref), SIZE_MAX) << what;
        Bytes deq = dequantizeOrDie(q, n, p, dt());
        std::vector<float> refDeq(n);
        for (size_t i = 0; i < n; ++i) refDeq[i] = refDequantValue(ref, n, p, i);
        ASSERT_EQ(firstDiff(deq, toDtype(refDeq, dt())), SIZE_MAX) << what;
        ASSERT_EQ(countBoundViolations(x, q, deq, p, dt(), what), 0u);
      }
    }
  }
}

TEST_P(QuantCpu, LargeOddSize) {
  const size_t n = 1000003;
  QuantParams p = params();
  std::vector<float> x = genData(Dist::kGaussian, n, dt(), 99);
  Bytes q = quantizeOrDie(toDtype(x, dt()), dt(), n, p);
  ASSERT_EQ(firstDiff(q, refQuantize(x, p)), SIZE_MAX);
  Bytes deq = dequantizeOrDie(q, n, p, dt());
  EXPECT_EQ(countBoundViolations(x, q, deq, p, dt(), "n=1000003"), 0u);
}

// quantize(dequantize(q)) == q, byte for byte (symmetric; fp32 keeps x' exactly). Asymmetric
// blocks are re-derived from a rounded minimum and range, so there only the bound is promised.
TEST_P(QuantCpu, RoundTripIdempotent) {
  QuantParams p = params();
  for (Dist d : allDists()) {
    const size_t n = 3 * kBlock + 5;
    std::vector<float> x = genData(d, n, dt(), 5);
    Bytes q = quantizeOrDie(toDtype(x, dt()), dt(), n, p);
    Bytes y = dequantizeOrDie(q, n, p, zcollFloat32);
    Bytes q2 = quantizeOrDie(y, zcollFloat32, n, p);
    if (p.symmetric) {
      EXPECT_EQ(firstDiff(q, q2), SIZE_MAX) << distName(d);
    } else {
      Bytes y2 = dequantizeOrDie(q2, n, p, zcollFloat32);
      std::vector<float> yf = fromDtype(y.data(), n, zcollFloat32);
      EXPECT_EQ(countBoundViolations(yf, q2, y2, p, zcollFloat32, distName(d)), 0u);
    }
  }
}

// A NaN, +Inf or -Inf anywhere in a block makes that whole block NaN; the others are unharmed.
TEST_P(QuantCpu, NonFiniteBlocksBecomeNan) {
  QuantParams p = params();
  const size_t n = 6 * kBlock + 3;
  std::vector<float> x = genData(Dist::kGaussian, n, dt(), 8);
  x[kBlock + 7] = NAN;
  x[3 * kBlock] = INFINITY;
  x[5 * kBlock + 9] = -INFINITY;
  x[n - 1] = NAN;  // last (short) block
  for (Isa isa : supportedIsas()) {
    IsaGuard guard(isa);
    Bytes q = quantizeOrDie(toDtype(x, dt()), dt(), n, p);
    std::vector<float> y = fromDtype(dequantizeOrDie(q, n, p, dt()).data(), n, dt());
    for (size_t i = 0; i < n; ++i) {
      size_t b = i / kBlock;
      bool nanBlock = b == 1 || b == 3 || b == 5 || b == 6;
      ASSERT_EQ(std::isnan(y[i]), nanBlock) << isaName(isa) << " element " << i;
      if (!nanBlock) {
        ASSERT_TRUE(std::isfinite(y[i]));
      }
    }
    const void* chunks[2] = {q.data(), q.data()};
    Bytes sum(dequantizedBytes(n, zcollFloat32));
    ASSERT_EQ(dequantizeSum(chunks, 2, n, p, 0.5f, sum.data(), zcollFloat32), zcollSuccess);
    std::vector<float> s = fromDtype(sum.data(), n, zcollFloat32);
    EXPECT_TRUE(std::isnan(s[kBlock])) << isaName(isa);
    EXPECT_FALSE(std::isnan(s[0])) << isaName(isa);
  }
}

// Parameters a valid encoder never writes (corrupted bytes): a block whose stored scale is
// infinite, or whose zero is NaN or infinite while its scale is finite, decodes to NaN in every
// variant, alone (dequantize) and in sums; NaN payloads never reach the output.
TEST_P(QuantCpu, CorruptBlockParametersDecodeToNan) {
  QuantParams p = params();
  const size_t n = 4 * kBlock;
  std::vector<float> x = genData(Dist::kGaussian, n, dt(), 9);
  Bytes q = quantizeOrDie(toDtype(x, dt()), dt(), n, p);
  Layout l = layoutOf(n, p.blockSize, p.bits, p.symmetric);
  const float inf = INFINITY, nanPayload = bitsFloat(0x7fbfffffu);
  std::memcpy(&q[4 * 1], &inf, 4);
  if (!p.symmetric) {
    std::memcpy(&q[l.zerosOffset + 4 * 2], &nanPayload, 4);
    std::memcpy(&q[l.zerosOffset + 4 * 3], &inf, 4);
  }
  for (Isa isa : supportedIsas()) {
    IsaGuard guard(isa);
    Bytes out = dequantizeOrDie(q, n, p, dt());
    EXPECT_EQ(firstDiff(out, refDequantSum({q}, n, p, 1.0f, dt())), SIZE_MAX) << isaName(isa);
    std::vector<float> y = fromDtype(out.data(), n, dt());
    for (size_t i = 0; i < n; ++i) {
      bool nanBlock = i / kBlock == 1 || (!p.symmetric && i / kBlock >= 2);
      ASSERT_EQ(std::isnan(y[i]), nanBlock) << isaName(isa) << " element " << i;
    }
    const void* chunks[2] = {q.data(), q.data()};
    Bytes sum(dequantizedBytes(n, dt()));
    ASSERT_EQ(dequantizeSum(chunks, 2, n, p, 0.5f, sum.data(), dt()), zcollSuccess);
    EXPECT_EQ(firstDiff(sum, refDequantSum({q, q}, n, p, 0.5f, dt())), SIZE_MAX) << isaName(isa);
  }
}

// out = (sum of dequantized chunks) * scale: exactly the reference, and within the composed
// bound of the fp64 sum of the original data.
TEST_P(QuantCpu, DequantizeSumAgainstFp64) {
  QuantParams p = params();
  const int k = 3;
  const size_t n = 4 * kBlock + 77;
  const float scale = 1.0f / k;
  std::vector<std::vector<float>> xs;
  std::vector<Bytes> qs;
  for (int c = 0; c < k; ++c) {
    xs.push_back(genData(c == 1 ? Dist::kHeavyTailed : Dist::kGaussian, n, dt(), 40 + c));
    qs.push_back(quantizeOrDie(toDtype(xs[c], dt()), dt(), n, p));
  }
  const void* chunks[k] = {qs[0].data(), qs[1].data(), qs[2].data()};
  Bytes out(dequantizedBytes(n, dt()));
  ASSERT_EQ(dequantizeSum(chunks, k, n, p, scale, out.data(), dt()), zcollSuccess);
  ASSERT_EQ(firstDiff(out, refDequantSum(qs, n, p, scale, dt())), SIZE_MAX);
  std::vector<float> y = fromDtype(out.data(), n, dt());
  for (size_t i = 0; i < n; ++i) {
    double exact = 0, bound = 0, mag = 0;
    for (int c = 0; c < k; ++c) {
      float xq = refDequantValue(qs[c], n, p, i);
      exact += xs[c][i];
      mag += std::fabs(xq);
      bound += elementBound(xs[c][i], xq, blockParamsOf(qs[c], n, p, i / kBlock), zcollFloat32);
    }
    bound = bound * scale + std::ldexp(mag, -22) + ulpOf(y[i], dt());
    ASSERT_LE(std::fabs(exact * scale - y[i]), bound) << "element " << i;
  }
}

// Requantized sum: exactly the reference, and within (input bounds + output half-step).
TEST_P(QuantCpu, RequantizeAgainstFp64) {
  QuantParams in = params();
  QuantParams out = makeParams(in.bits == 8 ? 4 : 8, 128, !in.symmetric);  // all independent
  const int k = 4;
  const size_t n = 5 * kBlock + 33;
  std::vector<std::vector<float>> xs;
  std::vector<Bytes> qs;
  std::vector<const void*> chunks;
  for (int c = 0; c < k; ++c) {
    xs.push_back(genData(Dist::kGaussian, n, dt(), 60 + c));
    qs.push_back(quantizeOrDie(toDtype(xs[c], dt()), dt(), n, in));
  }
  for (auto& q : qs) chunks.push_back(q.data());
  Bytes r(requantizedBytes(n, out), 0xcd);
  ASSERT_EQ(dequantReduceRequant(chunks.data(), k, n, in, out, r.data()), zcollSuccess);
  ASSERT_EQ(firstDiff(r, refRequant(qs, n, in, out)), SIZE_MAX);
  Bytes y = dequantizeOrDie(r, n, out, zcollFloat32);
  std::vector<float> yf = fromDtype(y.data(), n, zcollFloat32);
  for (size_t i = 0; i < n; ++i) {
    double exact = 0, bound = 0, mag = 0;
    for (int c = 0; c < k; ++c) {
      float xq = refDequantValue(qs[c], n, in, i);
      exact += xs[c][i];
      mag += std::fabs(xq);
      bound += elementBound(xs[c][i], xq, blockParamsOf(qs[c], n, in, i / kBlock), zcollFloat32);
    }
    BlockParams ob = blockParamsOf(r, n, out, i / out.blockSize);
    bound += elementBound(static_cast<float>(exact), yf[i], ob, zcollFloat32) +
             std::ldexp(mag, -21);
    ASSERT_LE(std::fabs(exact - yf[i]), bound) << "element " << i;
  }
}

// Every supported ISA gives the same bytes for every operation, with RNE and SR.
TEST_P(QuantCpu, IsaVariantsByteIdentical) {
  const size_t n = 3 * kBlock + 45;
  const size_t chunkElems = 301, nChunks = 5;
  const int order[nChunks] = {3, 0, 4, 1, 2};
  std::vector<Isa> isas = supportedIsas();
  if (isas.size() < 2) GTEST_SKIP() << "only the scalar variant runs on this CPU";
  for (bool sr : {false, true}) {
    QuantParams p = params(sr);
    QuantParams outP = makeParams(4, 64, false, sr, 77);
    std::vector<float> x = genData(Dist::kHeavyTailed, nChunks * chunkElems, dt(), 3);
    Bytes in = toDtype(x, dt());
    // Sums over 2, 4 and 8 chunks (the counts the register path fixes at compile time), 5 (any
    // other count in registers) and 17 (beyond the register path's limit: the block buffer).
    const int sumChunks[] = {2, 4, 5, 8, 17};
    constexpr int kOps = 4 + 2 * 5;
    std::vector<Bytes> results[kOps];
    for (Isa isa : isas) {
      IsaGuard guard(isa);
      Bytes q = quantizeOrDie(in, dt(), n, p);
      Bytes qc(quantizedChunksBytes(chunkElems, nChunks, p), 0xcd);
      ASSERT_EQ(quantizeChunks(in.data(), dt(), chunkElems, nChunks, order, p, qc.data()),
                zcollSuccess);
      std::vector<Bytes> qs;  // chunk c: the input shifted by 7c elements
      std::vector<const void*> chunks;
      for (int c = 0; c < 17; ++c) {
        qs.push_back(c == 0 ? q
                            : quantizeOrDie(Bytes(in.begin() + 7 * c * dtypeSize(dt()), in.end()),
                                            dt(), n, p));
      }
      for (const Bytes& b : qs) chunks.push_back(b.data());
      Bytes sum1(dequantizedBytes(n, dt()));  // one chunk: dequantize and scale in one pass
      ASSERT_EQ(dequantizeSum(chunks.data(), 1, n, p, 0.25f, sum1.data(), dt()), zcollSuccess);
      std::vector<Bytes> all = {q, qc, dequantizeOrDie(q, n, p, dt()), sum1};
      for (int k : sumChunks) {
        Bytes sum(dequantizedBytes(n, dt()), 0xcd);
        ASSERT_EQ(dequantizeSum(chunks.data(), k, n, p, 1.0f / k, sum.data(), dt()), zcollSuccess);
        Bytes rq(requantizedBytes(n, outP), 0xcd);
        ASSERT_EQ(dequantReduceRequant(chunks.data(), k, n, p, outP, rq.data()), zcollSuccess);
        all.push_back(sum);
        all.push_back(rq);
      }
      for (int op = 0; op < kOps; ++op) results[op].push_back(all[op]);
    }
    for (int op = 0; op < kOps; ++op) {
      for (size_t v = 1; v < isas.size(); ++v) {
        EXPECT_EQ(firstDiff(results[op][0], results[op][v]), SIZE_MAX)
            << "operation " << op << " sr=" << sr << ": " << isaName(isas[0]) << " vs "
            << isaName(isas[v]);
      }
    }
  }
}

// dequantizeSum of the chunks to every type (times scale) and dequantReduceRequant to each of outs
// give the reference's bytes.
void expectSumsMatchReference(const std::vector<Bytes>& chunks, size_t n, const QuantParams& in,
                              float scale, const std::vector<QuantParams>& outs,
                              const std::string& what) {
  int k = static_cast<int>(chunks.size());
  std::vector<const void*> ptrs;
  for (const Bytes& b : chunks) ptrs.push_back(b.data());
  for (zcollDataType_t dt : {zcollFloat32, zcollFloat16, zcollBfloat16}) {
    Bytes sum(dequantizedBytes(n, dt), 0xcd);
    ASSERT_EQ(dequantizeSum(ptrs.data(), k, n, in, scale, sum.data(), dt), zcollSuccess);
    ASSERT_EQ(firstDiff(sum, refDequantSum(chunks, n, in, scale, dt)), SIZE_MAX)
        << what << " sum to " << dtName(dt);
  }
  for (const QuantParams& out : outs) {
    Bytes rq(requantizedBytes(n, out), 0xcd);
    ASSERT_EQ(dequantReduceRequant(ptrs.data(), k, n, in, out, rq.data()), zcollSuccess);
    ASSERT_EQ(firstDiff(rq, refRequant(chunks, n, in, out)), SIZE_MAX)
        << what << " requantized to " << paramStr(out);
  }
}

// INT4 sums and INT4 -> INT4 requantization (qgZ's kernels: even/odd block sums, the scaled
// even/odd decode and its fallback for tiny scales, the even/odd nibble packing) equal the
// element-wise reference on every ISA: symmetric and asymmetric on both sides, input and output
// blocks of different sizes, odd tails, 1-8 chunks, chunks with tiny, subnormal and NaN blocks.
TEST(QuantInt4Sums, EveryLayoutMatchesTheReference) {
  const size_t sizes[] = {1, 31, 33, 255, 1001};
  const int blocks[][2] = {{256, 256}, {32, 256}, {256, 32}, {64, 96}};
  const Dist dists[] = {Dist::kGaussian, Dist::kTiny, Dist::kDenormal, Dist::kHeavyTailed};
  for (Isa isa : supportedIsas()) {
    IsaGuard guard(isa);
    for (size_t n : sizes) {
      for (const auto& bs : blocks) {
        for (bool inSym : {true, false}) {
          QuantParams in = makeParams(4, bs[0], inSym);
          std::vector<Bytes> chunks;
          for (int c = 0; c < 8; ++c) {  // chunk c: distribution c % 4, its own seed
            std::vector<float> x = genData(dists[c % 4], n, zcollFloat32, 100 + c);
            if (c == 5 && n > 40) x[40] = std::nanf("");  // one NaN block in one chunk
            chunks.push_back(quantizeOrDie(toDtype(x, zcollFloat32), zcollFloat32, n, in));
          }
          for (int k : {1, 2, 3, 4, 8}) {
            std::vector<Bytes> used(chunks.begin(), chunks.begin() + k);
            std::string what = std::string(isaName(isa)) + " n=" + std::to_string(n) + " in " +
                               paramStr(in) + " k=" + std::to_string(k);
            expectSumsMatchReference(used, n, in, 0.375f,
                                     {makeParams(4, bs[1], true), makeParams(4, bs[1], false)},
                                     what);
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// Block parameters at the edges of the sums' fast decode (kernels_impl.h: FastEvenOdd), written
// into the chunks as corrupted or extreme bytes would be: scales just inside and just outside the
// scaled decode's exact range (symmetric and asymmetric thresholds), zero, subnormal, FLT_MAX
// (sums that overflow to Inf, or to NaN where chunks of opposite sign meet), negative, Inf and
// NaN; zero points that are not finite; every nibble value (-8 included); and more chunks than
// the register sums take (k = 17, 20). Every ISA equals the element-wise reference, for the sums to
// every type and for the requantization.
TEST(QuantInt4Sums, EdgeParametersMatchTheReference) {
  const float maxF = 3.40282347e38f, inf = INFINITY;
  const float scales[] = {0.75f, bitsFloat(29u << 23), bitsFloat((29u << 23) - 1),
                          bitsFloat(5u << 23), bitsFloat((5u << 23) - 1), 0.0f, 1e-40f,
                          maxF, -maxF, -0.5f, inf, std::nanf("")};
  const float zeros[] = {0.25f, -maxF, inf, std::nanf(""), -3.0f};
  const size_t nScales = sizeof(scales) / sizeof(scales[0]), nZeros = sizeof(zeros) / 4;
  const size_t n = 16 * 64 + 19;
  for (bool inSym : {true, false}) {
    QuantParams in = makeParams(4, 64, inSym);
    Layout l = layoutOf(n, in.blockSize, 4, inSym);
    std::mt19937_64 rng(77);
    std::vector<Bytes> chunks;
    for (int c = 0; c < 20; ++c) {
      Bytes q = quantizeOrDie(toDtype(genData(Dist::kGaussian, n, zcollFloat32, 300 + c),
                                      zcollFloat32), zcollFloat32, n, in);
      for (size_t i = l.valuesOffset; i < l.valuesOffset + l.valuesBytes; ++i) q[i] = rng();
      for (size_t j = 0; j < l.nblocks; ++j) {  // every 4th block ordinary in all chunks
        if (j % 4 == 0 || (j + c) % 3 == 0) continue;
        std::memcpy(&q[4 * j], &scales[(j * 7 + c) % nScales], 4);
        if (!inSym) std::memcpy(&q[l.zerosOffset + 4 * j], &zeros[(j + 3 * c) % nZeros], 4);
      }
      chunks.push_back(q);
    }
    for (Isa isa : supportedIsas()) {
      IsaGuard guard(isa);
      for (int k : {2, 4, 17, 20}) {
        std::vector<Bytes> used(chunks.begin(), chunks.begin() + k);
        std::string what = std::string(isaName(isa)) + " in " + paramStr(in) + " k=" +
                           std::to_string(k);
        expectSumsMatchReference(used, n, in, 0.5f,
                                 {makeParams(4, 64, true), makeParams(4, 64, false),
                                  makeParams(4, 32, true), makeParams(4, 32, false)},
                                 what);
        if (HasFatalFailure()) return;
      }
    }
  }
}

std::string cfgName(const ::testing::TestParamInfo<Cfg>& info) {
  return std::string(dtName(std::get<0>(info.param))) + "_int" +
         std::to_string(std::get<1>(info.param)) + (std::get<2>(info.param) ? "_sym" : "_asym");
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantCpu,
                         ::testing::Combine(::testing::Values(zcollFloat32, zcollFloat16,
                                                              zcollBfloat16),
                                            ::testing::Values(8, 4), ::testing::Bool()),
                         cfgName);

// ---- Layout, packing, options ----------------------------------------------------------------

TEST(QuantFormat, Int4PackingOrder) {
  // absmax 7 -> scale 1 -> q = x; element 2i in the low nibble, two's complement nibbles.
  std::vector<float> x(32, 0.0f);
  x[0] = 7;
  x[1] = -7;
  x[2] = 1;
  x[3] = 2;
  x[4] = -1;
  x[5] = 0;
  QuantParams p = makeParams(4, 32, true);
  for (Isa isa : supportedIsas()) {
    IsaGuard guard(isa);
    Bytes q = quantizeOrDie(toDtype(x, zcollFloat32), zcollFloat32, 32, p);
    ASSERT_EQ(q.size(), 32u);  // 4 bytes of scale padded to 16, 16 bytes of values
    EXPECT_EQ(readF(q.data()), 1.0f);
    EXPECT_EQ(q[4] | q[5] | q[15], 0);  // padding
    EXPECT_EQ(q[16], 0x97) << isaName(isa);
    EXPECT_EQ(q[17], 0x21) << isaName(isa);
    EXPECT_EQ(q[18], 0x0f) << isaName(isa);
  }
}

// Values at and next to rounding ties (x = (k + 1/2) * scale, +-1..2 ulps) under several
// scales, where any shortcut around the format's t = x * RN(1/scale) would show.
TEST(QuantFormat, NearTiesMatchTheReference) {
  std::vector<float> x;
  for (float absmax : {127.0f, 1.1f * 127, 0.37f, 3.0e5f, 1.0e-30f}) {
    float s = absmax / 127.0f;
    x.push_back(absmax);
    for (int k = -126; k < 126 && x.size() % 256 != 0; k += 1) {
      float tie = (static_cast<float>(k) + 0.5f) * s;
      x.push_back(tie);
      x.push_back(std::nextafter(tie, 1e30f));
      x.push_back(std::nextafter(tie, -1e30f));
      x.push_back(std::nextafter(std::nextafter(tie, 1e30f), 1e30f));
    }
    while (x.size() % 256 != 0) x.push_back(0.0f);
  }
  size_t n = x.size();
  Bytes in = toDtype(x, zcollFloat32);
  for (bool sym : {true, false}) {
    for (int bits : {8, 4}) {
      QuantParams p = makeParams(bits, 256, sym);
      Bytes ref = refQuantize(x, p);
      for (Isa isa : supportedIsas()) {
        IsaGuard guard(isa);
        EXPECT_EQ(firstDiff(quantizeOrDie(in, zcollFloat32, n, p), ref), SIZE_MAX)
            << isaName(isa) << " " << paramStr(p);
      }
    }
  }
}

TEST(QuantFormat, OddInt4TailKeepsHighNibbleZero) {
  std::vector<float> x = {1.0f, -2.0f, 3.0f};
  QuantParams p = makeParams(4, 32, false);
  for (Isa isa : supportedIsas()) {
    IsaGuard guard(isa);
    Bytes q = quantizeOrDie(toDtype(x, zcollFloat32), zcollFloat32, 3, p);
    Layout l = layoutOf(3, 32, 4, false);
    EXPECT_EQ(q[l.valuesOffset + 1] & 0xf0, 0) << isaName(isa);
    EXPECT_EQ(q[l.valuesOffset + 1] & 0x0f, 15) << isaName(isa);  // the max is the top level
  }
}

TEST(QuantFormat, SizesFollowTheLayout) {
  EXPECT_EQ(quantizedBytes(1000, makeParams(8, 256, true)), 16u + 1008u);
  EXPECT_EQ(quantizedBytes(1000, makeParams(4, 256, true)), 16u + 512u);
  EXPECT_EQ(quantizedBytes(1000, makeParams(8, 256, false)), 32u + 1008u);
  EXPECT_EQ(quantizedBytes(1, makeParams(4, 32, false)), 48u);
  EXPECT_EQ(quantizedBytes(0, makeParams(8, 256, true)), 0u);
  EXPECT_EQ(quantizedChunksBytes(1001, 3, makeParams(8, 64, true)), 3 * quantizedBytes(1001, makeParams(8, 64, true)));
  EXPECT_EQ(dequantizedBytes(10, zcollBfloat16), 20u);
  EXPECT_EQ(dequantizedBytes(10, zcollInt32), 0u);
}

TEST(QuantFormat, ZeroLengthIsANoOp) {
  QuantParams p = makeParams(8, 256, true);
  EXPECT_EQ(quantize(nullptr, zcollFloat32, 0, p, nullptr), zcollSuccess);
  EXPECT_EQ(dequantize(nullptr, 0, p, nullptr, zcollFloat16), zcollSuccess);
}

// Chunk i lands in slot destOrder[i], equal to quantizing it alone with its element offset.
TEST(QuantChunks, ReorderMatchesPerChunkQuantize) {
  const size_t chunkElems = 1001, nChunks = 4;
  const int order[nChunks] = {2, 3, 1, 0};
  for (bool sr : {false, true}) {
    QuantParams p = makeParams(4, 64, true, sr, 9);
    p.elementOffset = 1000;
    std::vector<float> x = genData(Dist::kGaussian, chunkElems * nChunks, zcollBfloat16, 1);
    Bytes in = toDtype(x, zcollBfloat16);
    size_t slot = quantizedBytes(chunkElems, p);
    Bytes out(quantizedChunksBytes(chunkElems, nChunks, p), 0xcd);
    ASSERT_EQ(quantizeChunks(in.data(), zcollBfloat16, chunkElems, nChunks, order, p, out.data()),
              zcollSuccess);
    for (size_t c = 0; c < nChunks; ++c) {
      QuantParams cp = p;
      cp.elementOffset = p.elementOffset + c * chunkElems;
      Bytes one = quantizeOrDie(Bytes(in.begin() + 2 * c * chunkElems, in.begin() + 2 * (c + 1) * chunkElems),
                                zcollBfloat16, chunkElems, cp);
      EXPECT_TRUE(sameBits(one.data(), out.data() + order[c] * slot, slot)) << "chunk " << c;
    }
  }
}

// ---- Stochastic rounding --------------------------------------------------------------------

// x = 0.3 levels everywhere (scale exactly 1): E[q] = 0.3; RNE would give 0 (bias -0.3).
TEST(QuantStochastic, UnbiasedMeanError) {
  const size_t n = 1 << 20;
  std::vector<float> x(n, 0.3f);
  for (size_t i = 0; i < n; i += 256) x[i] = 127.0f;
  QuantParams p = makeParams(8, 256, true, true, 2024);
  for (Isa isa : supportedIsas()) {
    IsaGuard guard(isa);
    Bytes q = quantizeOrDie(toDtype(x, zcollFloat32), zcollFloat32, n, p);
    double sum = 0;
    size_t cnt = 0;
    for (size_t i = 0; i < n; ++i) {
      if (i % 256 == 0) continue;
      int v = qValue(q, n, p, i);
      ASSERT_TRUE(v == 0 || v == 1);
      sum += v;
      ++cnt;
    }
    double mean = sum / cnt, sigma = std::sqrt(0.21 / cnt);
    EXPECT_NEAR(mean, 0.3, 5 * sigma) << isaName(isa);
  }
}

// Gaussian data: mean signed error -> 0 (relative to the scale), while each error < one level.
TEST(QuantStochastic, MeanErrorVanishesOnRandomData) {
  const size_t n = 1 << 20;
  std::vector<float> x = genData(Dist::kGaussian, n, zcollFloat32, 31);
  for (bool sym : {true, false}) {
    QuantParams p = makeParams(4, 128, sym, true, 5);
    Bytes q = quantizeOrDie(toDtype(x, zcollFloat32), zcollFloat32, n, p);
    std::vector<float> y = fromDtype(dequantizeOrDie(q, n, p, zcollFloat32).data(), n, zcollFloat32);
    double sum = 0, sumScale = 0;
    for (size_t i = 0; i < n; ++i) {
      float s = blockParamsOf(q, n, p, i / 128).scale;
      double e = static_cast<double>(y[i]) - x[i];
      ASSERT_LE(std::fabs(e), s * 1.0001) << i;
      sum += e / s;
      sumScale += 1;
    }
    // Each e/s has variance <= 1/4: the mean of 2^20 is within 5 * 0.5 / 1024.
    EXPECT_LT(std::fabs(sum / sumScale), 2.5 / 1024) << (sym ? "sym" : "asym");
  }
}

TEST(QuantStochastic, DeterministicPerSeedAndOffset) {
  const size_t n = 4096;
  std::vector<float> x = genData(Dist::kGaussian, n, zcollFloat16, 12);
  Bytes in = toDtype(x, zcollFloat16);
  QuantParams p = makeParams(8, 512, false, true, 42);
  Bytes a = quantizeOrDie(in, zcollFloat16, n, p);
  EXPECT_EQ(firstDiff(a, quantizeOrDie(in, zcollFloat16, n, p)), SIZE_MAX);
  QuantParams p2 = p;
  p2.seed = 43;
  EXPECT_NE(firstDiff(a, quantizeOrDie(in, zcollFloat16, n, p2)), SIZE_MAX);
  // The tail starting at block 2 with elementOffset 1024 reproduces the same values.
  QuantParams p3 = p;
  p3.elementOffset = 1024;
  Bytes tail = quantizeOrDie(Bytes(in.begin() + 2048, in.end()), zcollFloat16, n - 1024, p3);
  for (size_t i = 0; i < n - 1024; ++i) {
    ASSERT_EQ(qValue(tail, n - 1024, p3, i), qValue(a, n, p, i + 1024)) << i;
  }
  QuantParams p4 = p;
  p4.elementOffset = 1;  // a different index range: different random numbers
  EXPECT_NE(firstDiff(a, quantizeOrDie(in, zcollFloat16, n, p4)), SIZE_MAX);
}

// ---- Bits 16: 16-bit floats, no blocks of codes (qgZ's intra hop at intraBits 16) -------------

// The reference: each element converted to the wire type by base/dtype.h (round to nearest even;
// the input's own bits when it is that type), 2n bytes padded with zeros to 16; sums in fp32 in
// chunk order, times the scale, a block of the input's block size NaN where any value is not
// finite; the requantization equals quantizing the fp32 sums (a non-finite sum makes its output
// block non-finite). Every ISA gives these bytes.
Bytes refWide16(const Bytes& in, zcollDataType_t dt, size_t n, zcollDataType_t wire) {
  Bytes out(align16(2 * n), 0);
  std::vector<float> x = fromDtype(in.data(), n, dt);
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    if (dt == wire) std::memcpy(&h, in.data() + 2 * i, 2);
    else h = wire == zcollFloat16 ? floatToHalf(x[i]).bits : floatToBf16(x[i]).bits;
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

std::vector<float> refWideSums(const std::vector<Bytes>& chunks, size_t n, const QuantParams& p,
                               float scale, bool applyScale, bool nanBlocks = true) {
  std::vector<float> sum(n);
  for (size_t b0 = 0; b0 < n; b0 += p.blockSize) {
    bool finite = true;
    for (size_t i = b0; i < std::min(n, b0 + p.blockSize); ++i) {
      float acc = 0.0f;
      for (size_t c = 0; c < chunks.size(); ++c) {
        float v = fromDtype(chunks[c].data() + 2 * i, 1, p.wire16)[0];
        finite = finite && std::isfinite(v);
        acc = c == 0 ? v : acc + v;
      }
      sum[i] = applyScale ? acc * scale : acc;
    }
    if (!finite && nanBlocks) std::fill(sum.begin() + b0, sum.begin() + std::min(n, b0 + p.blockSize), NAN);
  }
  return sum;
}

TEST(QuantWide16, EveryIsaMatchesTheReference) {
  for (zcollDataType_t wire : {zcollBfloat16, zcollFloat16}) {
    for (zcollDataType_t dt : {zcollFloat32, zcollFloat16, zcollBfloat16}) {
      QuantParams p = makeParams(16, 64, true);
      p.wire16 = wire;
      for (size_t n : {size_t{1}, size_t{7}, size_t{63}, size_t{65}, size_t{1001}}) {
        std::vector<Bytes> inputs, ref;
        for (int c = 0; c < 3; ++c) {
          std::vector<float> x = genData(Dist::kGaussian, n, dt, 5 + c + n);
          if (c == 2 && n > 70) x[70] = INFINITY;  // block 1 of the sums is NaN
          inputs.push_back(toDtype(x, dt));
          ref.push_back(refWide16(inputs.back(), dt, n, wire));
        }
        std::vector<const void*> refPtrs;
        for (const Bytes& r : ref) refPtrs.push_back(r.data());
        const std::vector<float> sums = refWideSums(ref, n, p, 0.5f, true);
        const QuantParams outP = makeParams(4, 32, false);
        Bytes refRq(quantizedBytes(n, outP));
        ASSERT_EQ(quantize(refWideSums(ref, n, p, 1.0f, false, false).data(), zcollFloat32, n, outP,
                           refRq.data()), zcollSuccess);
        for (Isa isa : supportedIsas()) {
          IsaGuard guard(isa);
          std::string what = std::string(isaName(isa)) + "/" + dtName(dt) + " as " +
                             dtName(wire) + "/n=" + std::to_string(n);
          ASSERT_EQ(quantizedBytes(n, p), align16(2 * n)) << what;
          Bytes q = quantizeOrDie(inputs[0], dt, n, p);
          ASSERT_EQ(firstDiff(q, ref[0]), SIZE_MAX) << what;
          Bytes deq = dequantizeOrDie(q, n, p, dt);
          ASSERT_EQ(firstDiff(deq, toDtype(refWideSums({ref[0]}, n, p, 1, false), dt)), SIZE_MAX)
              << what;
          Bytes sum(dequantizedBytes(n, dt), 0xcd);
          ASSERT_EQ(dequantizeSum(refPtrs.data(), 3, n, p, 0.5f, sum.data(), dt), zcollSuccess);
          ASSERT_EQ(firstDiff(sum, toDtype(sums, dt)), SIZE_MAX) << what;
          Bytes rq(quantizedBytes(n, outP), 0xcd);
          ASSERT_EQ(dequantReduceRequant(refPtrs.data(), 3, n, p, outP, rq.data()), zcollSuccess);
          ASSERT_EQ(firstDiff(rq, refRq), SIZE_MAX) << what;
        }
      }
    }
  }
}

// ---- Errors and dispatch ----------------------------------------------------------------------

TEST(QuantErrors, BadArgumentsGiveInvalidArgument) {
  std::vector<float> x(64, 1.0f);
  Bytes q(1024);
  QuantParams ok = makeParams(8, 32, true);
  for (int bits : {0, 2, 3, 12, 32}) {
    QuantParams p = ok;
    p.bits = bits;
    EXPECT_EQ(validate(p), zcollInvalidArgument);
    EXPECT_NE(threadLastError().find("bits"), std::string::npos);
    EXPECT_EQ(quantize(x.data(), zcollFloat32, 64, p, q.data()), zcollInvalidArgument);
    EXPECT_EQ(quantizedBytes(64, p), 0u);
  }
  for (int b : {0, 16, 31, 48, 100, 4097, 8192, -32}) {
    QuantParams p = ok;
    p.blockSize = b;
    EXPECT_EQ(validate(p), zcollInvalidArgument) << b;
    EXPECT_NE(threadLastError().find("blockSize"), std::string::npos);
  }
  EXPECT_EQ(validate(makeParams(4, 4096, false)), zcollSuccess);
  EXPECT_EQ(quantize(x.data(), zcollInt32, 64, ok, q.data()), zcollInvalidArgument);
  EXPECT_EQ(quantize(x.data(), zcollFloat64, 64, ok, q.data()), zcollInvalidArgument);
  EXPECT_EQ(quantize(nullptr, zcollFloat32, 64, ok, q.data()), zcollInvalidArgument);
  EXPECT_EQ(quantize(x.data(), zcollFloat32, 64, ok, nullptr), zcollInvalidArgument);
  EXPECT_EQ(dequantize(q.data(), 64, ok, x.data(), zcollInt8), zcollInvalidArgument);
  EXPECT_EQ(dequantize(nullptr, 64, ok, x.data(), zcollFloat32), zcollInvalidArgument);
  const void* chunks[2] = {q.data(), nullptr};
  EXPECT_EQ(dequantizeSum(chunks, 0, 64, ok, 1.0f, x.data(), zcollFloat32), zcollInvalidArgument);
  EXPECT_EQ(dequantizeSum(chunks, 2, 64, ok, 1.0f, x.data(), zcollFloat32), zcollInvalidArgument);
  EXPECT_NE(threadLastError().find("chunks[1]"), std::string::npos);
  EXPECT_EQ(dequantizeSum(nullptr, 1, 64, ok, 1.0f, x.data(), zcollFloat32), zcollInvalidArgument);
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    EXPECT_EQ(dequantizeSum(chunks, 1, 64, ok, bad, x.data(), zcollFloat32), zcollInvalidArgument);
    EXPECT_NE(threadLastError().find("scale"), std::string::npos);
  }
  EXPECT_EQ(dequantReduceRequant(chunks, 1, 64, ok, makeParams(5, 32, true), q.data()),
            zcollInvalidArgument);
  EXPECT_EQ(dequantReduceRequant(chunks, -1, 64, ok, ok, q.data()), zcollInvalidArgument);
  QuantParams wide = makeParams(16, 32, true);  // 16-bit floats: an input format only
  const void* one[1] = {q.data()};
  EXPECT_EQ(dequantReduceRequant(one, 1, 64, ok, wide, q.data()), zcollInvalidArgument);
  EXPECT_NE(threadLastError().find("output bits = 16"), std::string::npos);
  wide.wire16 = zcollFloat32;
  EXPECT_EQ(validate(wide), zcollInvalidArgument);
  EXPECT_NE(threadLastError().find("wire16"), std::string::npos);
  const int badOrder[2] = {0, 2};
  EXPECT_EQ(quantizeChunks(x.data(), zcollFloat32, 32, 2, badOrder, ok, q.data()),
            zcollInvalidArgument);
  EXPECT_NE(threadLastError().find("destOrder[1]"), std::string::npos);
}

#if defined(__x86_64__)
// The caller's floating-point environment (rounding mode, flush-to-zero, denormals-are-zero)
// changes no byte, in any variant, and is the caller's again after the call.
TEST(QuantFormat, CallerFloatingPointEnvironmentDoesNotMatter) {
  const size_t n = 2 * 256 + 17;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {  // block 0: subnormal inputs; then ordinary ones
    float mag = i < 256 ? 1e-39f * float(1 + i % 13) : 0.37f * float(i % 29) - 3.1f;
    x[i] = (i % 3 == 0 ? -mag : mag) + (i < 256 ? 0.0f : 1e-3f * float(i % 7));
  }
  const unsigned kModes = 0x4000u /* round up */ | 0x8000u /* FTZ */ | 0x0040u /* DAZ */;
  for (Isa isa : supportedIsas()) {
    IsaGuard guard(isa);
    for (int bits : {8, 4}) {
      QuantParams p = makeParams(bits, 256, bits == 8, false, 1);
      Bytes in = toDtype(x, zcollFloat32);
      Bytes q0 = quantizeOrDie(in, zcollFloat32, n, p), d0 = dequantizeOrDie(q0, n, p, zcollFloat32);
      const unsigned saved = _mm_getcsr();
      _mm_setcsr(saved | kModes);
      Bytes q1 = quantizeOrDie(in, zcollFloat32, n, p), d1 = dequantizeOrDie(q0, n, p, zcollFloat32);
      const unsigned during = _mm_getcsr();
      _mm_setcsr(saved);
      EXPECT_EQ(during & kModes, kModes) << "the caller's environment was not restored";
      EXPECT_EQ(firstDiff(q0, q1), SIZE_MAX) << isaName(isa) << " int" << bits << " quantize";
      EXPECT_EQ(firstDiff(d0, d1), SIZE_MAX) << isaName(isa) << " int" << bits << " dequantize";
    }
  }
}
#endif

constexpr QuantOp kAllOps[] = {QuantOp::kQuantize, QuantOp::kDequantize, QuantOp::kSum,
                               QuantOp::kRequantize};

TEST(QuantDispatch, OverrideAndEnvironment) {
  EXPECT_TRUE(isaSupported(Isa::kScalar));
  for (Isa isa : supportedIsas()) {
    IsaGuard guard(isa);
    for (QuantOp op : kAllOps) EXPECT_EQ(activeIsa(op), isa) << quantOpName(op);
    EXPECT_STREQ(isaChoiceReason(), "override");
  }
  Isa forced = Isa::kAvx512;
  ASSERT_EQ(setenv("ZCOLL_QUANT_ISA", "scalar", 1), 0);
  EXPECT_TRUE(isaForcedByEnv(&forced));
  EXPECT_EQ(forced, Isa::kScalar);
  ASSERT_EQ(setenv("ZCOLL_QUANT_ISA", "no-such-isa", 1), 0);
  EXPECT_FALSE(isaForcedByEnv(&forced));
  ASSERT_EQ(unsetenv("ZCOLL_QUANT_ISA"), 0);
  EXPECT_FALSE(isaForcedByEnv(&forced));
}

// Without override or ZCOLL_QUANT_ISA, each operation runs on a measured choice among the vector
// variants; a measurement only ever returns one of its candidates, the only one when alone.
TEST(QuantDispatch, MeasuredChoicePerOperation) {
  ASSERT_EQ(unsetenv("ZCOLL_QUANT_ISA"), 0);
  std::vector<Isa> candidates = tuningCandidates();
  ASSERT_FALSE(candidates.empty());
  for (QuantOp op : kAllOps) {
    Isa chosen = activeIsa(op);
    EXPECT_NE(std::find(candidates.begin(), candidates.end(), chosen), candidates.end())
        << quantOpName(op) << ": " << isaName(chosen);
  }
  EXPECT_STREQ(isaChoiceReason(), "measured");
  std::vector<Isa> all = supportedIsas();
  std::reverse(all.begin(), all.end());  // widest first
  for (QuantOp op : kAllOps) {
    Isa m = measureFastestIsa(op, all);
    EXPECT_NE(std::find(all.begin(), all.end(), m), all.end()) << quantOpName(op);
    EXPECT_EQ(measureFastestIsa(op, {Isa::kScalar}), Isa::kScalar);
  }
}

// ZCOLL_QUANT_ISA, read at the first use in a process, forces every operation. Checked in a
// fresh process (a "threadsafe" death test re-runs this binary), so the result does not depend
// on whether another test in this process already made the choice.
TEST(QuantDispatch, EnvironmentForcesEveryOperation) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto forcedEverywhere = [] {
    if (setenv("ZCOLL_QUANT_ISA", "scalar", 1) != 0) return false;
    for (QuantOp op : kAllOps) {
      if (activeIsa(op) != Isa::kScalar) return false;
    }
    return std::string(isaChoiceReason()) == "ZCOLL_QUANT_ISA";
  };
  EXPECT_EXIT(std::exit(forcedEverywhere() ? 0 : 1), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace test
}  // namespace quant
}  // namespace zcoll
