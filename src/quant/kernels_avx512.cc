// AVX-512 (F/BW/VL/DQ) + F16C variant: 16 fp32 lanes; fp16 via vcvtph2ps/vcvtps2ph, bf16 and all
// rounding with explicit round-to-nearest-even, so results equal the scalar variant's bytes.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "base/dtype.h"
#include "quant/quant_math.h"

namespace zcoll {
namespace quant {
namespace avx512 {

struct Vec {
  static constexpr int W = 16;
  static constexpr const char* kName = "avx512";
  using VF = __m512;
  using VI = __m512i;

  static __mmask16 mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static VI i32(uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }

  static VF set1(float f) { return _mm512_set1_ps(f); }
  static VF load(const float* p) { return _mm512_loadu_ps(p); }
  static VF load(const half_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static VF bf16Widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static VF load(const bf16_t* p) {
    return bf16Widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static VF loadPartial(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static VF loadPartial(const half_t* p, int n) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask(n), p));
  }
  static VF loadPartial(const bf16_t* p, int n) {
    return bf16Widen(_mm256_maskz_loadu_epi16(mask(n), p));
  }
  static VF fillLane0(VF v, int n) {
    VF lane0 = _mm512_permutexvar_ps(_mm512_setzero_si512(), v);
    return _mm512_mask_blend_ps(mask(n), lane0, v);
  }

