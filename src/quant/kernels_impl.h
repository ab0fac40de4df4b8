// The CPU quantization algorithm, written once over a struct of vector primitives `Vec`
// (W lanes of fp32 / int32) and instantiated per ISA by kernels_<isa>.cc, each compiled with its
// own -m flags. Everything here has internal linkage inside the ISA's namespace, so no
// out-of-line copy compiled for one ISA can be picked by the linker for another.
//
// Include only after defining ZCOLL_QUANT_ISA_NS and zcoll::quant::ZCOLL_QUANT_ISA_NS::Vec.
// (No include guard on purpose.)
//
// Per block, quantize is two passes over data that stays in L1:
//   1. reduce: max |x| as integer bits (order-independent, detects NaN/Inf), min/max if asymmetric
//   2. q = clamp(round((x - zero) * RN(1/scale))), packed four vectors (4W elements) at a time,
//      then two, then a partial tail.
// Dequantize is one pass. Sums over k chunks decode all k at each position and add in registers
// (an fp32 block buffer on the stack, chunk by chunk, beyond kRegisterSumChunks), always in chunk
// order 0..k-1, so every ISA and both paths round identically.

#include <cstring>
#include <type_traits>

#include "base/dtype.h"
#include "quant/isa.h"
#include "quant/quant_math.h"
#include "quant/type_switch.h"

