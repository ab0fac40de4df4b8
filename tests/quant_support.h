// Helpers for the quantization tests: seeded data of several distributions in each dtype, an
// element-by-element reference built directly on quant_math.h (the functions the CUDA kernels
// call), and the per-element error bound of docs/WIRE_FORMAT.md.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "quant/isa.h"
#include "quant/quant.h"
#include "quant/quant_math.h"

namespace zcoll {
namespace quant {
namespace test {

using Bytes = std::vector<uint8_t>;

enum class Dist { kGaussian, kHeavyTailed, kAllEqual, kZeros, kTiny, kHuge, kDenormal };

inline const char* distName(Dist d) {
  switch (d) {
    case Dist::kGaussian: return "gaussian";
    case Dist::kHeavyTailed: return "heavy";
    case Dist::kAllEqual: return "equal";
    case Dist::kZeros: return "zeros";
    case Dist::kTiny: return "tiny";
    case Dist::kHuge: return "huge";
    case Dist::kDenormal: return "denormal";
  }
  return "?";
}

inline const std::vector<Dist>& allDists() {
  static const std::vector<Dist> d = {Dist::kGaussian, Dist::kHeavyTailed, Dist::kAllEqual,
                                      Dist::kZeros,    Dist::kTiny,        Dist::kHuge,
                                      Dist::kDenormal};
  return d;
}

inline const char* dtName(zcollDataType_t dt) {
  return dt == zcollFloat16 ? "fp16" : dt == zcollBfloat16 ? "bf16" : "fp32";
}

// fp32 value rounded to what dt can hold.
inline float roundTo(float v, zcollDataType_t dt) {
  if (dt == zcollFloat16) return halfToFloat(floatToHalf(v));
  if (dt == zcollBfloat16) return bf16ToFloat(floatToBf16(v));
  return v;
}

// Typical magnitudes per dtype: "huge" near the top of the range, "tiny" small but normal,
// "denormal" in the subnormal range.
inline float distScale(Dist d, zcollDataType_t dt) {
  bool h = dt == zcollFloat16;
  switch (d) {
    case Dist::kTiny: return h ? 1e-3f : 1e-30f;
    case Dist::kHuge: return h ? 8000.0f : 1e37f;
    case Dist::kDenormal: return h ? 1e-6f : 1e-39f;
    default: return 1.0f;
  }
}

inline std::vector<float> genData(Dist d, size_t n, zcollDataType_t dt, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.05f, 1.0f);
  float sc = distScale(d, dt);
  float equal = roundTo(-3.37f, dt);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    float v = 0.0f;
    switch (d) {
      case Dist::kGaussian:
      case Dist::kTiny:
      case Dist::kDenormal: v = gauss(rng) * sc; break;
      case Dist::kHuge: v = (gauss(rng) + 0.5f) * sc; break;
      case Dist::kHeavyTailed: v = gauss(rng) / uni(rng); break;  // tails ~ 1/x^2
      case Dist::kAllEqual: v = equal; break;
      case Dist::kZeros: v = (i & 1) ? -0.0f : 0.0f; break;
    }
    x[i] = roundTo(v, dt);
  }
  return x;
}

// Raw buffer of x in dt.
inline Bytes toDtype(const std::vector<float>& x, zcollDataType_t dt) {
  Bytes b(x.size() * dtypeSize(dt));
  for (size_t i = 0; i < x.size(); ++i) {
    if (dt == zcollFloat16) {
      half_t h = floatToHalf(x[i]);
      std::memcpy(&b[2 * i], &h, 2);
    } else if (dt == zcollBfloat16) {
      bf16_t h = floatToBf16(x[i]);
      std::memcpy(&b[2 * i], &h, 2);
    } else {
      std::memcpy(&b[4 * i], &x[i], 4);
    }
  }
  return b;
}

inline std::vector<float> fromDtype(const void* p, size_t n, zcollDataType_t dt) {
  std::vector<float> x(n);
  const uint8_t* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    if (dt == zcollFloat16) {
      half_t h;
      std::memcpy(&h, b + 2 * i, 2);
      x[i] = halfToFloat(h);
    } else if (dt == zcollBfloat16) {
      bf16_t h;
      std::memcpy(&h, b + 2 * i, 2);
      x[i] = bf16ToFloat(h);
    } else {
      std::memcpy(&x[i], b + 4 * i, 4);
    }
  }
  return x;
}

inline QuantParams makeParams(int bits, int block, bool sym, bool sr = false, uint64_t seed = 0) {
  QuantParams p;
  p.bits = bits;
  p.blockSize = block;
  p.symmetric = sym;
  p.stochastic = sr;
  p.seed = seed;
  return p;
}

inline std::string paramStr(const QuantParams& p) {
  return "int" + std::to_string(p.bits) + "/B" + std::to_string(p.blockSize) +
         (p.symmetric ? "/sym" : "/asym") + (p.stochastic ? "/sr" : "/rne");
}