  static __m256i toHalf(VF v) {
    return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  // floatToBf16 of base/dtype.h, lane-wise, in the high 16 bits (low bits: garbage): RNE. Not
  // for NaN input with a payload (the carry can reach the exponent; the default NaN is fine).
  static VI bf16HighNoNan(VF v) {
    VI u = _mm512_castps_si512(v);
    VI lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), i32(1));
    return _mm512_add_epi32(u, _mm512_add_epi32(i32(0x7fff), lsb));
  }
  // The same for any input: NaN stays NaN (quiet).
  static VI bf16High(VF v) {
    __mmask16 nan = _mm512_fpclass_ps_mask(v, 0x81);  // quiet or signalling NaN
    return _mm512_mask_or_epi32(bf16HighNoNan(v), nan, _mm512_castps_si512(v), i32(0x00400000));
  }
  static __m256i toBf16(VF v) { return _mm512_cvtepi32_epi16(_mm512_srli_epi32(bf16High(v), 16)); }
  static void store(float* p, VF v) { _mm512_storeu_ps(p, v); }
  static void store(half_t* p, VF v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), toHalf(v));
  }
  static void store(bf16_t* p, VF v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), toBf16(v));
  }
  // 2W consecutive bf16 values: the high words of both vectors gathered by one two-source word
  // permutation, and one store.
  static constexpr bool kBf16PairStore = true;
  static void storeBf16Pair(bf16_t* p, VF a, VF b) {
    const VI highWords = _mm512_setr_epi32(0x00030001, 0x00070005, 0x000b0009, 0x000f000d,
                                           0x00130011, 0x00170015, 0x001b0019, 0x001f001d,
                                           0x00230021, 0x00270025, 0x002b0029, 0x002f002d,
                                           0x00330031, 0x00370035, 0x003b0039, 0x003f003d);
    _mm512_storeu_si512(p, _mm512_permutex2var_epi16(bf16HighNoNan(a), highWords, bf16HighNoNan(b)));
  }
  static void storePartial(float* p, VF v, int n) { _mm512_mask_storeu_ps(p, mask(n), v); }
  static void storePartial(half_t* p, VF v, int n) {
    _mm256_mask_storeu_epi16(p, mask(n), toHalf(v));
  }
  static void storePartial(bf16_t* p, VF v, int n) {
    _mm256_mask_storeu_epi16(p, mask(n), toBf16(v));
  }

  // max over |x| of 16-bit floats as fp32 bits (see blockStats).
  static uint32_t widen16(uint16_t h, bool isHalf) {
    if (!isHalf) return static_cast<uint32_t>(h) << 16;
    return floatBits(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))));
  }
  template <class T>
  static uint32_t absMax16(const T* x, int len) {
    const __m512i mag = _mm512_set1_epi16(0x7fff);
    __m512i m = _mm512_setzero_si512();
    int i = 0;
    for (; i + 32 <= len; i += 32) m = _mm512_max_epu16(m, _mm512_and_si512(_mm512_loadu_si512(x + i), mag));
    if (i < len) {
      __mmask32 k = static_cast<__mmask32>((1ull << (len - i)) - 1);
      m = _mm512_max_epu16(m, _mm512_and_si512(_mm512_maskz_loadu_epi16(k, x + i), mag));
    }
    __m512i m32 = _mm512_max_epu32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(m)),
                                   _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(m, 1)));
    return widen16(static_cast<uint16_t>(_mm512_reduce_max_epu32(m32)),
                   std::is_same<T, half_t>::value);
  }
  static VI absBits(VF v) { return _mm512_and_si512(_mm512_castps_si512(v), i32(0x7fffffff)); }
  // The bits of v doubled: |v| as bits, times 2 (the sign shifted out), without a constant.
  static VI bitsTwice(VF v) {
    return _mm512_add_epi32(_mm512_castps_si512(v), _mm512_castps_si512(v));
  }
  static VI maxU(VI a, VI b) { return _mm512_max_epu32(a, b); }
  static uint32_t reduceMaxU(VI a) { return _mm512_reduce_max_epu32(a); }
  static VF min(VF a, VF b) { return _mm512_min_ps(a, b); }
  static VF max(VF a, VF b) { return _mm512_max_ps(a, b); }
  static float reduceMin(VF a) { return _mm512_reduce_min_ps(a); }
  static float reduceMax(VF a) { return _mm512_reduce_max_ps(a); }

  static VF add(VF a, VF b) { return _mm512_add_ps(a, b); }
  static VF sub(VF a, VF b) { return _mm512_sub_ps(a, b); }
  static VF mul(VF a, VF b) { return _mm512_mul_ps(a, b); }
  static VF div(VF a, VF b) { return _mm512_div_ps(a, b); }
  static VF toFloat(VI q) { return _mm512_cvtepi32_ps(q); }

  static VI roundRne(VF t) {
    return _mm512_cvt_roundps_epi32(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static VI roundSr(VF t, VF u) {
    VF f = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __mmask16 up = _mm512_cmp_ps_mask(u, _mm512_sub_ps(t, f), _CMP_LT_OQ);
    VI q = _mm512_cvtps_epi32(f);  // f is integral: exact in any rounding mode
    return _mm512_mask_add_epi32(q, up, q, i32(1));
  }
  static VI clamp(VI q, int lo, int hi) {
    return _mm512_min_epi32(_mm512_max_epi32(q, _mm512_set1_epi32(lo)), _mm512_set1_epi32(hi));
  }

  static VI mix32(VI x) {
    x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
    x = _mm512_mullo_epi32(x, i32(0x7feb352du));
    x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 15));
    x = _mm512_mullo_epi32(x, i32(0x846ca68bu));
    return _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
  }
  static VF uniform(SrKey k, uint32_t lo) {
    VI idx = _mm512_add_epi32(i32(lo), _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                                         12, 13, 14, 15));
    VI h = mix32(_mm512_xor_si512(mix32(_mm512_xor_si512(idx, i32(k.a))), i32(k.b)));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(h, 8)),
                         _mm512_set1_ps(5.9604644775390625e-08f));
  }

  // 16 values -> 8 INT4 bytes: in each 64-bit lane (element 2i | element 2i+1 << 32) keep bits
  // 0-3 of the lane and bits 32-35 shifted down to 4-7 (one bit-select), then narrow.
  static __m128i nibbles(VI a) {
    __m512i hi = _mm512_srli_epi64(a, 28);
    __m512i sel = _mm512_ternarylogic_epi64(_mm512_set1_epi64(0x0f), a, hi, 0xca);
    return _mm512_cvtepi64_epi8(sel);
  }

  // 32 values -> 32 bytes (int8) or 16 bytes (INT4, element 2i in the low nibble).
  template <int Bits>
  static void pack(VI a, VI b, uint8_t* dst) {
    if (Bits == 8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(a));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 16), _mm512_cvtepi32_epi8(b));
      return;
    }
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), nibbles(a));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + 8), nibbles(b));
  }

  // 64 values -> 64 bytes (int8) or 32 bytes (INT4). Saturating packs to int16 then int8 (values
  // are in range: unsigned for asymmetric int8) leave 4-element groups in the order a0 b0 c0 d0
  // a1 b1 ... (per 128-bit lane); one dword permutation restores element order. INT4: in each
  // 16-bit word, the low nibble of byte 0 | the low nibble of byte 1 << 4, then words -> bytes.
  static constexpr bool kPack4 = true;
  template <int Bits, bool Sym>
  static void pack4(VI a, VI b, VI c, VI d, uint8_t* dst) {
    VI w1 = _mm512_packs_epi32(a, b), w2 = _mm512_packs_epi32(c, d);
    VI bytes = Bits == 8 && !Sym ? _mm512_packus_epi16(w1, w2) : _mm512_packs_epi16(w1, w2);
    const VI order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    bytes = _mm512_permutexvar_epi32(order, bytes);
    if (Bits == 8) {
      _mm512_storeu_si512(dst, bytes);
      return;
    }
    VI nib = _mm512_ternarylogic_epi32(_mm512_set1_epi16(0x000f), bytes,
                                       _mm512_srli_epi16(bytes, 4), 0xca);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm512_cvtepi16_epi8(nib));
  }

  // 32 INT4 values (16 bytes) -> table[nibble] for each, in element order: the 16 bytes are
  // broadcast to all four 128-bit lanes, a byte shuffle puts byte i zero-extended in dwords 2i and
  // 2i + 1, odd dwords shift down 4, and vpermps reads the low 4 bits of each dword.
  static constexpr bool kEvenOddDecode = false;  // INT4 decodes in element order (but see kNibbleTable)
  static constexpr bool kNibbleTable = true;
  static void lookupNibbles(const uint8_t* src, VF table, VF& a, VF& b) {
    VI x = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
    const VI z = i32(0xffffff00u);  // dword k of a lane: byte (k's source), then three zeros
    const VI lo =
        _mm512_or_si512(z, _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7));
    const VI hi = _mm512_or_si512(z, _mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13,
                                                       14, 14, 15, 15));
    const VI shift = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
    a = _mm512_permutexvar_ps(_mm512_srlv_epi32(_mm512_shuffle_epi8(x, lo), shift), table);
    b = _mm512_permutexvar_ps(_mm512_srlv_epi32(_mm512_shuffle_epi8(x, hi), shift), table);
  }

  // The same 32 values as two vectors: even elements (low nibbles) and odd (high nibbles).
  static void lookupNibblesEvenOdd(const uint8_t* src, VF table, VF& even, VF& odd) {
    VI bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
    even = _mm512_permutexvar_ps(bytes, table);
    odd = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), table);
  }
  static constexpr bool kScaledEvenOdd = false;  // the table is cheaper

  // INT4 values of groups of 2W elements held as even / odd vectors (kernels_impl.h: the
  // requantize block sum), two groups (4W elements) -> 2W bytes: even and odd values narrowed by
  // two 32->16 packs and one 16->8 pack (even bytes in the low, odd in the high quadword of each
  // 128-bit lane), the odd quadword shifted up a nibble and moved down, one bit-select, one dword
  // permutation to element order.
  static constexpr bool kEvenOddPack = true;
  static constexpr int kEvenOddPackGroups = 2;
  static void packEvenOdd(const VI* e, const VI* o, uint8_t* dst) {
    VI b = _mm512_packs_epi16(_mm512_packs_epi32(e[0], e[1]), _mm512_packs_epi32(o[0], o[1]));
    VI hi = _mm512_unpackhi_epi64(_mm512_slli_epi16(b, 4), _mm512_slli_epi16(b, 4));
    VI nib = _mm512_ternarylogic_epi32(_mm512_set1_epi8(0x0f), b, hi, 0xca);
    const VI order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                        _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, nib)));
  }

  // Elements 2i (even[i]) and 2i + 1 (odd[i]) stored in element order (for the INT4 sums).
  static void storeEvenOdd(float* p, VF even, VF odd) {
    const VI lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const VI hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    _mm512_storeu_ps(p, _mm512_permutex2var_ps(even, lo, odd));
    _mm512_storeu_ps(p + W, _mm512_permutex2var_ps(even, hi, odd));
  }
  static void storeEvenOdd(half_t* p, VF even, VF odd) {
    VI h = _mm512_inserti64x4(_mm512_castsi256_si512(toHalf(even)), toHalf(odd), 1);
    const VI order = _mm512_setr_epi32(0x00100000, 0x00110001, 0x00120002, 0x00130003,
                                       0x00140004, 0x00150005, 0x00160006, 0x00170007,
                                       0x00180008, 0x00190009, 0x001a000a, 0x001b000b,
                                       0x001c000c, 0x001d000d, 0x001e000e, 0x001f000f);
    _mm512_storeu_si512(p, _mm512_permutexvar_epi16(order, h));
  }
  // Elements 2i (even) and 2i + 1 (odd) as bf16: one dword each, so low word | high word.
  static void storeEvenOdd(bf16_t* p, VF even, VF odd) {
    VI lo = _mm512_srli_epi32(bf16HighNoNan(even), 16);
    VI w = _mm512_ternarylogic_epi32(i32(0xffff0000u), bf16HighNoNan(odd), lo, 0xca);
    _mm512_storeu_si512(p, w);
  }

  template <int Bits, bool Sym>
  static void unpack(const uint8_t* src, VI& a, VI& b) {
    __m128i lo, hi;
    if (Bits == 8) {
      lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
      hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
    } else {
      __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
      __m256i bytes = _mm256_or_si256(_mm256_and_si256(w, _mm256_set1_epi16(0x000f)),
                                      _mm256_slli_epi16(_mm256_srli_epi16(w, 4), 8));
      if (Sym) {  // sign-extend the nibbles within their bytes
        __m256i eight = _mm256_set1_epi8(8);
        bytes = _mm256_sub_epi8(_mm256_xor_si256(bytes, eight), eight);
      }
      lo = _mm256_castsi256_si128(bytes);
      hi = _mm256_extracti128_si256(bytes, 1);
    }
    a = Sym ? _mm512_cvtepi8_epi32(lo) : _mm512_cvtepu8_epi32(lo);
    b = Sym ? _mm512_cvtepi8_epi32(hi) : _mm512_cvtepu8_epi32(hi);
  }
};

}  // namespace avx512
}  // namespace quant
}  // namespace zcoll

#define ZCOLL_QUANT_ISA_NS avx512
#include "quant/kernels_impl.h"

#else  // not x86-64: no AVX-512 variant (isaSupported reports false)
#include "quant/isa.h"
namespace zcoll {
namespace quant {
namespace avx512 {
const KernelSet& kernels() { return scalar::kernels(); }
}  // namespace avx512
}  // namespace quant
}  // namespace zcoll
#endif
