// Portable scalar variant (one lane): the reference the SIMD variants must match byte for byte.
#include <cstdint>

#include "base/dtype.h"
#include "quant/quant_math.h"

namespace zcoll {
namespace quant {
namespace scalar {

struct Vec {
  static constexpr int W = 1;
  static constexpr const char* kName = "scalar";
  using VF = float;
  using VI = int32_t;

  static VF set1(float f) { return f; }
  static VF load(const float* p) { return *p; }
  static VF load(const half_t* p) { return halfToFloat(*p); }
  static VF load(const bf16_t* p) { return bf16ToFloat(*p); }
  template <class T>
  static VF loadPartial(const T* p, int) { return load(p); }
  static VF fillLane0(VF v, int) { return v; }
  static void store(float* p, VF v) { *p = v; }
  static void store(half_t* p, VF v) { *p = floatToHalf(v); }
  static void store(bf16_t* p, VF v) { *p = floatToBf16(v); }
  static constexpr bool kBf16PairStore = false;
  template <class T>
  static void storePartial(T* p, VF v, int) { store(p, v); }

  template <class T>
  static uint32_t absMax16(const T* x, int len) {
    uint32_t m = 0;
    for (int i = 0; i < len; ++i) {
      uint32_t b = floatBits(load(x + i)) & 0x7fffffffu;
      m = b > m ? b : m;
    }
    return m;
  }
  static VI absBits(VF v) { return static_cast<VI>(floatBits(v) & 0x7fffffffu); }
  static VI maxU(VI a, VI b) { return static_cast<uint32_t>(a) > static_cast<uint32_t>(b) ? a : b; }
  static uint32_t reduceMaxU(VI a) { return static_cast<uint32_t>(a); }
  static VF min(VF a, VF b) { return b < a ? b : a; }
  static VF max(VF a, VF b) { return b > a ? b : a; }
  static float reduceMin(VF a) { return a; }
  static float reduceMax(VF a) { return a; }

  static VF add(VF a, VF b) { return addRn(a, b); }
  static VF sub(VF a, VF b) { return subRn(a, b); }
  static VF mul(VF a, VF b) { return mulRn(a, b); }
  static VF div(VF a, VF b) { return divRn(a, b); }
  static VF toFloat(VI q) { return static_cast<float>(q); }

  // Out-of-range values (only in discarded tail lanes) saturate instead of overflowing int.
  static VI toInt(float r) {
    r = r < -1.0e9f ? -1.0e9f : (r > 1.0e9f ? 1.0e9f : r);
    return static_cast<VI>(r);
  }
  static VI roundRne(VF t) { return toInt(rintRn(t)); }
  static VI roundSr(VF t, VF u) { return toInt(roundStochastic(t, u)); }
  static VI clamp(VI q, int lo, int hi) { return q < lo ? lo : (q > hi ? hi : q); }
  static VF uniform(SrKey k, uint32_t lo) { return srUniformFromHash(srHash(k, lo)); }

  template <int Bits>
  static void pack(VI a, VI b, uint8_t* dst) {
    if (Bits == 8) {
      dst[0] = static_cast<uint8_t>(a);
      dst[1] = static_cast<uint8_t>(b);
    } else {
      dst[0] = packNibbles(a, b);
    }
  }
  static constexpr bool kPack4 = false;
  static constexpr bool kEvenOddDecode = false;  // INT4 decodes in element order (but see kNibbleTable)
  static constexpr bool kNibbleTable = false;  // INT4 decodes arithmetically
  static constexpr bool kScaledEvenOdd = false;
  static constexpr bool kEvenOddPack = false;  // requantize sums in element order
  template <int Bits, bool Sym>
  static void unpack(const uint8_t* src, VI& a, VI& b) {
    if (Bits == 8) {
      a = unpackByte(src[0], Sym);
      b = unpackByte(src[1], Sym);
    } else {
      a = unpackNibble(src[0], 0, Sym);
      b = unpackNibble(src[0], 1, Sym);
    }
  }
};

}  // namespace scalar
}  // namespace quant
}  // namespace zcoll

#define ZCOLL_QUANT_ISA_NS scalar
#include "quant/kernels_impl.h"
