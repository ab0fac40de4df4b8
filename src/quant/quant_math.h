// Block quantization math: the one definition of the wire layout, the per-block parameters,
// rounding, packing, non-finite handling and the stochastic-rounding hash. Included by the CPU
// kernels (src/quant) and the CUDA kernels (cuda/); every variant composes exactly these IEEE
// operations (no FMA contraction, division correctly rounded), so all produce identical bytes.
// Specification: docs/WIRE_FORMAT.md (version kWireFormatVersion).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/dtype.h"

// Host copies are static so that the per-ISA translation units (compiled with -mavx2 / -mavx512*)
// never share an out-of-line copy with the baseline code.
#if defined(__CUDACC__)
#define ZCOLL_QHD __host__ __device__ __forceinline__
#else
#define ZCOLL_QHD static inline __attribute__((always_inline))
#endif

namespace zcoll {
namespace quant {

constexpr uint32_t kWireFormatVersion = 3;
constexpr int kMinBlockSize = 32;
constexpr int kMaxBlockSize = 4096;
constexpr int kBlockSizeMultiple = 32;
constexpr uint32_t kCanonicalNan = 0x7fc00000u;  // what a non-finite block dequantizes to
constexpr uint32_t kExpMask = 0x7f800000u;

// Bit casts: floatBits / bitsFloat from base/dtype.h (shared with the fp16/bf16 code).

// Correctly rounded (round-to-nearest-even) IEEE operations, never contracted into FMAs.
#if defined(__CUDA_ARCH__)
ZCOLL_QHD float addRn(float a, float b) { return __fadd_rn(a, b); }
ZCOLL_QHD float subRn(float a, float b) { return __fsub_rn(a, b); }
ZCOLL_QHD float mulRn(float a, float b) { return __fmul_rn(a, b); }
ZCOLL_QHD float divRn(float a, float b) { return __fdiv_rn(a, b); }
ZCOLL_QHD float rintRn(float a) { return rintf(a); }
ZCOLL_QHD float floorRn(float a) { return floorf(a); }
#else
ZCOLL_QHD float addRn(float a, float b) { return a + b; }
ZCOLL_QHD float subRn(float a, float b) { return a - b; }
ZCOLL_QHD float mulRn(float a, float b) { return a * b; }
ZCOLL_QHD float divRn(float a, float b) { return a / b; }
ZCOLL_QHD float rintRn(float a) { return std::nearbyint(a); }  // default rounding mode: RNE
ZCOLL_QHD float floorRn(float a) { return std::floor(a); }
#endif

ZCOLL_QHD bool finiteBits(uint32_t u) { return (u & kExpMask) != kExpMask; }
ZCOLL_QHD size_t align16(size_t x) { return (x + 15) & ~static_cast<size_t>(15); }

// ---- Wire layout of one chunk (header-free, fixed by n, B, bits, mode) ----------------------
struct Layout {
  size_t nblocks;
  size_t zerosOffset;   // asymmetric only: fp32 minimums [nblocks]
  size_t valuesOffset;  // packed values
  size_t valuesBytes;   // n (int8) or ceil(n/2) (int4)
  size_t totalBytes;    // multiple of 16
};

// bits 16 (16-bit floats, no block parameters): the n values from offset 0, 2n bytes.
ZCOLL_QHD Layout layoutOf(size_t n, int blockSize, int bits, bool symmetric) {
  Layout l;
  l.nblocks = (n + blockSize - 1) / blockSize;
  const bool wide = bits == 16;
  size_t scalesEnd = wide ? 0 : align16(l.nblocks * 4);
  l.zerosOffset = scalesEnd;
  l.valuesOffset = symmetric || wide ? scalesEnd : scalesEnd + align16(l.nblocks * 4);
  l.valuesBytes = wide ? 2 * n : bits == 8 ? n : (n + 1) / 2;
  l.totalBytes = align16(l.valuesOffset + l.valuesBytes);
  return l;
}

// ---- Per-block parameters ------------------------------------------------------------------
struct BlockParams {
  float scale;  // NaN marks a non-finite block; 0 marks an all-zero (or all-equal) block
  float zero;   // asymmetric: the block minimum; symmetric: 0 (not stored)
};

ZCOLL_QHD int qLow(int bits, bool symmetric) { return symmetric ? -((1 << (bits - 1)) - 1) : 0; }
ZCOLL_QHD int qHigh(int bits, bool symmetric) {
  return symmetric ? (1 << (bits - 1)) - 1 : (1 << bits) - 1;
}

ZCOLL_QHD BlockParams nonFiniteParams() { return BlockParams{bitsFloat(kCanonicalNan), bitsFloat(kCanonicalNan)}; }

// A scale that underflows to 0 for a nonzero block becomes the smallest subnormal: every value
// of such a block is then an exact multiple of it, so the error bound still holds (error 0).
ZCOLL_QHD float scaleFor(float range, int levels) {
  float s = divRn(range, static_cast<float>(levels));
  return s == 0.0f ? bitsFloat(1u) : s;
}

// maxAbsBits: max over the block of (bits(x) & 0x7fffffff), which also detects NaN/Inf.
ZCOLL_QHD BlockParams symmetricParams(uint32_t maxAbsBits, int bits) {
  if (maxAbsBits >= kExpMask) return nonFiniteParams();
  if (maxAbsBits == 0) return BlockParams{0.0f, 0.0f};
  return BlockParams{scaleFor(bitsFloat(maxAbsBits), qHigh(bits, true)), 0.0f};
}

// mn/mx: block minimum and maximum (any order of reduction: -0 and +0 are canonicalized here).
// A block whose dequantized top level would overflow fp32 (range beyond FLT_MAX) is treated as
// non-finite: it dequantizes to NaN rather than to a wrong finite value.
ZCOLL_QHD BlockParams asymmetricParams(uint32_t maxAbsBits, float mn, float mx, int bits) {
  if (maxAbsBits >= kExpMask) return nonFiniteParams();
  mn = addRn(mn, 0.0f);
  mx = addRn(mx, 0.0f);
  float range = subRn(mx, mn);
  if (range == 0.0f) return BlockParams{0.0f, mn};
  int levels = qHigh(bits, false);
  float s = scaleFor(range, levels);
  float top = addRn(mn, mulRn(static_cast<float>(levels), s));
  if (!finiteBits(floatBits(range)) || !finiteBits(floatBits(top))) return nonFiniteParams();
  return BlockParams{s, mn};
}

ZCOLL_QHD bool paramsQuantizable(BlockParams p) { return finiteBits(floatBits(p.scale)) && p.scale != 0.0f; }

// ---- Element math (preconditions: paramsQuantizable(p)) ------------------------------------
// The scaled value is t = (x - zero) * r with r = RN(1 / scale), computed once per block: a
// multiplication, which every variant vectorizes (a correctly rounded division does not), and
// |t - (x - zero) / scale| <= 2^-23 |t| < 2^-15, inside the documented error bound. r is finite
// and normal for every scale >= 2^-128; below that (blocks of magnitude < 1e-36) r is 0 and
// t = RN((x - zero) / scale) instead.
ZCOLL_QHD float quantReciprocal(float scale) {
  float r = divRn(1.0f, scale);
  return finiteBits(floatBits(r)) ? r : 0.0f;
}

ZCOLL_QHD float scaledValue(float x, BlockParams p, float rcp, bool symmetric) {
  float d = symmetric ? x : subRn(x, p.zero);
  return rcp != 0.0f ? mulRn(d, rcp) : divRn(d, p.scale);
}

// Stochastic rounding: floor(t) + 1 with probability frac(t), u uniform in [0, 1).
ZCOLL_QHD float roundStochastic(float t, float u) {
  float f = floorRn(t);
  return u < subRn(t, f) ? addRn(f, 1.0f) : f;
}

ZCOLL_QHD int quantizeValue(float x, BlockParams p, float rcp, int bits, bool symmetric,
                            bool stochastic, float u) {
  float t = scaledValue(x, p, rcp, symmetric);
  float r = stochastic ? roundStochastic(t, u) : rintRn(t);
  float lo = static_cast<float>(qLow(bits, symmetric));
  float hi = static_cast<float>(qHigh(bits, symmetric));
  r = r < lo ? lo : (r > hi ? hi : r);
  return static_cast<int>(r);
}

// A block decodes to the canonical NaN when its stored scale, or (asymmetric) zero, is not finite.
// The encoder writes NaN for non-finite blocks; any other non-finite parameter can only come from
// corrupted bytes, and treating it alike keeps every decoder's output the same (no NaN payload
// or infinite parameter ever reaches the arithmetic or the output conversion).
ZCOLL_QHD bool decodesToNan(float scale, float zero) {
  return !finiteBits(floatBits(scale)) || !finiteBits(floatBits(zero));
}

ZCOLL_QHD float dequantizeValue(int q, float scale, float zero, bool symmetric) {
  float v = mulRn(static_cast<float>(q), scale);
  return symmetric ? v : addRn(zero, v);
}

// ---- Packing: int8 as one byte (two's complement / unsigned), INT4 two per byte -------------
ZCOLL_QHD uint8_t packNibbles(int even, int odd) {
  return static_cast<uint8_t>((even & 0xf) | ((odd & 0xf) << 4));
}

ZCOLL_QHD int unpackNibble(uint8_t byte, int which, bool symmetric) {
  int v = which ? (byte >> 4) : (byte & 0xf);
  return symmetric ? ((v ^ 8) - 8) : v;
}

ZCOLL_QHD int unpackByte(uint8_t byte, bool symmetric) {
  return symmetric ? static_cast<int>(static_cast<int8_t>(byte)) : static_cast<int>(byte);
}

// ---- Stochastic rounding hash: counter-based on (seed, global element index) ----------------
ZCOLL_QHD uint32_t mix32(uint32_t x) {  // "lowbias32" (C. Wellons), a bijection
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

ZCOLL_QHD uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

struct SrKey {
  uint32_t a, b;
};

// Key for the 2^32 indices sharing the upper half `hi` of the global index.
ZCOLL_QHD SrKey srKey(uint64_t seed, uint32_t hi) {
  uint64_t z = splitmix64(seed ^ splitmix64(hi));
  return SrKey{static_cast<uint32_t>(z), static_cast<uint32_t>(z >> 32)};
}

ZCOLL_QHD uint32_t srHash(SrKey k, uint32_t lo) { return mix32(mix32(lo ^ k.a) ^ k.b); }

// 24 random bits as a float in [0, 1) (exact).
ZCOLL_QHD float srUniformFromHash(uint32_t h) {
  return static_cast<float>(h >> 8) * 5.9604644775390625e-08f;
}

ZCOLL_QHD float srUniform(uint64_t seed, uint64_t index) {
  return srUniformFromHash(
      srHash(srKey(seed, static_cast<uint32_t>(index >> 32)), static_cast<uint32_t>(index)));
}

}  // namespace quant
}  // namespace zcoll