namespace zcoll {
namespace quant {
namespace ZCOLL_QUANT_ISA_NS {
namespace {

constexpr int W = Vec::W;
constexpr int S = 2 * W;  // elements per packing step
using VF = Vec::VF;
using VI = Vec::VI;

// Vec as a type dependent on D: calls to primitives that only some variants have (behind their
// kFlags, in `if constexpr`) are then checked only where the branch is taken.
template <class D>
using VecFor = typename std::conditional<sizeof(D) != 0, Vec, void>::type;

// ---- Small helpers ----------------------------------------------------------------------------

inline size_t packedBytes(int bits, size_t elems) { return bits == 8 ? elems : (elems + 1) / 2; }
inline size_t packedOffset(int bits, size_t elem) { return bits == 8 ? elem : elem / 2; }
inline size_t minSize(size_t a, size_t b) { return a < b ? a : b; }
inline int minInt(int a, int b) { return a < b ? a : b; }

inline float loadF(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}
inline void storeF(uint8_t* p, float f) { std::memcpy(p, &f, 4); }

inline BlockParams readParams(const uint8_t* q, const Layout& l, size_t j, bool sym) {
  return BlockParams{loadF(q + 4 * j), sym ? 0.0f : loadF(q + l.zerosOffset + 4 * j)};
}

// Alignment padding of the three parts is zero, so equal inputs give equal bytes.
inline void zeroPadding(uint8_t* out, const Layout& l, bool sym) {
  size_t sb = 4 * l.nblocks;
  std::memset(out + sb, 0, align16(sb) - sb);
  if (!sym) std::memset(out + l.zerosOffset + sb, 0, align16(sb) - sb);
  size_t vEnd = l.valuesOffset + l.valuesBytes;
  std::memset(out + vEnd, 0, l.totalBytes - vEnd);
}

// Software prefetch (for reading, or with Write for writing) of the bytes [p, p + bytes) shifted
// kPrefetchAhead forward, clipped to end: with it, single-threaded passes over data in L3 or
// memory run 1.1-1.4x faster than with the hardware prefetchers alone (16 MiB quantize and
// dequantize, perf/LOG.md).
constexpr size_t kPrefetchAhead = 4096;
template <bool Write = false>
inline void prefetchAhead(const void* p, size_t bytes, const void* end) {
  uintptr_t a = reinterpret_cast<uintptr_t>(p) + kPrefetchAhead;
  uintptr_t e = reinterpret_cast<uintptr_t>(end);
  for (uintptr_t k = a; k < a + bytes && k < e; k += 64) {
    __builtin_prefetch(reinterpret_cast<const void*>(k), Write ? 1 : 0);
  }
}

// ---- Loads with a partial tail ------------------------------------------------------------------
template <class T>
inline VF loadN(const T* x, int cnt) {
  return cnt >= W ? Vec::load(x) : Vec::loadPartial(x, cnt);
}

// For reductions: lanes past cnt repeat lane 0, which leaves max/min unchanged.
template <class T>
inline VF loadReduce(const T* x, int cnt) {
  return cnt >= W ? Vec::load(x) : Vec::fillLane0(Vec::loadPartial(x, cnt), cnt);
}

template <class T>
inline void storeN(T* p, VF v, int cnt) {
  if (cnt >= W) {
    Vec::store(p, v);
  } else {
    Vec::storePartial(p, v, cnt);
  }
}

template <class T>
void fillNan(T* out, int len) {
  VF nan = Vec::set1(bitsFloat(kCanonicalNan));
  for (int i = 0; i < len; i += W) storeN(out + i, nan, len - i);
}

// ---- Quantize ------------------------------------------------------------------------------------
struct Stats {
  uint32_t maxAbs;
  float mn, mx;
};

template <class T, bool Sym>
Stats blockStats(const T* x, int len) {
  // Symmetric 16-bit input: max |x| on the raw 16-bit patterns (magnitude order is bit order),
  // converted once: the same fp32 bits as converting every element, at a fraction of the work.
  if (Sym && !std::is_same<T, float>::value) return Stats{Vec::absMax16(x, len), 0.0f, 0.0f};
  VF first = loadReduce(x, len);
  VI amax = Vec::absBits(first);
  VF mn = first, mx = first;
  for (int i = W; i < len; i += W) {
    VF v = loadReduce(x + i, len - i);
    amax = Vec::maxU(amax, Vec::absBits(v));
    if (!Sym) {
      mn = Vec::min(mn, v);
      mx = Vec::max(mx, v);
    }
  }
  Stats s{Vec::reduceMaxU(amax), 0.0f, 0.0f};
  if (!Sym) {
    s.mn = Vec::reduceMin(mn);
    s.mx = Vec::reduceMax(mx);
  }
  return s;
}

// Stochastic-rounding key cache: the key changes only when the upper 32 index bits do.
struct SrState {
  uint64_t seed;
  uint32_t hi;
  bool valid;
  SrKey key;
};

inline VF uniformAt(SrState& st, uint64_t g) {
  uint32_t hi = static_cast<uint32_t>(g >> 32), lo = static_cast<uint32_t>(g);
  if (!st.valid || hi != st.hi) {
    st.key = srKey(st.seed, hi);
    st.hi = hi;
    st.valid = true;
  }
  if (lo <= 0xffffffffu - (W - 1)) return Vec::uniform(st.key, lo);
  float u[W];  // the W lanes straddle a 2^32 boundary: rare, per lane
  for (int l = 0; l < W; ++l) u[l] = srUniform(st.seed, g + l);
  return Vec::load(u);
}

// Per-block constants of pass 2: t = (x - zero) * rcp, or (x - zero) / scale when 1/scale
// overflows (useRcp false; quant_math.h: scaledValue).
struct QuantConsts {
  VF scale, zero, rcp;
  bool useRcp;
};

inline QuantConsts quantConsts(BlockParams p) {
  float r = quantReciprocal(p.scale);
  return QuantConsts{Vec::set1(p.scale), Vec::set1(p.zero), Vec::set1(r), r != 0.0f};
}

template <int Bits, bool Sym, bool Sr, bool Rcp>
inline VI quantVec(VF x, const QuantConsts& c, SrState& sr, uint64_t g) {
  VF d = Sym ? x : Vec::sub(x, c.zero);
  VF t = Rcp ? Vec::mul(d, c.rcp) : Vec::div(d, c.scale);
  VI q = Sr ? Vec::roundSr(t, uniformAt(sr, g)) : Vec::roundRne(t);
  // Symmetric round-to-nearest needs no clamp: |x| <= absmax gives |t| <= qmax (1 + 2^-22),
  // which rounds to at most qmax (and tail lanes hold 0).
  if (Sym && !Sr) return q;
  return Vec::clamp(q, qLow(Bits, Sym), qHigh(Bits, Sym));
}

// The last < 2W elements of a block; an odd INT4 tail leaves the high nibble 0.
template <class T, int Bits, bool Sym, bool Sr, bool Rcp>
void quantizeTail(const T* x, int r, const QuantConsts& c, SrState& sr, uint64_t g, uint8_t* dst) {
  VF x0 = loadN(x, r);
  VF x1 = r > W ? loadN(x + W, r - W) : Vec::set1(0.0f);
  alignas(64) uint8_t tmp[S];
  Vec::template pack<Bits>(quantVec<Bits, Sym, Sr, Rcp>(x0, c, sr, g),
                           quantVec<Bits, Sym, Sr, Rcp>(x1, c, sr, g + W), tmp);
  size_t nb = packedBytes(Bits, r);
  std::memcpy(dst, tmp, nb);
  if (Bits == 4 && (r & 1)) dst[nb - 1] &= 0x0f;
}

// Pass 2 over one block.
template <class T, int Bits, bool Sym, bool Sr, bool Rcp>
void quantizeValues(const T* x, int len, const QuantConsts& c, SrState& sr, uint64_t g0,
                    uint8_t* qv) {
  int i = 0;
  for (; i + 2 * S <= len; i += 2 * S) {
    VI a = quantVec<Bits, Sym, Sr, Rcp>(Vec::load(x + i), c, sr, g0 + i);
    VI b = quantVec<Bits, Sym, Sr, Rcp>(Vec::load(x + i + W), c, sr, g0 + i + W);
    VI d = quantVec<Bits, Sym, Sr, Rcp>(Vec::load(x + i + 2 * W), c, sr, g0 + i + 2 * W);
    VI e = quantVec<Bits, Sym, Sr, Rcp>(Vec::load(x + i + 3 * W), c, sr, g0 + i + 3 * W);
    if constexpr (Vec::kPack4) {
      VecFor<T>::template pack4<Bits, Sym>(a, b, d, e, qv + packedOffset(Bits, i));
    } else {
      Vec::template pack<Bits>(a, b, qv + packedOffset(Bits, i));
      Vec::template pack<Bits>(d, e, qv + packedOffset(Bits, i + S));
    }
  }
  for (; i + S <= len; i += S) {
    VI a = quantVec<Bits, Sym, Sr, Rcp>(Vec::load(x + i), c, sr, g0 + i);
    VI b = quantVec<Bits, Sym, Sr, Rcp>(Vec::load(x + i + W), c, sr, g0 + i + W);
    Vec::template pack<Bits>(a, b, qv + packedOffset(Bits, i));
  }
  if (i < len) {
    quantizeTail<T, Bits, Sym, Sr, Rcp>(x + i, len - i, c, sr, g0 + i,
                                        qv + packedOffset(Bits, i));
  }
}

template <class T, int Bits, bool Sym>
BlockParams blockParams(const T* x, int len) {
  Stats st = blockStats<T, Sym>(x, len);
  return Sym ? symmetricParams(st.maxAbs, Bits) : asymmetricParams(st.maxAbs, st.mn, st.mx, Bits);
}

// Writes block parameters p and the block's packed values.
template <class T, int Bits, bool Sym, bool Sr>
void encodeBlock(const T* x, int len, BlockParams p, uint64_t g0, SrState& sr, uint8_t* scaleSlot,
                 uint8_t* zeroSlot, uint8_t* qv) {
  storeF(scaleSlot, p.scale);
  if (!Sym) storeF(zeroSlot, p.zero);
  if (!paramsQuantizable(p)) {  // non-finite or constant block: all q = 0
    std::memset(qv, 0, packedBytes(Bits, len));
    return;
  }
  QuantConsts c = quantConsts(p);
  if (c.useRcp) {
    quantizeValues<T, Bits, Sym, Sr, true>(x, len, c, sr, g0, qv);
  } else {
    quantizeValues<T, Bits, Sym, Sr, false>(x, len, c, sr, g0, qv);
  }
}

// Block j's parameters are computed before block j - 1 is encoded: the reduction tail and the
// two divisions (scale, 1/scale) then overlap with encoding instead of stalling it.
template <class T, int Bits, bool Sym, bool Sr>
void quantizeImpl(const T* x, size_t n, const QuantParams& p, uint8_t* out) {
  Layout l = layoutOf(n, p.blockSize, Bits, Sym);
  SrState sr{p.seed, 0, false, SrKey{0, 0}};
  size_t b = static_cast<size_t>(p.blockSize);
  auto blockLen = [&](size_t j) { return static_cast<int>(minSize(b, n - j * b)); };
  BlockParams next = blockParams<T, Bits, Sym>(x, blockLen(0));
  for (size_t j = 0; j < l.nblocks; ++j) {
    size_t e0 = j * b;
    BlockParams cur = next;
    if (j + 1 < l.nblocks) next = blockParams<T, Bits, Sym>(x + e0 + b, blockLen(j + 1));
    prefetchAhead(x + e0, b * sizeof(T), x + n);
    prefetchAhead<true>(out + l.valuesOffset + packedOffset(Bits, e0), packedBytes(Bits, b),
                        out + l.totalBytes);
    encodeBlock<T, Bits, Sym, Sr>(x + e0, blockLen(j), cur, p.elementOffset + e0, sr,
                                  out + 4 * j, out + l.zerosOffset + 4 * j,
                                  out + l.valuesOffset + packedOffset(Bits, e0));
  }
  zeroPadding(out, l, Sym);
}

// ---- Dequantize ----------------------------------------------------------------------------------
// What a dequantized vector v (elements i..) becomes.
enum class Op {
  kStore,        // out = v
  kAccInit,      // acc = v
  kAccAdd,       // acc += v
  kAccAddStore,  // out = (acc + v) * s
  kScaleStore,   // out = v * s
};

template <class T, Op O>
inline void emit(VF v, float* acc, T* out, int i, VF s, int cnt) {
  switch (O) {
    case Op::kStore: storeN(out + i, v, cnt); break;
    case Op::kAccInit: storeN(acc + i, v, cnt); break;
    case Op::kAccAdd: storeN(acc + i, Vec::add(loadN(acc + i, cnt), v), cnt); break;
    case Op::kAccAddStore:
      storeN(out + i, Vec::mul(Vec::add(loadN(acc + i, cnt), v), s), cnt);
      break;
    case Op::kScaleStore: storeN(out + i, Vec::mul(v, s), cnt); break;
  }
}

// Two full vectors at p: one fused store where the variant has one for bf16, else two stores.
template <class T>
inline void storePair(T* p, VF a, VF b) {
  if constexpr (Vec::kBf16PairStore && std::is_same<T, bf16_t>::value) {
    VecFor<T>::storeBf16Pair(p, a, b);
  } else {
    Vec::store(p, a);
    Vec::store(p + W, b);
  }
}

// The same as emit for two full vectors (elements i .. i + 2W).
template <class T, Op O>
inline void emit2(VF va, VF vb, float* acc, T* out, int i, VF s) {
  switch (O) {
    case Op::kStore: storePair(out + i, va, vb); break;
    case Op::kAccInit:
    case Op::kAccAdd:
      emit<T, O>(va, acc, out, i, s, W);
      emit<T, O>(vb, acc, out, i + W, s, W);
      break;
    case Op::kAccAddStore:
      storePair(out + i, Vec::mul(Vec::add(Vec::load(acc + i), va), s),
                  Vec::mul(Vec::add(Vec::load(acc + i + W), vb), s));
      break;
    case Op::kScaleStore: storePair(out + i, Vec::mul(va, s), Vec::mul(vb, s)); break;
  }
}

template <bool Sym>
inline VF deqF(VF q, VF scale, VF zero) {
  VF v = Vec::mul(q, scale);
  return Sym ? v : Vec::add(zero, v);
}
template <bool Sym>
inline VF deq(VI q, VF scale, VF zero) {
  return deqF<Sym>(Vec::toFloat(q), scale, zero);
}

// Dequantizes one block's values 2W at a time: x' = q * scale (+ zero). Variants with a 16-lane
// permutation (Vec::kNibbleTable) look INT4 values up in a table of the block's 16 possible
// results instead, computed by the scalar definition: the same bits, fewer operations.
//
// Variants with Vec::kScaledEvenOdd also have a cheaper even/odd INT4 decode whose integers come
// out multiplied by a power of two (q * 2^28, q * 16; exact), multiplied by the scale times the
// inverse power of two: the same real product q * scale, so the same rounding, wherever that
// scaled scale is exact (scaledExact: every scale above about 2^-98; below, the unscaled decode).
template <int Bits, bool Sym>
struct BlockDecoder {
  static constexpr bool kTable = Bits == 4 && Vec::kNibbleTable;
  static constexpr bool kScaled = Bits == 4 && !kTable && Vec::kScaledEvenOdd;
  // The scaled decode is exact where the scale times the smaller factor (2^-28 symmetric, else
  // 2^-4) is still a normal number: |scale| as bits from here (a biased exponent above 28 or 4),
  // or a zero scale; NaN / Inf never reach the decode.
  static constexpr uint32_t kMinScaledExact = (Sym ? 29u : 5u) << 23;
  VF scale, zero, table, scaleEven, scaleOdd;
  bool scaledExact = false;

