// Building blocks of the CUDA quantization kernels (layer 1: vector loads/stores of groups of 8
// elements, warp reductions, per-group quantize/dequantize on quant_math.h) and of their host
// launchers (argument checks, run-time -> template dispatch, launch checking).
//
// Work split: quantizing kernels give one warp per quantization block (two passes: reduce, then
// quantize; the block stays in L1/L2 between them); dequantizing kernels give one thread per
// group of 8 elements. A group never straddles a block (blocks are multiples of 32 elements).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "base/dtype.h"
#include "base/result.h"
#include "cuda/quant_cuda.h"
#include "quant/quant_math.h"
#include "quant/type_switch.h"

namespace zcoll {
namespace quant {
namespace cuda {
namespace detail {

constexpr int kGroup = 8;           // elements per thread step
constexpr int kThreads = 256;       // threads per CUDA block
constexpr int kMaxGrid = 65535;     // grid-stride beyond this

// ---- Element conversion -----------------------------------------------------------------------
template <class T>
__device__ __forceinline__ float toFloat(T v);
template <>
__device__ __forceinline__ float toFloat<float>(float v) { return v; }
template <>
__device__ __forceinline__ float toFloat<half_t>(half_t v) { return halfToFloat(v); }
template <>
__device__ __forceinline__ float toFloat<bf16_t>(bf16_t v) { return bf16ToFloat(v); }

template <class T>
__device__ __forceinline__ T fromFloat(float v);
template <>
__device__ __forceinline__ float fromFloat<float>(float v) { return v; }
template <>
__device__ __forceinline__ half_t fromFloat<half_t>(float v) { return floatToHalf(v); }
template <>
__device__ __forceinline__ bf16_t fromFloat<bf16_t>(float v) { return floatToBf16(v); }

// ---- Groups of 8 elements: 16-byte vector access when Vec (group start 16-byte aligned) --------
template <class T, bool Vec>
__device__ __forceinline__ void loadGroup(const T* p, int cnt, float v[kGroup]) {
  if (Vec && cnt == kGroup) {
    if (sizeof(T) == 4) {
      float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
      v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else {
      uint4 a = *reinterpret_cast<const uint4*>(p);
      const T* h = reinterpret_cast<const T*>(&a);
#pragma unroll
      for (int i = 0; i < kGroup; ++i) v[i] = toFloat<T>(h[i]);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < kGroup; ++i) v[i] = i < cnt ? toFloat<T>(p[i]) : 0.0f;
}

template <class T, bool Vec>
__device__ __forceinline__ void storeGroup(T* p, int cnt, const float v[kGroup]) {
  if (Vec && cnt == kGroup) {
    if (sizeof(T) == 4) {
      float4* f = reinterpret_cast<float4*>(p);
      f[0] = make_float4(v[0], v[1], v[2], v[3]);
      f[1] = make_float4(v[4], v[5], v[6], v[7]);
    } else {
      uint4 a;
      T* h = reinterpret_cast<T*>(&a);
#pragma unroll
      for (int i = 0; i < kGroup; ++i) h[i] = fromFloat<T>(v[i]);
      *reinterpret_cast<uint4*>(p) = a;
    }
    return;
  }
  for (int i = 0; i < cnt; ++i) p[i] = fromFloat<T>(v[i]);
}

// Packed values of a group (8 bytes int8, 4 bytes INT4; aligned since the values part is).
template <int Bits, bool Sym>
__device__ __forceinline__ void loadQGroup(const uint8_t* vals, size_t e, int cnt, int q[kGroup]) {
  const uint8_t* p = vals + (Bits == 8 ? e : e / 2);
  uint8_t b[kGroup];
  if (cnt == kGroup) {
    if (Bits == 8) {
      *reinterpret_cast<uint2*>(b) = *reinterpret_cast<const uint2*>(p);
    } else {
      *reinterpret_cast<uint32_t*>(b) = *reinterpret_cast<const uint32_t*>(p);
    }
  } else {
    for (int i = 0; i < (Bits == 8 ? cnt : (cnt + 1) / 2); ++i) b[i] = p[i];
  }
#pragma unroll
  for (int i = 0; i < kGroup; ++i) {
    q[i] = Bits == 8 ? unpackByte(b[i], Sym) : unpackNibble(b[i / 2], i & 1, Sym);
  }
}

template <int Bits>
__device__ __forceinline__ void storeQGroup(uint8_t* vals, size_t e, int cnt, const int q[kGroup]) {
  uint8_t* p = vals + (Bits == 8 ? e : e / 2);
  alignas(8) uint8_t b[kGroup];
#pragma unroll
  for (int i = 0; i < kGroup; ++i) {
    if (Bits == 8) {
      b[i] = static_cast<uint8_t>(i < cnt ? q[i] : 0);
    } else if ((i & 1) == 0) {
      b[i / 2] = packNibbles(i < cnt ? q[i] : 0, i + 1 < cnt ? q[i + 1] : 0);
    }
  }
  if (cnt == kGroup) {
    if (Bits == 8) {
      *reinterpret_cast<uint2*>(p) = *reinterpret_cast<const uint2*>(b);
    } else {
      *reinterpret_cast<uint32_t*>(p) = *reinterpret_cast<const uint32_t*>(b);
    }
    return;
  }
  for (int i = 0; i < (Bits == 8 ? cnt : (cnt + 1) / 2); ++i) p[i] = b[i];
}

// ---- Warp reductions (max / min are order-independent) ----------------------------------------
__device__ __forceinline__ uint32_t warpMaxU(uint32_t v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warpMin(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Running block statistics over groups.
struct Stats {
  uint32_t maxAbs;
  float mn, mx;
  __device__ void init() {
    maxAbs = 0;
    mn = bitsFloat(0x7f800000u);
    mx = bitsFloat(0xff800000u);
  }
  __device__ void add(const float v[kGroup], int cnt) {
    for (int i = 0; i < cnt; ++i) {
      maxAbs = max(maxAbs, floatBits(v[i]) & 0x7fffffffu);
      mn = fminf(mn, v[i]);
      mx = fmaxf(mx, v[i]);
    }
  }
  template <int Bits, bool Sym>
  __device__ BlockParams finish() {
    uint32_t a = warpMaxU(maxAbs);
    if (Sym) return symmetricParams(a, Bits);
    return asymmetricParams(a, warpMin(mn), warpMax(mx), Bits);
  }
};

// q for a group (rcp = quantReciprocal(bp.scale), once per block); stochastic rounding indexes
// the hash by the global element index g0 + i.
template <int Bits, bool Sym>
__device__ __forceinline__ void quantizeGroup(const float v[kGroup], BlockParams bp, float rcp,
                                              bool sr, uint64_t seed, uint64_t g0,
                                              int q[kGroup]) {
  SrKey key = sr ? srKey(seed, static_cast<uint32_t>(g0 >> 32)) : SrKey{0, 0};
#pragma unroll
  for (int i = 0; i < kGroup; ++i) {
    float u = 0.0f;
    if (sr) {
      uint64_t g = g0 + i;
      SrKey k = (g >> 32) == (g0 >> 32) ? key : srKey(seed, static_cast<uint32_t>(g >> 32));
      u = srUniformFromHash(srHash(k, static_cast<uint32_t>(g)));
    }
    q[i] = quantizeValue(v[i], bp, rcp, Bits, Sym, sr, u);
  }
}

// Scales/zeros of block j and the padding bytes of the layout (by the warp of the last block).
template <bool Sym>
__device__ __forceinline__ void writeBlockHeader(uint8_t* q, const Layout& l, size_t j,
                                                 BlockParams bp, int lane) {
  if (lane == 0) {
    reinterpret_cast<float*>(q)[j] = bp.scale;
    if (!Sym) reinterpret_cast<float*>(q + l.zerosOffset)[j] = bp.zero;
  }
  if (j + 1 != l.nblocks) return;
  size_t sb = 4 * l.nblocks, pad = align16(sb) - sb, vEnd = l.valuesOffset + l.valuesBytes;
  for (size_t i = lane; i < pad; i += 32) {
    q[sb + i] = 0;
    if (!Sym) q[l.zerosOffset + sb + i] = 0;
  }
  for (size_t i = vEnd + lane; i < l.totalBytes; i += 32) q[i] = 0;
}

// ---- Chunk pointers of the sums (dequantizeSum, dequantReduceRequant) -------------------------
// Up to kParamChunks pointers travel in the kernel's parameters; beyond, the kernel reads them
// from a device array (DeviceChunkList). Kernels are instantiated over List, so the common case
// reads its parameters exactly as before. Either way each pointer is only looked up: the chunks
// are summed in the same order 0..k-1 with the same operations, so k has no effect on the bytes.
struct ChunkPtrs {
  const uint8_t* params[kParamChunks];  // k <= kParamChunks
  const uint8_t* const* list;           // k > kParamChunks: device memory, k entries
  template <bool List>
  __device__ __forceinline__ const uint8_t* at(int c) const {
    return List ? list[c] : params[c];
  }
};

// ---- Host side --------------------------------------------------------------------------------

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// CUDA blocks of `threadsPerBlock` for threadsNeeded threads: at least 1, at most kMaxGrid (or the
// cap of setMaxGridForTesting); the kernels grid-stride over the rest.
int gridFor(size_t threadsNeeded, int threadsPerBlock = kThreads);

// Argument checks shared by the launchers (zcollInvalidArgument before any launch).
Result checkQuantBuffer(const void* p, size_t n, const char* what, const char* name);
Result checkData(const void* p, size_t n, zcollDataType_t dt, const char* what, const char* name);
Result checkChunks(const void* const* chunks, int k, size_t n, const char* what);

// The device array of chunk pointers of one launch with k > kParamChunks. fill() allocates it in
// stream order (cudaMallocAsync) and writes it with kernels whose parameters carry up to
// kParamChunks pointers each: a launch copies its parameters, so the caller's host array is read
// before fill() returns and need not outlive it (no pinned memory, no host-to-device copy that
// could read it later). The destructor frees it in stream order (cudaFreeAsync), after every
// launch issued on the stream by then, so it must live until the sum kernel is launched; on an
// error path it frees what was allocated the same way.
class DeviceChunkList {
 public:
  DeviceChunkList() = default;
  ~DeviceChunkList();
  DeviceChunkList(const DeviceChunkList&) = delete;
  DeviceChunkList& operator=(const DeviceChunkList&) = delete;
  Result fill(const void* const* chunks, int k, cudaStream_t stream, const char* what);
  const uint8_t* const* get() const { return list_; }

 private:
  const uint8_t** list_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// Fills `ptrs` for a launch over k chunks: in the parameters when k <= kParamChunks (returns
// *useList = false), else through `list` (*useList = true).
Result setChunkPtrs(const void* const* chunks, int k, cudaStream_t stream, const char* what,
                    ChunkPtrs* ptrs, DeviceChunkList* list, bool* useList);

// The bits-16 format (quant_wide16.cu). toWide16: nChunks chunks of chunkElems elements of the
// input type into slots dest[c] of slotBytes (= quantizedBytes(chunkElems), 16-bit values).
struct Wide16Args {
  const void* in;
  uint8_t* out;
  size_t chunkElems;
  size_t slotBytes;
  int nChunks;
  int dest[kMaxReorderChunks];
};
Result launchToWide16(const Wide16Args& a, zcollDataType_t dt, zcollDataType_t wire16, bool vec,
                      cudaStream_t stream);

// sum16: out = (sum over the k chunks, in order) [* scale], NaN blocks of blockSize elements
// where a value is not finite.
struct Sum16Args {
  ChunkPtrs chunks;
  int k;
  size_t n;
  int blockSize;
  float scale;
  bool applyScale;  // false: plain dequantize (k = 1, no multiply)
  void* out;
};
Result launchSum16(const Sum16Args& a, bool list, zcollDataType_t dt, zcollDataType_t wire16,
                   cudaStream_t stream, const char* what);

// zcollCudaError if the launch just made failed.
Result checkLaunch(const char* what);

}  // namespace detail
}  // namespace cuda
}  // namespace quant
}  // namespace zcoll