inline float readF(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

inline BlockParams blockParamsOf(const Bytes& q, size_t n, const QuantParams& p, size_t j) {
  Layout l = layoutOf(n, p.blockSize, p.bits, p.symmetric);
  return BlockParams{readF(&q[4 * j]), p.symmetric ? 0.0f : readF(&q[l.zerosOffset + 4 * j])};
}

inline int qValue(const Bytes& q, size_t n, const QuantParams& p, size_t i) {
  Layout l = layoutOf(n, p.blockSize, p.bits, p.symmetric);
  const uint8_t* v = &q[l.valuesOffset];
  return p.bits == 8 ? unpackByte(v[i], p.symmetric)
                     : unpackNibble(v[i / 2], static_cast<int>(i & 1), p.symmetric);
}

// ---- Reference: element by element on quant_math.h ------------------------------------------
inline Bytes refQuantize(const std::vector<float>& x, const QuantParams& p) {
  size_t n = x.size();
  Layout l = layoutOf(n, p.blockSize, p.bits, p.symmetric);
  Bytes out(l.totalBytes, 0);
  for (size_t j = 0; j < l.nblocks; ++j) {
    size_t e0 = j * p.blockSize, e1 = std::min(n, e0 + p.blockSize);
    uint32_t amax = 0;
    float mn = x[e0], mx = x[e0];
    for (size_t i = e0; i < e1; ++i) {
      amax = std::max(amax, floatBits(x[i]) & 0x7fffffffu);
      mn = std::min(mn, x[i]);
      mx = std::max(mx, x[i]);
    }
    BlockParams bp = p.symmetric ? symmetricParams(amax, p.bits)
                                 : asymmetricParams(amax, mn, mx, p.bits);
    std::memcpy(&out[4 * j], &bp.scale, 4);
    if (!p.symmetric) std::memcpy(&out[l.zerosOffset + 4 * j], &bp.zero, 4);
    if (!paramsQuantizable(bp)) continue;
    float rcp = quantReciprocal(bp.scale);
    for (size_t i = e0; i < e1; ++i) {
      float u = p.stochastic ? srUniform(p.seed, p.elementOffset + i) : 0.0f;
      int q = quantizeValue(x[i], bp, rcp, p.bits, p.symmetric, p.stochastic, u);
      uint8_t* v = &out[l.valuesOffset];
      if (p.bits == 8) {
        v[i] = static_cast<uint8_t>(q);
      } else {
        v[i / 2] |= static_cast<uint8_t>((q & 0xf) << (4 * (i & 1)));
      }
    }
  }
  return out;
}

inline float refDequantValue(const Bytes& q, size_t n, const QuantParams& p, size_t i) {
  BlockParams bp = blockParamsOf(q, n, p, i / p.blockSize);
  if (decodesToNan(bp.scale, bp.zero)) return bitsFloat(kCanonicalNan);
  return dequantizeValue(qValue(q, n, p, i), bp.scale, bp.zero, p.symmetric);
}

// fp32 sum in chunk order, NaN if any chunk's block is non-finite (not yet scaled).
inline float refSumValue(const std::vector<Bytes>& chunks, size_t n, const QuantParams& p,
                         size_t i) {
  float acc = 0.0f;
  for (size_t c = 0; c < chunks.size(); ++c) {
    float v = refDequantValue(chunks[c], n, p, i);
    if (std::isnan(v)) return bitsFloat(kCanonicalNan);
    acc = c == 0 ? v : acc + v;
  }
  return acc;
}

// Bytes that out (dtype) should hold for dequantizeSum.
inline Bytes refDequantSum(const std::vector<Bytes>& chunks, size_t n, const QuantParams& p,
                           float scale, zcollDataType_t dt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    float s = refSumValue(chunks, n, p, i);
    v[i] = std::isnan(s) ? s : s * scale;
  }
  return toDtype(v, dt);
}

inline Bytes refRequant(const std::vector<Bytes>& chunks, size_t n, const QuantParams& in,
                        const QuantParams& out) {
  std::vector<float> s(n);
  for (size_t i = 0; i < n; ++i) s[i] = refSumValue(chunks, n, in, i);
  return refQuantize(s, out);
}

// ---- Error bound ------------------------------------------------------------------------------
// One unit in the last place of |v| in dt (the rounding of the output).
inline double ulpOf(double v, zcollDataType_t dt) {
  int mant = dt == zcollFloat16 ? 10 : dt == zcollBfloat16 ? 7 : 23;
  int emin = dt == zcollFloat16 ? -14 : -126;
  int e = v == 0.0 ? emin : std::max(emin, std::ilogb(std::fabs(v)));
  return std::ldexp(1.0, e - mant);
}

// |x - x'| <= scale/2 (plus the fp32 rounding of the scaled value, of x - zero and of
// zero + q*scale) plus one unit of the output dtype.
inline double elementBound(float x, float xq, BlockParams bp, zcollDataType_t outDt) {
  double b = bp.scale * (0.5 + std::ldexp(1.0, -15));
  b += std::ldexp(std::fabs(x) + std::fabs(bp.zero) + std::fabs(xq), -21);
  return b + ulpOf(xq, outDt) + ulpOf(xq, zcollFloat32) + std::ldexp(1.0, -148);
}

// ---- ISA variants -------------------------------------------------------------------------------
inline std::vector<Isa> supportedIsas() {
  std::vector<Isa> v;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (isaSupported(isa)) v.push_back(isa);
  }
  return v;
}

struct IsaGuard {
  explicit IsaGuard(Isa isa) { EXPECT_EQ(setIsaOverride(isa), zcollSuccess); }
  ~IsaGuard() { clearIsaOverride(); }
};

inline bool sameBits(const void* a, const void* b, size_t bytes) {
  return std::memcmp(a, b, bytes) == 0;
}

inline size_t firstDiff(const Bytes& a, const Bytes& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (a[i] != b[i]) return i;
  }
  return a.size() == b.size() ? SIZE_MAX : std::min(a.size(), b.size());
}

}  // namespace test
}  // namespace quant
}  // namespace zcoll