  BlockDecoder() = default;
  explicit BlockDecoder(BlockParams p) : scale(Vec::set1(p.scale)), zero(Vec::set1(p.zero)) {
    if (kTable) {
      alignas(64) float t[16];
      for (int u = 0; u < 16; ++u) {
        t[u] = dequantizeValue(unpackNibble(static_cast<uint8_t>(u), 0, Sym), p.scale, p.zero, Sym);
      }
      table = Vec::load(t);
    }
    if constexpr (kScaled) {
      using V = VecFor<BlockDecoder>;
      uint32_t mag = floatBits(p.scale) & 0x7fffffffu;
      scaledExact = mag == 0 || (mag >= kMinScaledExact && mag < kExpMask);
      scaleEven = Vec::set1(mulRn(p.scale, Sym ? V::kEvenFactorSym : V::kEvenFactorAsym));
      scaleOdd = Vec::set1(mulRn(p.scale, V::kOddFactor));
    }
  }
  // The same 2W INT4 values as the even elements and the odd elements: from the table where the
  // variant has one, else by its even/odd unpack to exact floats (Vec::kEvenOddDecode); with
  // Scaled (only where scaledExact), by the scaled unpack.
  template <bool Scaled = false>
  void decodeEvenOdd(const uint8_t* src, VF& even, VF& odd) const {
    if constexpr (kTable) {
      VecFor<BlockDecoder>::lookupNibblesEvenOdd(src, table, even, odd);
    } else if constexpr (Scaled && kScaled) {
      VF qe, qo;
      VecFor<BlockDecoder>::template unpackEvenOddScaled<Sym>(src, qe, qo);
      even = deqF<Sym>(qe, scaleEven, zero);
      odd = deqF<Sym>(qo, scaleOdd, zero);
    } else {
      VF qe, qo;
      VecFor<BlockDecoder>::template unpackEvenOddFloat<Sym>(src, qe, qo);
      even = deqF<Sym>(qe, scale, zero);
      odd = deqF<Sym>(qo, scale, zero);
    }
  }
  void decode(const uint8_t* src, VF& a, VF& b) const {
    if constexpr (kTable) {
      VecFor<BlockDecoder>::lookupNibbles(src, table, a, b);
    } else {
      VI qa, qb;
      Vec::template unpack<Bits, Sym>(src, qa, qb);
      a = deq<Sym>(qa, scale, zero);
      b = deq<Sym>(qb, scale, zero);
    }
  }
};

// The INT4 even/odd decode of the sums in its cheapest form, holding only what it reads: the
// nibble table (Vec::kNibbleTable), or the scaled decode's two scaled scales (Vec::kScaledEvenOdd)
// and the zero point. A block has it where every value decodes as BlockDecoder's even/odd decode
// does: finite parameters and, for the scaled decode, a scaledExact scale; the sums take
// BlockDecoder elsewhere. Checked and built in a few instructions per chunk: a block's work
// outside the sum loop is hardly overlapped with the loop (perf/LOG.md, issue 32).
template <bool Sym>
struct FastEvenOdd {
  static constexpr bool kTable = Vec::kNibbleTable;
  static constexpr bool kAvailable = Vec::kNibbleTable || Vec::kScaledEvenOdd;
  VF a, b, zero;  // the table; or the even and odd scaled scales

