// Data types: element sizes, names, and bit-exact fp16/bf16 <-> fp32 conversions.
// The conversions are __host__ __device__ (ZCOLL_HD) so CPU and CUDA code round identically
// (round to nearest even, NaN stays NaN, overflow goes to Inf).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "zcoll/zcoll.h"

#if defined(__CUDACC__)
#define ZCOLL_HD __host__ __device__ __forceinline__
#else
#define ZCOLL_HD inline
#endif

namespace zcoll {

// Storage types for the 16-bit floats (raw bits; arithmetic happens in fp32).
struct half_t {
  uint16_t bits;
};
struct bf16_t {
  uint16_t bits;
};

ZCOLL_HD uint32_t floatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

ZCOLL_HD float bitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

ZCOLL_HD float bf16ToFloat(bf16_t h) { return bitsFloat(static_cast<uint32_t>(h.bits) << 16); }

ZCOLL_HD bf16_t floatToBf16(float f) {
  uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16_t{static_cast<uint16_t>((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return bf16_t{static_cast<uint16_t>(u >> 16)};
}

ZCOLL_HD float halfToFloat(half_t h) {
  uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  uint32_t exp = (h.bits >> 10) & 0x1fu;
  uint32_t man = h.bits & 0x3ffu;
  if (exp == 0x1fu) return bitsFloat(sign | 0x7f800000u | (man << 13));  // Inf / NaN
  if (exp == 0) {
    if (man == 0) return bitsFloat(sign);
    // Subnormal: value = man * 2^-24, exact in fp32.
    float v = static_cast<float>(man) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return bitsFloat(sign | ((exp + 112u) << 23) | (man << 13));
}

ZCOLL_HD half_t floatToHalf(float f) {
  uint32_t u = floatBits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return half_t{static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu))};
  if (a >= 0x477ff000u) return half_t{static_cast<uint16_t>(sign | 0x7c00u)};  // rounds to Inf
  if (a < 0x38800000u) {
    // Result is subnormal (or zero): scale to units of 2^-24 and round to nearest even.
    // a < 2^-14, so a * 2^24 < 2^10 and the float addition trick rounds exactly.
    float v = bitsFloat(a) * 16777216.0f;  // exact (power of two)
    float r = v + 8388608.0f;              // 2^23: forces rounding to an integer, RNE
    uint32_t q = floatBits(r) - 0x4b000000u;
    return half_t{static_cast<uint16_t>(sign | q)};
  }
  uint32_t rounded = a + 0xfffu + ((a >> 13) & 1u);  // RNE on the 13 dropped bits
  return half_t{static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13))};
}

// Element size in bytes; 0 for an invalid type.
inline size_t dtypeSize(zcollDataType_t t) {
  switch (t) {
    case zcollInt8:
    case zcollUint8: return 1;
    case zcollFloat16:
    case zcollBfloat16: return 2;
    case zcollInt32:
    case zcollUint32:
    case zcollFloat32: return 4;
    case zcollInt64:
    case zcollUint64:
    case zcollFloat64: return 8;
    default: return 0;
  }
}

inline bool dtypeValid(int t) { return t >= 0 && t < zcollNumTypes; }
inline bool opValid(int op) { return op >= 0 && op < zcollNumOps; }
inline bool isHalfType(zcollDataType_t t) { return t == zcollFloat16 || t == zcollBfloat16; }

const char* dtypeName(zcollDataType_t t);
const char* opName(zcollRedOp_t op);

}  // namespace zcoll
