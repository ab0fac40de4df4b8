// AVX2 + F16C variant: 8 fp32 lanes, explicit round-to-nearest-even everywhere (same bytes as the
// scalar variant). Partial vectors go through a small stack buffer.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "base/dtype.h"
#include "quant/quant_math.h"

namespace zcoll {
namespace quant {
namespace avx2 {

struct Vec {
  static constexpr int W = 8;
  static constexpr const char* kName = "avx2";
  using VF = __m256;
  using VI = __m256i;

  static VI i32(uint32_t v) { return _mm256_set1_epi32(static_cast<int>(v)); }
  static VI iota() { return _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7); }
  static __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

  static VF set1(float f) { return _mm256_set1_ps(f); }
  static VF load(const float* p) { return _mm256_loadu_ps(p); }
  static VF load(const half_t* p) { return _mm256_cvtph_ps(load128(p)); }
  static VF load(const bf16_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16));
  }
  template <class T>
  static VF loadPartial(const T* p, int n) {
    alignas(32) T tmp[W];
    std::memset(tmp, 0, sizeof(tmp));
    std::memcpy(tmp, p, n * sizeof(T));
    return load(tmp);
  }
  static VF fillLane0(VF v, int n) {
    VF lane0 = _mm256_permutevar8x32_ps(v, _mm256_setzero_si256());
    VF valid = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), iota()));
    return _mm256_blendv_ps(lane0, v, valid);
  }

  static __m128i toHalf(VF v) {
    return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  // floatToBf16 of base/dtype.h, lane-wise, in the high 16 bits (low bits: garbage): RNE. Not
  // for NaN input with a payload (the carry can reach the exponent; the default NaN is fine).
  static VI bf16HighNoNan(VF v) {
    VI u = _mm256_castps_si256(v);
    VI lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), i32(1));
    return _mm256_add_epi32(u, _mm256_add_epi32(i32(0x7fff), lsb));
  }
  // floatToBf16 of base/dtype.h, lane-wise: RNE, NaN stays NaN (quiet).
  static __m128i toBf16(VF v) {
    VI u = _mm256_castps_si256(v);
    VI lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), i32(1));
    VI r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(i32(0x7fff), lsb)), 16);
    // NaN: |u| > 0x7f800000 (signed compare is safe: both sides are non-negative)
    VI nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, i32(0x7fffffff)), i32(kExpMask));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(u, 16), i32(0x40)), nan);
    VI packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    return _mm256_castsi256_si128(packed);
  }
  static void store(float* p, VF v) { _mm256_storeu_ps(p, v); }
  static void store(half_t* p, VF v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), toHalf(v)); }
  static void store(bf16_t* p, VF v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), toBf16(v)); }
  // Two vectors of values that are not NaN-with-payload (dequantized values: a block whose
  // parameters are not finite is filled with the canonical NaN separately) as 16 bf16: one
  // unsigned pack of the high words, one cross-lane fix-up, one store.
  static constexpr bool kBf16PairStore = true;
  static void storeBf16Pair(bf16_t* p, VF a, VF b) {
    VI ha = _mm256_srli_epi32(bf16HighNoNan(a), 16), hb = _mm256_srli_epi32(bf16HighNoNan(b), 16);
    VI w = _mm256_permute4x64_epi64(_mm256_packus_epi32(ha, hb), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), w);
  }
  template <class T>
  static void storePartial(T* p, VF v, int n) {
    alignas(32) T tmp[W];
    store(tmp, v);
    std::memcpy(p, tmp, n * sizeof(T));
  }

  // max over |x| of 16-bit floats as fp32 bits (see blockStats).
  template <class T>
  static uint32_t absMax16(const T* x, int len) {
    const __m256i mag = _mm256_set1_epi16(0x7fff);
    __m256i m = _mm256_setzero_si256();
    int i = 0;
    for (; i + 16 <= len; i += 16) {
      m = _mm256_max_epu16(m, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), mag));
    }
    if (i < len) {
      alignas(32) uint16_t tmp[16] = {};
      std::memcpy(tmp, x + i, (len - i) * 2);
      m = _mm256_max_epu16(m, _mm256_and_si256(_mm256_load_si256(reinterpret_cast<const __m256i*>(tmp)), mag));
    }
    uint32_t h = reduceMaxU(_mm256_max_epu32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(m)),
                                             _mm256_cvtepu16_epi32(_mm256_extracti128_si256(m, 1))));
    if (!std::is_same<T, half_t>::value) return h << 16;
    return floatBits(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(h)))));
  }
  static VI absBits(VF v) { return _mm256_and_si256(_mm256_castps_si256(v), i32(0x7fffffff)); }
  // The bits of v doubled: |v| as bits, times 2 (the sign shifted out), without a constant.
  static VI bitsTwice(VF v) {
    return _mm256_add_epi32(_mm256_castps_si256(v), _mm256_castps_si256(v));
  }
  static VI maxU(VI a, VI b) { return _mm256_max_epu32(a, b); }
  static uint32_t reduceMaxU(VI a) {
    __m128i m = _mm_max_epu32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    m = _mm_max_epu32(m, _mm_shuffle_epi32(m, 0x4e));
    m = _mm_max_epu32(m, _mm_shuffle_epi32(m, 0xb1));
    return static_cast<uint32_t>(_mm_cvtsi128_si32(m));
  }
  static VF min(VF a, VF b) { return _mm256_min_ps(a, b); }
  static VF max(VF a, VF b) { return _mm256_max_ps(a, b); }
  static float reduceMin(VF a) {
    __m128 m = _mm_min_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_min_ps(m, _mm_shuffle_ps(m, m, 0x4e));
    m = _mm_min_ps(m, _mm_shuffle_ps(m, m, 0xb1));
    return _mm_cvtss_f32(m);
  }
  static float reduceMax(VF a) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_max_ps(m, _mm_shuffle_ps(m, m, 0x4e));
    m = _mm_max_ps(m, _mm_shuffle_ps(m, m, 0xb1));
    return _mm_cvtss_f32(m);
  }

  static VF add(VF a, VF b) { return _mm256_add_ps(a, b); }
  static VF sub(VF a, VF b) { return _mm256_sub_ps(a, b); }
  static VF mul(VF a, VF b) { return _mm256_mul_ps(a, b); }
  static VF div(VF a, VF b) { return _mm256_div_ps(a, b); }
  static VF toFloat(VI q) { return _mm256_cvtepi32_ps(q); }

  // The current rounding mode, which quant.cc pins to round-to-nearest-even (PinnedFpEnv).
  static VI roundRne(VF t) { return _mm256_cvtps_epi32(t); }
  static VI roundSr(VF t, VF u) {
    VF f = _mm256_floor_ps(t);
    VI up = _mm256_castps_si256(_mm256_cmp_ps(u, _mm256_sub_ps(t, f), _CMP_LT_OQ));
    return _mm256_sub_epi32(_mm256_cvttps_epi32(f), up);  // up is -1 where rounding up
  }
  static VI clamp(VI q, int lo, int hi) {
    return _mm256_min_epi32(_mm256_max_epi32(q, _mm256_set1_epi32(lo)), _mm256_set1_epi32(hi));
  }

  static VI mix32(VI x) {
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
    x = _mm256_mullo_epi32(x, i32(0x7feb352du));
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
    x = _mm256_mullo_epi32(x, i32(0x846ca68bu));
    return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
  }
  static VF uniform(SrKey k, uint32_t lo) {
    VI idx = _mm256_add_epi32(i32(lo), iota());
    VI h = mix32(_mm256_xor_si256(mix32(_mm256_xor_si256(idx, i32(k.a))), i32(k.b)));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(h, 8)),
                         _mm256_set1_ps(5.9604644775390625e-08f));
  }

  // 16 values -> 16 bytes (int8) or 8 bytes (INT4, element 2i in the low nibble).
  template <int Bits>
  static void pack(VI a, VI b, uint8_t* dst) {
    // int16 lanes in element order (values are within [-127, 255]: no saturation).
    VI w = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xd8);
    if (Bits == 8) {
      VI lo8 = _mm256_and_si256(w, _mm256_set1_epi16(0x00ff));
      __m128i bytes = _mm_packus_epi16(_mm256_castsi256_si128(lo8), _mm256_extracti128_si256(lo8, 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), bytes);
      return;
    }
    // 32-bit lanes: element 2i | element 2i+1 << 16
    VI nib = _mm256_or_si256(_mm256_and_si256(w, i32(0x0f)),
                             _mm256_and_si256(_mm256_srli_epi32(w, 12), i32(0xf0)));
    __m128i n16 = _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(nib, nib), 0x08));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), _mm_packus_epi16(n16, n16));
  }

  // 32 values (a, b, c, d in element order) -> 32 bytes (int8) or 16 bytes (INT4): two 32->16
  // packs, one 16->8 pack (unsigned for asymmetric INT8: [0, 255]), one dword permutation to
  // undo the per-lane interleave, then for INT4 the nibble merge of byte pairs and one more pack.
  static constexpr bool kPack4 = true;
  template <int Bits, bool Sym>
  static void pack4(VI a, VI b, VI c, VI d, uint8_t* dst) {
    VI w1 = _mm256_packs_epi32(a, b), w2 = _mm256_packs_epi32(c, d);
    VI bytes = Bits == 8 && !Sym ? _mm256_packus_epi16(w1, w2) : _mm256_packs_epi16(w1, w2);
    bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    if (Bits == 8) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), bytes);
      return;
    }
    VI nib = _mm256_or_si256(_mm256_and_si256(bytes, _mm256_set1_epi16(0x000f)),
                             _mm256_and_si256(_mm256_srli_epi16(bytes, 4), _mm256_set1_epi16(0x00f0)));
    __m128i packed = _mm_packus_epi16(_mm256_castsi256_si128(nib), _mm256_extracti128_si256(nib, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), packed);
  }

  // INT4 decoded in even/odd form (kernels_impl.h: kEvenOddDecode), as exact floats: 8 bytes
  // zero-extended to dwords; the even elements are the low nibbles, the odd ones the high
  // nibbles. No conversion instruction: the nibble (sign bit flipped when symmetric) placed in
  // the mantissa of 2^23 is the float 2^23 + q + 8 (symmetric) or 2^23 + q, and one subtraction
  // of that bias gives q exactly. Bitwise operations run on every vector pipe, where a shift
  // pair and a conversion compete for two (3 % faster 4-chunk sums in cache on Zen 3).
  static constexpr bool kEvenOddDecode = true;
  template <bool Sym>
  static void unpackEvenOddFloat(const uint8_t* src, VF& even, VF& odd) {
    VI x = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src)));
    const VI magic = i32(Sym ? 0x4b000008u : 0x4b000000u);
    const VF bias = set1(Sym ? 8388616.0f : 8388608.0f);
    VI e = _mm256_xor_si256(_mm256_and_si256(x, i32(0x0f)), magic);
    VI o = _mm256_xor_si256(_mm256_srli_epi32(x, 4), magic);
    even = _mm256_sub_ps(_mm256_castsi256_ps(e), bias);
    odd = _mm256_sub_ps(_mm256_castsi256_ps(o), bias);
  }
  // The same values, scaled by powers of two so that each half costs one bitwise operation and a
  // conversion (kernels_impl.h: BlockDecoder's scaled decode): the nibbles moved to where a
  // sign-extending (symmetric) or zero-extending load leaves them. Symmetric: the even nibble
  // shifted to the top of the dword is q * 2^28, the odd one with the low nibble cleared is
  // q * 16 (the load sign-extended the byte, whose sign is the odd nibble's). Asymmetric: the
  // low nibble is q, the high nibble in place q * 16. Every value is exact (at most 4 significant
  // bits); the decoder multiplies by scale times the factors below, which it uses only where
  // those products are exact, so q * scale rounds identically.
  static constexpr bool kScaledEvenOdd = true;
  static constexpr float kEvenFactorSym = 1.0f / 268435456.0f;  // 2^-28
  static constexpr float kEvenFactorAsym = 1.0f;
  static constexpr float kOddFactor = 1.0f / 16.0f;
  template <bool Sym>
  static void unpackEvenOddScaled(const uint8_t* src, VF& even, VF& odd) {
    __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src));
    if (Sym) {
      VI x = _mm256_cvtepi8_epi32(b);
      even = _mm256_cvtepi32_ps(_mm256_slli_epi32(x, 28));
      odd = _mm256_cvtepi32_ps(_mm256_and_si256(x, i32(0xfffffff0u)));
    } else {
      VI x = _mm256_cvtepu8_epi32(b);
      even = _mm256_cvtepi32_ps(_mm256_and_si256(x, i32(0x0f)));
      odd = _mm256_cvtepi32_ps(_mm256_and_si256(x, i32(0xf0)));
    }
  }

  // INT4 values of groups of 2W elements held as even / odd vectors (kernels_impl.h: the
  // requantize block sum), kEvenOddPackGroups groups at a time -> 4W bytes: even and odd values
  // each narrowed to bytes by two 32->16 packs and one 16->8 pack (both in the same lane
  // order), merged as low / high nibbles, one dword permutation to element order.
  static constexpr bool kEvenOddPack = true;
  static constexpr int kEvenOddPackGroups = 4;
  static void packEvenOdd(const VI* e, const VI* o, uint8_t* dst) {
    VI eb = _mm256_packs_epi16(_mm256_packs_epi32(e[0], e[1]), _mm256_packs_epi32(e[2], e[3]));
    VI ob = _mm256_packs_epi16(_mm256_packs_epi32(o[0], o[1]), _mm256_packs_epi32(o[2], o[3]));
    VI nib = _mm256_or_si256(_mm256_and_si256(eb, _mm256_set1_epi8(0x0f)),
                             _mm256_and_si256(_mm256_slli_epi16(ob, 4),
                                              _mm256_set1_epi8(static_cast<char>(0xf0))));
    nib = _mm256_permutevar8x32_epi32(nib, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), nib);
  }

  // Elements 2i (even[i]) and 2i + 1 (odd[i]) stored in element order.
  static void storeEvenOdd(float* p, VF even, VF odd) {
    VF lo = _mm256_unpacklo_ps(even, odd), hi = _mm256_unpackhi_ps(even, odd);
    _mm256_storeu_ps(p, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(p + W, _mm256_permute2f128_ps(lo, hi, 0x31));
  }
  static void storeEvenOdd(half_t* p, VF even, VF odd) {
    __m128i he = toHalf(even), ho = toHalf(odd);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_unpacklo_epi16(he, ho));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + W), _mm_unpackhi_epi16(he, ho));
  }
  static void storeEvenOdd(bf16_t* p, VF even, VF odd) {  // not for NaN (see storeBf16Pair)
    VI lo = _mm256_srli_epi32(bf16HighNoNan(even), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm256_blend_epi16(lo, bf16HighNoNan(odd), 0xaa));
  }

  static constexpr bool kNibbleTable = false;  // INT4 decodes arithmetically (below)
  // 16 values from src: INT8 by two sign/zero-extending loads; INT4 (8 bytes) by broadcasting
  // the bytes to both lanes, placing byte i/2 in dword i (one shuffle per vector), and moving
  // nibble i%2 to the top of the dword (variable shift) before an arithmetic or logical shift
  // down by 28: sign-extended (symmetric) or zero-extended (asymmetric) in element order.
  template <int Bits, bool Sym>
  static void unpack(const uint8_t* src, VI& a, VI& b) {
    if (Bits == 8) {
      __m128i lo = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src));
      __m128i hi = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + 8));
      a = Sym ? _mm256_cvtepi8_epi32(lo) : _mm256_cvtepu8_epi32(lo);
      b = Sym ? _mm256_cvtepi8_epi32(hi) : _mm256_cvtepu8_epi32(hi);
      return;
    }
    int64_t raw;
    std::memcpy(&raw, src, 8);
    VI x = _mm256_set1_epi64x(raw);
    const char z = -1;  // pshufb: a set high bit writes 0
    const VI placeA = _mm256_setr_epi8(0, z, z, z, 0, z, z, z, 1, z, z, z, 1, z, z, z,
                                       2, z, z, z, 2, z, z, z, 3, z, z, z, 3, z, z, z);
    const VI placeB = _mm256_setr_epi8(4, z, z, z, 4, z, z, z, 5, z, z, z, 5, z, z, z,
                                       6, z, z, z, 6, z, z, z, 7, z, z, z, 7, z, z, z);
    const VI toTop = _mm256_setr_epi32(28, 24, 28, 24, 28, 24, 28, 24);
    VI ta = _mm256_sllv_epi32(_mm256_shuffle_epi8(x, placeA), toTop);
    VI tb = _mm256_sllv_epi32(_mm256_shuffle_epi8(x, placeB), toTop);
    a = Sym ? _mm256_srai_epi32(ta, 28) : _mm256_srli_epi32(ta, 28);
    b = Sym ? _mm256_srai_epi32(tb, 28) : _mm256_srli_epi32(tb, 28);
  }
};

}  // namespace avx2
}  // namespace quant
}  // namespace zcoll

#define ZCOLL_QUANT_ISA_NS avx2
#include "quant/kernels_impl.h"

#else  // not x86-64: no AVX2 variant (isaSupported reports false)
#include "quant/isa.h"
namespace zcoll {
namespace quant {
namespace avx2 {
const KernelSet& kernels() { return scalar::kernels(); }
}  // namespace avx2
}  // namespace quant
}  // namespace zcoll
#endif