  // A block has the fast decode where scaleKey(scale) < kScaleKeys, and (asymmetric) its zero
  // point is finite: one unsigned range check of the scale's magnitude bits rules out NaN and
  // Inf and (scaled decode) a scale that is not scaledExact, and so does the largest key of k
  // chunks for all of them (a zero scale, rare, takes the general decode too).
  static constexpr uint32_t kMinScaleBits = kTable ? 0u : BlockDecoder<4, Sym>::kMinScaledExact;
  static constexpr uint32_t kScaleKeys = kExpMask - kMinScaleBits;
  static uint32_t scaleKey(float scale) { return (floatBits(scale) & 0x7fffffffu) - kMinScaleBits; }
  // Where available(p); only the members decode reads.
  void init(BlockParams p) {
    VF scale = Vec::set1(p.scale);
    if (!Sym) zero = Vec::set1(p.zero);
    if constexpr (kTable) {
      a = deqF<Sym>(Vec::load(nibbleValues()), scale, zero);
    } else if constexpr (kAvailable) {
      using V = VecFor<FastEvenOdd>;
      a = Vec::mul(scale, Vec::set1(Sym ? V::kEvenFactorSym : V::kEvenFactorAsym));
      b = Vec::mul(scale, Vec::set1(V::kOddFactor));
    }
  }
  void decode(const uint8_t* src, VF& even, VF& odd) const {
    if constexpr (kTable) {
      VecFor<FastEvenOdd>::lookupNibblesEvenOdd(src, a, even, odd);
    } else if constexpr (kAvailable) {
      VF qe, qo;
      VecFor<FastEvenOdd>::template unpackEvenOddScaled<Sym>(src, qe, qo);
      even = deqF<Sym>(qe, a, zero);
      odd = deqF<Sym>(qo, b, zero);
    }
  }
  // The nibbles 0..15 as the values they decode to (unpackNibble), for the table.
  static const float* nibbleValues() {
    alignas(64) static constexpr float kSym[16] = {0, 1, 2, 3, 4, 5, 6, 7,
                                                   -8, -7, -6, -5, -4, -3, -2, -1};
    alignas(64) static constexpr float kAsym[16] = {0, 1, 2, 3, 4, 5, 6, 7,
                                                    8, 9, 10, 11, 12, 13, 14, 15};
    return Sym ? kSym : kAsym;
  }
};

// INT4 stored straight to the output (dequantize, or a one-chunk scaled sum) as even and odd
// halves that the store interleaves: with the table to bf16 (the interleave is free there), and
// on variants whose cheapest INT4 decode is even/odd (kEvenOddDecode) to every output type.
template <class T, int Bits, Op O>
constexpr bool kEvenOddStore =
    Bits == 4 && (O == Op::kStore || O == Op::kScaleStore) &&
    (Vec::kEvenOddDecode || (Vec::kNibbleTable && std::is_same<T, bf16_t>::value));

// len elements of one block starting at packed values qv; acc / out indexed from 0.
template <class T, int Bits, bool Sym, Op O>
void dequantPiece(const uint8_t* qv, BlockParams p, int len, float* acc, T* out, VF s) {
  BlockDecoder<Bits, Sym> dec(p);
  VF a, b;
  int i = 0;
  if constexpr (kEvenOddStore<T, Bits, O>) {
    for (; i + S <= len; i += S) {
      dec.decodeEvenOdd(qv + packedOffset(Bits, i), a, b);
      if (O == Op::kScaleStore) {
        a = Vec::mul(a, s);
        b = Vec::mul(b, s);
      }
      VecFor<T>::storeEvenOdd(out + i, a, b);
    }
  }
  for (; i + S <= len; i += S) {
    dec.decode(qv + packedOffset(Bits, i), a, b);
    emit2<T, O>(a, b, acc, out, i, s);
  }
  if (i < len) {
    int r = len - i;
    alignas(64) uint8_t tmp[S] = {};
    std::memcpy(tmp, qv + packedOffset(Bits, i), packedBytes(Bits, r));
    dec.decode(tmp, a, b);
    emit<T, O>(a, acc, out, i, s, minInt(r, W));
    if (r > W) emit<T, O>(b, acc, out, i + W, s, r - W);
  }
}

template <class T, int Bits, bool Sym>
void dequantizeImpl(const uint8_t* q, size_t n, const QuantParams& p, T* out) {
  Layout l = layoutOf(n, p.blockSize, Bits, Sym);
  size_t b = static_cast<size_t>(p.blockSize);
  for (size_t j = 0; j < l.nblocks; ++j) {
    size_t e0 = j * b;
    int len = static_cast<int>(minSize(b, n - e0));
    BlockParams bp = readParams(q, l, j, Sym);
    prefetchAhead(q + l.valuesOffset + packedOffset(Bits, e0), packedBytes(Bits, b),
                  q + l.totalBytes);
    prefetchAhead<true>(out + e0, b * sizeof(T), out + n);
    if (decodesToNan(bp.scale, bp.zero)) {
      fillNan(out + e0, len);
    } else {
      dequantPiece<T, Bits, Sym, Op::kStore>(q + l.valuesOffset + packedOffset(Bits, e0), bp, len,
                                             nullptr, out + e0, Vec::set1(1.0f));
    }
  }
}

template <bool Sym>
bool anyNanBlock(const uint8_t* const* chunks, int k, const Layout& l, size_t j) {
  for (int c = 0; c < k; ++c) {
    BlockParams bp = readParams(chunks[c], l, j, Sym);
    if (decodesToNan(bp.scale, bp.zero)) return true;
  }
  return false;
}

// Elements [e, e + len) of the sum over chunks, all in block j: into acc (or, with Final, into
// out as (sum) * s).
template <class T, int Bits, bool Sym, bool Final>
void sumPiece(const uint8_t* const* chunks, int k, const Layout& l, size_t j, size_t e, int len,
              float* acc, T* out, VF s) {
  size_t off = l.valuesOffset + packedOffset(Bits, e);
  bool sym = Sym;
  if (Final && k == 1) {
    dequantPiece<T, Bits, Sym, Op::kScaleStore>(chunks[0] + off, readParams(chunks[0], l, j, sym),
                                                len, acc, out, s);
    return;
  }
  dequantPiece<T, Bits, Sym, Op::kAccInit>(chunks[0] + off, readParams(chunks[0], l, j, sym), len,
                                           acc, out, s);
  int last = Final ? k - 1 : k;
  for (int c = 1; c < last; ++c) {
    dequantPiece<T, Bits, Sym, Op::kAccAdd>(chunks[c] + off, readParams(chunks[c], l, j, sym), len,
                                            acc, out, s);
  }
  if (Final) {
    dequantPiece<T, Bits, Sym, Op::kAccAddStore>(chunks[k - 1] + off,
                                                 readParams(chunks[k - 1], l, j, sym), len, acc,
                                                 out, s);
  }
}

// Up to this many chunks, sums are accumulated in registers (sumPieceInRegisters); beyond, chunk
// by chunk through the block buffer (sumPiece).
constexpr int kRegisterSumChunks = 16;

// INT4 sums on variants with an even/odd decode (Vec::kEvenOddDecode, or the table's
// Vec::kNibbleTable) add the chunks' values as even and odd elements (the cheapest decode there:
// one zero-extending load for both halves) and interleave them once, at the store.
template <int Bits>
constexpr bool kEvenOddSum = Bits == 4 && (Vec::kEvenOddDecode || Vec::kNibbleTable);

template <int Bits, bool Sym, bool Scaled = false>
inline void decodeForSum(const BlockDecoder<Bits, Sym>& d, const uint8_t* src, VF& a, VF& b) {
  if constexpr (kEvenOddSum<Bits>) {
    d.template decodeEvenOdd<Scaled>(src, a, b);
  } else {
    d.decode(src, a, b);
  }
}

template <class T, int Bits>
inline void storeSum(T* p, VF a, VF b) {
  if constexpr (kEvenOddSum<Bits>) {
    VecFor<T>::storeEvenOdd(p, a, b);
  } else {
    storePair(p, a, b);
  }
}

// The k chunks' 2W values at one place added in chunk order 0..k-1 (the order of every path),
// as decode(c, even-or-first, odd-or-second) gives chunk c's. K > 0 fixes k at compile time.
template <int K, class Decode>
__attribute__((always_inline)) inline void sumChunks(int kRun, Decode decode, VF& a, VF& b) {
  VF x, y;
  decode(0, a, b);
  for (int c = 1; c < (K > 0 ? K : kRun); ++c) {
    decode(c, x, y);
    a = Vec::add(a, x);
    b = Vec::add(b, y);
  }
}

// The same sums as sumPiece, 2W elements at a time over all k chunks in registers: v = chunk 0,
// then + chunk 1, ..., + chunk k-1, then (with Final) * s. The same operations in the same order
// as the buffered path, so the same bits; the accumulator never leaves registers. K > 0 fixes k
// at compile time (the common chunk counts: the chunk loop unrolls and the decoders stay in
// registers); K = 0 reads it from k.
// The full 2W-element groups of sumPieceInRegisters; returns where they end.
template <class T, int Bits, bool Sym, bool Final, int K, bool Scaled>
int sumGroups(const BlockDecoder<Bits, Sym>* dec, const uint8_t* const* src, int kRun, int len,
              float* acc, T* out, VF s) {
  VF a, b;
  int i = 0;
  for (; i + S <= len; i += S) {
    size_t o = packedOffset(Bits, i);
    sumChunks<K>(kRun, [&](int c, VF& x, VF& y) {
      decodeForSum<Bits, Sym, Scaled>(dec[c], src[c] + o, x, y);
    }, a, b);
    if (Final) {
      storeSum<T, Bits>(out + i, Vec::mul(a, s), Vec::mul(b, s));
    } else {
      storeSum<float, Bits>(acc + i, a, b);
    }
  }
  return i;
}

// Whether every chunk's decoder may use the scaled even/odd decode (BlockDecoder).
template <int Bits, bool Sym>
bool allScaledExact(const BlockDecoder<Bits, Sym>* dec, int k) {
  for (int c = 0; c < k; ++c) {
    if (!dec[c].scaledExact) return false;
  }
  return true;
}

template <class T, int Bits, bool Sym, bool Final, int K>
void sumPieceInRegisters(const uint8_t* const* chunks, int kRun, const Layout& l, size_t j,
                         size_t e, int len, float* acc, T* out, VF s) {
  const int k = K > 0 ? K : kRun;
  BlockDecoder<Bits, Sym> dec[K > 0 ? K : kRegisterSumChunks];
  const uint8_t* src[K > 0 ? K : kRegisterSumChunks];
  size_t off = l.valuesOffset + packedOffset(Bits, e);
  for (int c = 0; c < k; ++c) {
    dec[c] = BlockDecoder<Bits, Sym>(readParams(chunks[c], l, j, Sym));
    src[c] = chunks[c] + off;
  }
  int i;
  if constexpr (BlockDecoder<Bits, Sym>::kScaled && kEvenOddSum<Bits>) {
    i = allScaledExact(dec, k) ? sumGroups<T, Bits, Sym, Final, K, true>(dec, src, k, len, acc, out, s)
                               : sumGroups<T, Bits, Sym, Final, K, false>(dec, src, k, len, acc, out, s);
  } else {
    i = sumGroups<T, Bits, Sym, Final, K, false>(dec, src, k, len, acc, out, s);
  }
  if (i == len) return;
  VF a, b;
  int r = len - i;
  size_t o = packedOffset(Bits, i);
  alignas(64) uint8_t tmp[S] = {};
  sumChunks<K>(k, [&](int c, VF& x, VF& y) {
    std::memcpy(tmp, src[c] + o, packedBytes(Bits, r));
    dec[c].decode(tmp, x, y);
  }, a, b);
  if (Final) {
    storeN(out + i, Vec::mul(a, s), minInt(r, W));
    if (r > W) storeN(out + i + W, Vec::mul(b, s), r - W);
  } else {
    storeN(acc + i, a, minInt(r, W));
    if (r > W) storeN(acc + i + W, b, r - W);
  }
}

// Elements [e, e + len) of block j summed over the chunks (into acc, or with Final into out as
// sum * s), in registers where k allows.
template <class T, int Bits, bool Sym, bool Final>
void sumBlockPiece(const uint8_t* const* chunks, int k, const Layout& l, size_t j, size_t e,
                   int len, float* acc, T* out, VF s) {
  // One chunk with a final scale keeps sumPiece's single pass (it has the even/odd bf16 path).
  if (k <= kRegisterSumChunks && !(Final && k == 1)) {
    switch (k) {
      case 2: sumPieceInRegisters<T, Bits, Sym, Final, 2>(chunks, k, l, j, e, len, acc, out, s); break;
      case 4: sumPieceInRegisters<T, Bits, Sym, Final, 4>(chunks, k, l, j, e, len, acc, out, s); break;
      case 8: sumPieceInRegisters<T, Bits, Sym, Final, 8>(chunks, k, l, j, e, len, acc, out, s); break;
      default: sumPieceInRegisters<T, Bits, Sym, Final, 0>(chunks, k, l, j, e, len, acc, out, s);
    }
  } else {
    sumPiece<T, Bits, Sym, Final>(chunks, k, l, j, e, len, acc, out, s);
  }
}

// The fast decoders (FastEvenOdd) of k chunks for elements from e of input block j, and their
// values; sum() adds the chunks' 2W values at a byte offset, as even and odd vectors, in chunk
// order 0..k-1 (the order of every path). K > 0 fixes k at compile time.
template <bool Sym, int K>
struct FastChunks {
  static constexpr int kMax = K > 0 ? K : kRegisterSumChunks;
  FastEvenOdd<Sym> dec[kMax];
  const uint8_t* src[kMax];
  int k;

  // False (nothing built) when a chunk's block has no fast decode, the variant none at all, or
  // k is beyond kRegisterSumChunks.
  bool init(const uint8_t* const* chunks, int kRun, const Layout& l, size_t j, size_t e) {
    k = K > 0 ? K : kRun;
    if (!FastEvenOdd<Sym>::kAvailable || k > kMax) return false;
    using Dec = FastEvenOdd<Sym>;
    BlockParams bp[kMax];
    uint32_t maxKey = 0;
    bool zerosFinite = true;
    for (int c = 0; c < k; ++c) {
      bp[c] = readParams(chunks[c], l, j, Sym);
      uint32_t key = Dec::scaleKey(bp[c].scale);
      maxKey = key > maxKey ? key : maxKey;
      if (!Sym) zerosFinite &= finiteBits(floatBits(bp[c].zero));
    }
    if (maxKey >= Dec::kScaleKeys || !zerosFinite) return false;
    for (int c = 0; c < k; ++c) {
      dec[c].init(bp[c]);
      src[c] = chunks[c] + l.valuesOffset + e / 2;
    }
    return true;
  }
  void sum(size_t o, VF& a, VF& b) const {
    sumChunks<K>(k, [&](int c, VF& x, VF& y) { dec[c].decode(src[c] + o, x, y); }, a, b);
  }
};

// dequantizeSum's block on the fast decode (k >= 2, whole groups): out = (sum) * s, stored from
// even and odd vectors; false (nothing written) where a chunk's block has no fast decode. The
// output is prefetched for writing kPrefetchAhead bytes ahead as it is written, one instruction
// per group instead of prefetchAhead's loop (past the end too: x86 prefetches never fault).
template <class T, bool Sym, int K>
inline bool sumBlockFast(const uint8_t* const* chunks, int k, const Layout& l, size_t j, size_t e,
                         int len, T* out, VF s) {
  FastChunks<Sym, K> fc;
  if (k < 2 || len % S != 0 || !fc.init(chunks, k, l, j, e)) return false;
  if constexpr (FastEvenOdd<Sym>::kAvailable) {
    for (size_t o = 0; o < static_cast<size_t>(len) / 2; o += S / 2) {
      VF a, b;
      fc.sum(o, a, b);
      __builtin_prefetch(reinterpret_cast<const uint8_t*>(out + 2 * o) + kPrefetchAhead, 1);
      VecFor<T>::storeEvenOdd(out + 2 * o, Vec::mul(a, s), Vec::mul(b, s));
    }
  }
  return true;
}

// Prefetches the next block's values of every chunk (k streams; the hardware prefetchers track
// few of them at once): prefetchAhead with its bounds checked once for all chunks (they have the
// same layout), clipped to the chunk's end, and a shorter distance. The chunks usually sit at
// the same offset within their pages, so their lines share L1 sets; 4096 bytes ahead (a whole
// set cycle) puts each prefetched line in the set of the line being read, k more lines in sets
// that already hold k: 1.15x slower 4-chunk INT4 requantize at 16 MiB (1024-3072 bytes: alike).
// INT8 keeps 4096: its in-cache fp32 sum was 1.12x slower at 2048 on AVX-512 (2026-11-27).
// K > 0 fixes k at compile time (the chunk loop unrolls).
template <int Bits>
constexpr size_t kChunkPrefetchAhead = Bits == 4 ? 2048 : 4096;
template <int Bits, int K = 0>
inline void prefetchChunks(const uint8_t* const* chunks, int kRun, size_t off, size_t bytes,
                           size_t total) {
  const int k = K > 0 ? K : kRun;
  size_t from = off + kChunkPrefetchAhead<Bits>;
  if (from >= total) return;
  size_t to = minSize(from + bytes, total);
  for (size_t a = from; a < to; a += 64) {
    for (int c = 0; c < k; ++c) __builtin_prefetch(chunks[c] + a, 0);
  }
}

template <class T, int Bits, bool Sym, int K>
void dequantizeSumBlocks(const uint8_t* const* chunks, int k, size_t n, const QuantParams& p,
                         float scale, T* out) {
  Layout l = layoutOf(n, p.blockSize, Bits, Sym);
  size_t b = static_cast<size_t>(p.blockSize);
  alignas(64) float acc[kMaxBlockSize];
  VF s = Vec::set1(scale);
  for (size_t j = 0; j < l.nblocks; ++j) {
    size_t e0 = j * b;
    int len = static_cast<int>(minSize(b, n - e0));
    prefetchChunks<Bits, K>(chunks, k, l.valuesOffset + packedOffset(Bits, e0),
                            packedBytes(Bits, b), l.totalBytes);
    if (Bits == 4 && sumBlockFast<T, Sym, K>(chunks, k, l, j, e0, len, out + e0, s)) continue;
    prefetchAhead<true>(out + e0, b * sizeof(T), out + n);
    if (anyNanBlock<Sym>(chunks, k, l, j)) {
      fillNan(out + e0, len);
    } else {
      sumBlockPiece<T, Bits, Sym, true>(chunks, k, l, j, e0, len, acc, out + e0, s);
    }
  }
}

// The chunk count fixed at compile time for the common counts, for the whole call.
template <class T, int Bits, bool Sym>
void dequantizeSumImpl(const uint8_t* const* chunks, int k, size_t n, const QuantParams& p,
                       float scale, T* out) {
  switch (k) {
    case 2: dequantizeSumBlocks<T, Bits, Sym, 2>(chunks, k, n, p, scale, out); break;
    case 4: dequantizeSumBlocks<T, Bits, Sym, 4>(chunks, k, n, p, scale, out); break;
    case 8: dequantizeSumBlocks<T, Bits, Sym, 8>(chunks, k, n, p, scale, out); break;
    default: dequantizeSumBlocks<T, Bits, Sym, 0>(chunks, k, n, p, scale, out);
  }
}

// acc[0, len) = fp32 sum over chunks of elements [e0, e0 + len), which may span input blocks.
template <int Bits, bool Sym>
void sumRange(const uint8_t* const* chunks, int k, const Layout& l, size_t blockSize, size_t e0,
              int len, float* acc) {
  size_t end = e0 + static_cast<size_t>(len);
  for (size_t e = e0; e < end;) {
    size_t j = e / blockSize;
    size_t pieceEnd = minSize((j + 1) * blockSize, end);
    int plen = static_cast<int>(pieceEnd - e);
    if (anyNanBlock<Sym>(chunks, k, l, j)) {
      fillNan(acc + (e - e0), plen);
    } else {
      sumBlockPiece<float, Bits, Sym, false>(chunks, k, l, j, e, plen, acc + (e - e0), nullptr,
                                             Vec::set1(1.0f));
    }
    e = pieceEnd;
  }
}

// ---- INT4 -> INT4 requantize with the block sum in even/odd order -------------------------------
// On variants with Vec::kEvenOddPack (and an even/odd INT4 decode), round to nearest: the sum of
// each group of 2W elements is kept as it is decoded, even elements then odd ones (W each), in
// the fp32 block buffer; the block's max |x| (and min / max) is taken in the same loop; the
// values are quantized from the even and odd vectors and packed as low and high nibbles. Every
// element sees the same operations as in the element-order path (chunk order 0..k-1, then the
// quantization of one value), so the bytes are the same; what is gone is the interleave at the
// store, the second pass for the block statistics and the element-order nibble packing.
// The chunk count is a template parameter for the whole call; a block that is one input block
// with every chunk on the fast decode (FastEvenOdd) is summed inline in the loop over blocks,
// any other by sumBlockPieces.
template <int Bits>
constexpr bool kEvenOddRequant = Bits == 4 && Vec::kEvenOddPack &&
                                 (Vec::kEvenOddDecode || Vec::kNibbleTable);

// amax2: the maximum of every value's bits doubled (one integer addition, which shifts the sign
// out): twice max |x| as bits (order-preserving, so NaN and Inf still show), with no mask
// constant in the loop, one vector register less where the k-chunk sums need them all.
struct SumStats {
  VI amax2;
  VF mn, mx;
  uint32_t amaxTail;  // the partial last group, element by element (|x| as bits)
  float mnTail, mxTail;
};

inline SumStats initStats() {
  const float inf = bitsFloat(kExpMask);
  return SumStats{Vec::absBits(Vec::set1(0.0f)), Vec::set1(inf), Vec::set1(-inf), 0u, inf, -inf};
}

template <bool OutSym>
inline void addStats(SumStats& st, VF v) {
  using V = VecFor<std::integral_constant<bool, OutSym>>;  // only the even/odd variants have it
  st.amax2 = Vec::maxU(st.amax2, V::bitsTwice(v));
  if (!OutSym) {
    st.mn = Vec::min(st.mn, v);
    st.mx = Vec::max(st.mx, v);
  }
}

// The decoders of input block j of k chunks, each chunk's parameters read once; false when any
// of them decodes to NaN (the decoders are then not built).
template <bool Sym, int K>
inline bool chunkDecoders(const uint8_t* const* chunks, int kRun, const Layout& l, size_t j,
                          BlockDecoder<4, Sym>* dec) {
  const int k = K > 0 ? K : kRun;
  BlockParams bp[K > 0 ? K : kRegisterSumChunks];
  bool nan = false;
  for (int c = 0; c < k; ++c) {
    bp[c] = readParams(chunks[c], l, j, Sym);
    nan |= decodesToNan(bp[c].scale, bp[c].zero);
  }
  if (nan) return false;
  for (int c = 0; c < k; ++c) dec[c] = BlockDecoder<4, Sym>(bp[c]);
  return true;
}

// The whole groups (2W elements) of len elements summed by sum(o, even, odd) (o: the group's byte
// offset) into acc as even and odd vectors, and into the statistics st, held in registers
// meanwhile. Returns where the whole groups end.
template <bool OutSym, class Sum>
__attribute__((always_inline)) inline size_t sumGroupsWithStats(Sum sum, size_t len, float* acc,
                                                                SumStats& st) {
  SumStats s = st;
  size_t end = len / S * (S / 2);  // in bytes of INT4 values
  for (size_t o = 0; o < end; o += S / 2) {
    VF a, b;
    sum(o, a, b);
    Vec::store(acc + 2 * o, a);
    Vec::store(acc + 2 * o + W, b);
    addStats<OutSym>(s, a);
    addStats<OutSym>(s, b);
  }
  st = s;
  return 2 * end;
}

// sumGroupsWithStats over BlockDecoder's even/odd decode (Scaled: the scaled one).
template <bool InSym, bool OutSym, int K, bool Scaled>
size_t sumGroupsEvenOdd(const BlockDecoder<4, InSym>* dec, const uint8_t* const* src, int k,
                        size_t len, float* acc, SumStats& st) {
  return sumGroupsWithStats<OutSym>([&](size_t o, VF& a, VF& b) {
    sumChunks<K>(k, [&](int c, VF& x, VF& y) {
      dec[c].template decodeEvenOdd<Scaled>(src[c] + o, x, y);
    }, a, b);
  }, len, acc, st);
}

// Elements [e, e + len) of input block j summed over the k chunks into acc (even/odd groups);
// statistics into st. False (and nothing summed) when a chunk's block decodes to NaN.
template <bool InSym, bool OutSym, int K>
bool sumPieceEvenOdd(const uint8_t* const* chunks, int kRun, const Layout& l, size_t j, size_t e,
                     int len, float* acc, SumStats& st) {
  const int k = K > 0 ? K : kRun;
  BlockDecoder<4, InSym> dec[K > 0 ? K : kRegisterSumChunks];
  if (!chunkDecoders<InSym, K>(chunks, k, l, j, dec)) return false;
  const uint8_t* src[K > 0 ? K : kRegisterSumChunks];
  size_t off = l.valuesOffset + e / 2;
  for (int c = 0; c < k; ++c) src[c] = chunks[c] + off;
  size_t n = static_cast<size_t>(len), i;
  if constexpr (BlockDecoder<4, InSym>::kScaled) {
    i = allScaledExact(dec, k) ? sumGroupsEvenOdd<InSym, OutSym, K, true>(dec, src, k, n, acc, st)
                               : sumGroupsEvenOdd<InSym, OutSym, K, false>(dec, src, k, n, acc, st);
  } else {
    i = sumGroupsEvenOdd<InSym, OutSym, K, false>(dec, src, k, n, acc, st);
  }
  if (i == n) return true;
  // The last r < 2W elements of the chunk (only at its end): decoded from zero-padded bytes into
  // a whole group; only the r real elements enter the statistics (the others are discarded).
  int r = static_cast<int>(n - i);
  alignas(64) uint8_t tmp[S] = {};
  VF a, b;
  sumChunks<K>(k, [&](int c, VF& x, VF& y) {
    std::memcpy(tmp, src[c] + i / 2, packedBytes(4, r));
    dec[c].decodeEvenOdd(tmp, x, y);
  }, a, b);
  Vec::store(acc + i, a);
  Vec::store(acc + i + W, b);
  for (int t = 0; t < r; ++t) {
    float v = acc[i + (t & 1) * W + t / 2];
    uint32_t m = floatBits(v) & 0x7fffffffu;
    st.amaxTail = m > st.amaxTail ? m : st.amaxTail;
    st.mnTail = v < st.mnTail ? v : st.mnTail;
    st.mxTail = v > st.mxTail ? v : st.mxTail;
  }
  return true;
}

// sumPieceEvenOdd on the fast decode (FastEvenOdd), for a piece of whole groups: false, and
// nothing summed, where a chunk's block has none (the caller then takes sumPieceEvenOdd).
// Inlined into the loop over blocks, with the statistics in registers.
template <bool InSym, bool OutSym, int K>
__attribute__((always_inline)) inline bool sumPieceEvenOddFast(const uint8_t* const* chunks,
                                                               int k, const Layout& l, size_t j,
                                                               size_t e, int len, float* acc,
                                                               SumStats& st) {
  FastChunks<InSym, K> fc;
  if (len % S != 0 || !fc.init(chunks, k, l, j, e)) return false;
  sumGroupsWithStats<OutSym>([&](size_t o, VF& a, VF& b) { fc.sum(o, a, b); },
                             static_cast<size_t>(len), acc, st);
  return true;
}

// A block's statistics reduced to scalars (a piece that decodes to NaN: nan), and the block's
// parameters from them.
struct BlockStats {
  uint32_t amax;
  float mn, mx;
  bool nan;
};

template <bool OutSym>
inline BlockStats reduceStats(const SumStats& st, bool nan) {
  uint32_t amax = Vec::reduceMaxU(st.amax2) >> 1;
  BlockStats r{st.amaxTail > amax ? st.amaxTail : amax, 0.0f, 0.0f, nan};
  if (!OutSym) {
    float mn = Vec::reduceMin(st.mn), mx = Vec::reduceMax(st.mx);
    r.mn = st.mnTail < mn ? st.mnTail : mn;
    r.mx = st.mxTail > mx ? st.mxTail : mx;
  }
  return r;
}

template <bool OutSym>
__attribute__((always_inline)) inline BlockParams evenOddParams(const BlockStats& st) {
  if (st.nan) return nonFiniteParams();
  return OutSym ? symmetricParams(st.amax, 4) : asymmetricParams(st.amax, st.mn, st.mx, 4);
}

// Quantizes and packs a block of len elements held in even/odd groups.
template <bool Sym, bool Rcp>
__attribute__((always_inline)) inline void quantizeEvenOdd(const float* acc, int len,
                                                           const QuantConsts& c, uint8_t* qv) {
  using V = VecFor<std::integral_constant<bool, Sym>>;
  constexpr int G = V::kEvenOddPackGroups;
  SrState sr{0, 0, false, SrKey{0, 0}};  // round to nearest: unused
  VI e[G], o[G];
  int i = 0;
  for (; i + G * S <= len; i += G * S) {
    for (int t = 0; t < G; ++t) {
      e[t] = quantVec<4, Sym, false, Rcp>(Vec::load(acc + i + t * S), c, sr, 0);
      o[t] = quantVec<4, Sym, false, Rcp>(Vec::load(acc + i + t * S + W), c, sr, 0);
    }
    V::packEvenOdd(e, o, qv + i / 2);
  }
  if (i == len) return;
  int r = len - i;
  for (int t = 0; t < G; ++t) {
    if (t * S < r) {
      e[t] = quantVec<4, Sym, false, Rcp>(Vec::load(acc + i + t * S), c, sr, 0);
      o[t] = quantVec<4, Sym, false, Rcp>(Vec::load(acc + i + t * S + W), c, sr, 0);
    } else {
      e[t] = o[t] = Vec::absBits(Vec::set1(0.0f));
    }
  }
  alignas(64) uint8_t tmp[G * S / 2];
  V::packEvenOdd(e, o, tmp);
  size_t nb = packedBytes(4, r);
  std::memcpy(qv + i / 2, tmp, nb);
  if (r & 1) qv[i / 2 + nb - 1] &= 0x0f;
}

// Output block j summed into acc (even/odd groups) piece by piece (pieces of input blocks, whose
// offsets are multiples of 32), each on the fast decode where it has one.
template <bool InSym, bool OutSym, int K>
__attribute__((noinline)) BlockStats sumBlockPieces(const uint8_t* const* chunks, int k, size_t n,
                                                     const Layout& li, size_t bIn, size_t b,
                                                     size_t j, float* acc) {
  size_t e0 = j * b;
  size_t end = minSize(e0 + b, n);
  SumStats st = initStats();
  bool nan = false;
  for (size_t e = e0; e < end;) {
    size_t jIn = e / bIn;
    size_t pieceEnd = minSize((jIn + 1) * bIn, end);
    int plen = static_cast<int>(pieceEnd - e);
    float* a = acc + (e - e0);
    if (!sumPieceEvenOddFast<InSym, OutSym, K>(chunks, k, li, jIn, e, plen, a, st)) {
      nan |= !sumPieceEvenOdd<InSym, OutSym, K>(chunks, k, li, jIn, e, plen, a, st);
    }
    e = pieceEnd;
  }
  return reduceStats<OutSym>(st, nan);
}

// Output block j summed into acc (even/odd groups). An output block that
// is one input block (equal block sizes) on the fast decode is summed here, inlined, with the
// statistics in registers; every other block by sumBlockPieces.
template <bool InSym, bool OutSym, int K>
inline BlockStats sumBlockEvenOdd(const uint8_t* const* chunks, int k, size_t n, const Layout& li,
                                size_t bIn, size_t b, size_t j, float* acc) {
  size_t e0 = j * b;
  prefetchChunks<4, K>(chunks, k, li.valuesOffset + e0 / 2, packedBytes(4, b), li.totalBytes);
  if (bIn == b) {
    SumStats st = initStats();
    int len = static_cast<int>(minSize(b, n - e0));
    if (sumPieceEvenOddFast<InSym, OutSym, K>(chunks, k, li, j, e0, len, acc, st)) {
      return reduceStats<OutSym>(st, false);
    }
  }
  return sumBlockPieces<InSym, OutSym, K>(chunks, k, n, li, bIn, b, j, acc);
}

// Block j + 1 is summed before block j is quantized, into the other of two block buffers, and
// its parameters (two dependent divisions) computed after block j is quantized: they then wait
// for the sum's statistics while block j is quantized, not at the head of the reorder buffer
// (1.07x faster in cache on AVX2 than computing them right after the sum, 1.03x on AVX-512).
template <bool InSym, bool OutSym, int K>
void requantizeEvenOddBlocks(const uint8_t* const* chunks, int k, size_t n, const QuantParams& in,
                             const QuantParams& outP, uint8_t* out) {
  Layout li = layoutOf(n, in.blockSize, 4, InSym);
  Layout lo = layoutOf(n, outP.blockSize, 4, OutSym);
  size_t b = static_cast<size_t>(outP.blockSize), bIn = static_cast<size_t>(in.blockSize);
  alignas(64) float acc[2][kMaxBlockSize];
  BlockStats sum = sumBlockEvenOdd<InSym, OutSym, K>(chunks, k, n, li, bIn, b, 0, acc[0]);
  BlockParams p = evenOddParams<OutSym>(sum);
  for (size_t j = 0; j < lo.nblocks; ++j) {
    bool more = j + 1 < lo.nblocks;
    if (more) {
      sum = sumBlockEvenOdd<InSym, OutSym, K>(chunks, k, n, li, bIn, b, j + 1, acc[(j + 1) & 1]);
    }
    size_t e0 = j * b;
    int len = static_cast<int>(minSize(b, n - e0));
    uint8_t* qv = out + lo.valuesOffset + e0 / 2;
    storeF(out + 4 * j, p.scale);
    if (!OutSym) storeF(out + lo.zerosOffset + 4 * j, p.zero);
    if (!paramsQuantizable(p)) {
      std::memset(qv, 0, packedBytes(4, len));
    } else {
      QuantConsts c = quantConsts(p);
      if (c.useRcp) {
        quantizeEvenOdd<OutSym, true>(acc[j & 1], len, c, qv);
      } else {
        quantizeEvenOdd<OutSym, false>(acc[j & 1], len, c, qv);
      }
    }
    if (more) p = evenOddParams<OutSym>(sum);
  }
  zeroPadding(out, lo, OutSym);
}

// The chunk count fixed at compile time for the common counts (the chunk loops unroll and the
// decoders stay in registers), for the whole call.
template <bool InSym, bool OutSym>
void requantizeEvenOddImpl(const uint8_t* const* chunks, int k, size_t n, const QuantParams& in,
                           const QuantParams& outP, uint8_t* out) {
  switch (k) {
    case 2: requantizeEvenOddBlocks<InSym, OutSym, 2>(chunks, k, n, in, outP, out); break;
    case 4: requantizeEvenOddBlocks<InSym, OutSym, 4>(chunks, k, n, in, outP, out); break;
    case 8: requantizeEvenOddBlocks<InSym, OutSym, 8>(chunks, k, n, in, outP, out); break;
    default: requantizeEvenOddBlocks<InSym, OutSym, 0>(chunks, k, n, in, outP, out);
  }
}

template <int InBits, bool InSym, int OutBits, bool OutSym, bool Sr>
void requantizeImpl(const uint8_t* const* chunks, int k, size_t n, const QuantParams& in,
                    const QuantParams& outP, uint8_t* out) {
  if constexpr (InBits == 4 && OutBits == 4 && !Sr && kEvenOddRequant<InBits>) {
    if (k <= kRegisterSumChunks) {
      requantizeEvenOddImpl<InSym, OutSym>(chunks, k, n, in, outP, out);
      return;
    }
  }
  Layout li = layoutOf(n, in.blockSize, InBits, InSym);
  Layout lo = layoutOf(n, outP.blockSize, OutBits, OutSym);
  SrState sr{outP.seed, 0, false, SrKey{0, 0}};
  size_t b = static_cast<size_t>(outP.blockSize);
  alignas(64) float acc[kMaxBlockSize];
  for (size_t j = 0; j < lo.nblocks; ++j) {
    size_t e0 = j * b;
    int len = static_cast<int>(minSize(b, n - e0));
    prefetchChunks<InBits>(chunks, k, li.valuesOffset + packedOffset(InBits, e0),
                           packedBytes(InBits, b), li.totalBytes);
    sumRange<InBits, InSym>(chunks, k, li, static_cast<size_t>(in.blockSize), e0, len, acc);
    encodeBlock<float, OutBits, OutSym, Sr>(acc, len, blockParams<float, OutBits, OutSym>(acc, len),
                                            outP.elementOffset + e0, sr, out + 4 * j,
                                            out + lo.zerosOffset + 4 * j,
                                            out + lo.valuesOffset + packedOffset(OutBits, e0));
  }
  zeroPadding(out, lo, OutSym);
}

// ---- 16-bit floats (bits 16: QuantParams::wire16, no block parameters) -------------------------
// Quantize converts each element to the 16-bit type H (round to nearest even; a plain copy when
// the input is H already); the padding to 16 bytes is zero. The sums load the k chunks' values,
// add them in fp32 in chunk order 0..k-1 (times s with Scale) and, per block of blockSize
// elements, give the canonical NaN for the whole block where any chunk holds a non-finite value
// there: the rule of the block-quantized formats, and the same bits as the CUDA kernels (no NaN
// payload ever reaches the output).
template <class T, class H>
void quantize16Impl(const T* x, size_t n, H* out) {
  if constexpr (std::is_same<T, H>::value) {
    std::memcpy(out, x, n * sizeof(H));
  } else {
    for (size_t i = 0; i < n; i += W) {
      const int cnt = static_cast<int>(minSize(W, n - i));
      storeN(out + i, loadN(x + i, cnt), cnt);
    }
  }
  uint8_t* end = reinterpret_cast<uint8_t*>(out + n);
  std::memset(end, 0, align16(2 * n) - 2 * n);
}

// acc[0, len) = sum over the k chunks of elements [e0, e0 + len), in chunk order; returns the
// largest |value| bits read (>= kExpMask: a non-finite value).
template <class H>
uint32_t sum16Range(const H* const* chunks, int k, size_t e0, int len, float* acc) {
  VI m = Vec::absBits(Vec::set1(0.0f));
  for (int i = 0; i < len; i += W) {
    const int cnt = minInt(W, len - i);
    VF v = loadN(chunks[0] + e0 + i, cnt);
    m = Vec::maxU(m, Vec::absBits(v));
    for (int c = 1; c < k; ++c) {
      VF d = loadN(chunks[c] + e0 + i, cnt);
      m = Vec::maxU(m, Vec::absBits(d));
      v = Vec::add(v, d);
    }
    storeN(acc + i, v, cnt);
  }
  return Vec::reduceMaxU(m);
}

template <class T, class H, bool Scale>
void sum16Impl(const H* const* chunks, int k, size_t n, size_t blockSize, float scale, T* out) {
  const VF s = Vec::set1(scale);
  alignas(64) float acc[kMaxBlockSize];
  for (size_t e0 = 0; e0 < n; e0 += blockSize) {
    const int len = static_cast<int>(minSize(blockSize, n - e0));
    if (sum16Range(chunks, k, e0, len, acc) >= kExpMask) {
      fillNan(out + e0, len);
      continue;
    }
    for (int i = 0; i < len; i += W) {
      const int cnt = minInt(W, len - i);
      VF v = loadN(acc + i, cnt);
      if (Scale) v = Vec::mul(v, s);
      storeN(out + e0 + i, v, cnt);
    }
  }
}

// The sum of k bits-16 chunks, requantized block by block (as requantizeImpl).
template <class H, int OutBits, bool OutSym, bool Sr>
void requantize16Impl(const H* const* chunks, int k, size_t n, const QuantParams& outP,
                      uint8_t* out) {
  Layout lo = layoutOf(n, outP.blockSize, OutBits, OutSym);
  SrState sr{outP.seed, 0, false, SrKey{0, 0}};
  size_t b = static_cast<size_t>(outP.blockSize);
  alignas(64) float acc[kMaxBlockSize];
  for (size_t j = 0; j < lo.nblocks; ++j) {
    size_t e0 = j * b;
    int len = static_cast<int>(minSize(b, n - e0));
    sum16Range(chunks, k, e0, len, acc);
    encodeBlock<float, OutBits, OutSym, Sr>(acc, len, blockParams<float, OutBits, OutSym>(acc, len),
                                            outP.elementOffset + e0, sr, out + 4 * j,
                                            out + lo.zerosOffset + 4 * j,
                                            out + lo.valuesOffset + packedOffset(OutBits, e0));
  }
  zeroPadding(out, lo, OutSym);
}

template <class H>
const H* const* wideChunks(const void* const* chunks) {
  return reinterpret_cast<const H* const*>(chunks);
}

// ---- Run-time parameters -> template instances ---------------------------------------------------
void quantizeFn(const void* in, zcollDataType_t dt, size_t n, const QuantParams& p, void* out) {
  withDtype(dt, [&](auto tt) {
    using T = typename decltype(tt)::type;
    if (p.bits == 16) {
      withWire16(p.wire16, [&](auto ht) {
        using H = typename decltype(ht)::type;
        quantize16Impl<T, H>(static_cast<const T*>(in), n, static_cast<H*>(out));
      });
      return;
    }
    withBits(p.bits, [&](auto bits) {
      withBool(p.symmetric, [&](auto sym) {
        withBool(p.stochastic, [&](auto sr) {
          quantizeImpl<T, decltype(bits)::value, decltype(sym)::value, decltype(sr)::value>(
              static_cast<const T*>(in), n, p, static_cast<uint8_t*>(out));
        });
      });
    });
  });
}

void dequantizeFn(const void* q, size_t n, const QuantParams& p, void* out, zcollDataType_t dt) {
  withDtype(dt, [&](auto tt) {
    using T = typename decltype(tt)::type;
    if (p.bits == 16) {
      withWire16(p.wire16, [&](auto ht) {
        using H = typename decltype(ht)::type;
        const H* one = static_cast<const H*>(q);
        sum16Impl<T, H, false>(&one, 1, n, static_cast<size_t>(p.blockSize), 1.0f,
                               static_cast<T*>(out));
      });
      return;
    }
    withBits(p.bits, [&](auto bits) {
      withBool(p.symmetric, [&](auto sym) {
        dequantizeImpl<T, decltype(bits)::value, decltype(sym)::value>(
            static_cast<const uint8_t*>(q), n, p, static_cast<T*>(out));
      });
    });
  });
}

void dequantizeSumFn(const void* const* chunks, int k, size_t n, const QuantParams& p, float scale,
                     void* out, zcollDataType_t dt) {
  const uint8_t* const* c = reinterpret_cast<const uint8_t* const*>(chunks);
  withDtype(dt, [&](auto tt) {
    using T = typename decltype(tt)::type;
    if (p.bits == 16) {
      withWire16(p.wire16, [&](auto ht) {
        using H = typename decltype(ht)::type;
        sum16Impl<T, H, true>(wideChunks<H>(chunks), k, n, static_cast<size_t>(p.blockSize),
                              scale, static_cast<T*>(out));
      });
      return;
    }
    withBits(p.bits, [&](auto bits) {
      withBool(p.symmetric, [&](auto sym) {
        dequantizeSumImpl<T, decltype(bits)::value, decltype(sym)::value>(c, k, n, p, scale,
                                                                          static_cast<T*>(out));
      });
    });
  });
}

void requantizeFn(const void* const* chunks, int k, size_t n, const QuantParams& in,
                  const QuantParams& outP, void* outQ) {
  const uint8_t* const* c = reinterpret_cast<const uint8_t* const*>(chunks);
  if (in.bits == 16) {
    withWire16(in.wire16, [&](auto ht) {
      using H = typename decltype(ht)::type;
      withBits(outP.bits, [&](auto ob) {
        withBool(outP.symmetric, [&](auto os) {
          withBool(outP.stochastic, [&](auto sr) {
            requantize16Impl<H, decltype(ob)::value, decltype(os)::value, decltype(sr)::value>(
                wideChunks<H>(chunks), k, n, outP, static_cast<uint8_t*>(outQ));
          });
        });
      });
    });
    return;
  }
  withBits(in.bits, [&](auto ib) {
    withBool(in.symmetric, [&](auto is) {
      withBits(outP.bits, [&](auto ob) {
        withBool(outP.symmetric, [&](auto os) {
          withBool(outP.stochastic, [&](auto sr) {
            requantizeImpl<decltype(ib)::value, decltype(is)::value, decltype(ob)::value,
                           decltype(os)::value, decltype(sr)::value>(
                c, k, n, in, outP, static_cast<uint8_t*>(outQ));
          });
        });
      });
    });
  });
}

}  // namespace

const KernelSet& kernels() {
  static const KernelSet set{Vec::kName, quantizeFn, dequantizeFn, dequantizeSumFn, requantizeFn};
  return set;
}

}  // namespace ZCOLL_QUANT_ISA_NS
}  // namespace quant
}  // namespace zcoll
