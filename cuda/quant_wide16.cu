// The bits-16 format on the GPU (QuantParams::wire16: every element as a 16-bit float, no block
// parameters; qgZ's intra-node hop at intraBits 16), the same bytes as the CPU kernels
// (src/quant/kernels_impl.h, "16-bit floats"):
//   toWide16: one thread per group of 8 elements: converted to H (round to nearest even; the raw
//     bits when the input is H already), the slot's padding to 16 bytes zeroed;
//   sum16: one warp per block of blockSize elements: each lane sums its groups over the k chunks
//     in fp32 in chunk order (times the scale for dequantizeSum) and stores them; where any value
//     read in the block is not finite, the lanes then overwrite the whole block with the
//     canonical NaN (a rare second write of the lane's own groups).
#include <type_traits>

#include "cuda/quant_kernels.cuh"

namespace zcoll {
namespace quant {
namespace cuda {
namespace detail {
namespace {

template <class T, class H, bool Vec>
__global__ void toWide16Kernel(Wide16Args a) {
  const size_t perChunk = (a.chunkElems + kGroup - 1) / kGroup;
  const size_t total = perChunk * static_cast<size_t>(a.nChunks);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t g = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < total;
       g += stride) {
    const size_t c = g / perChunk, e = (g % perChunk) * kGroup;
    const int cnt = static_cast<int>(min(static_cast<size_t>(kGroup), a.chunkElems - e));
    const T* x = static_cast<const T*>(a.in) + c * a.chunkElems + e;
    uint8_t* slot = a.out + static_cast<size_t>(a.dest[c]) * a.slotBytes;
    H* y = reinterpret_cast<H*>(slot) + e;
    if constexpr (std::is_same<T, H>::value) {
      for (int i = 0; i < cnt; ++i) y[i] = x[i];
    } else {
      float v[kGroup];
      loadGroup<T, Vec>(x, cnt, v);
      storeGroup<H, true>(y, cnt, v);
    }
    if (e + kGroup >= a.chunkElems) {
      for (size_t b = 2 * a.chunkElems; b < a.slotBytes; ++b) slot[b] = 0;
    }
  }
}

template <class T, class H, bool Vec, bool List>
__global__ void sum16Kernel(Sum16Args a) {
  const size_t nblocks = (a.n + a.blockSize - 1) / a.blockSize;
  const size_t nWarps = static_cast<size_t>(gridDim.x) * blockDim.x / 32;
  const int lane = threadIdx.x & 31;
  for (size_t j = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; j < nblocks;
       j += nWarps) {
    const size_t e0 = j * a.blockSize;
    const int len = static_cast<int>(min(static_cast<size_t>(a.blockSize), a.n - e0));
    T* out = static_cast<T*>(a.out) + e0;
    uint32_t maxAbs = 0;
    float acc[kGroup], d[kGroup];
    for (int g = lane * kGroup; g < len; g += 32 * kGroup) {
      const int cnt = min(kGroup, len - g);
      for (int c = 0; c < a.k; ++c) {
        loadGroup<H, true>(reinterpret_cast<const H*>(a.chunks.at<List>(c)) + e0 + g, cnt, d);
#pragma unroll
        for (int i = 0; i < kGroup; ++i) {
          maxAbs = max(maxAbs, floatBits(d[i]) & 0x7fffffffu);
          acc[i] = c == 0 ? d[i] : addRn(acc[i], d[i]);
        }
      }
      if (a.applyScale) {
#pragma unroll
        for (int i = 0; i < kGroup; ++i) acc[i] = mulRn(acc[i], a.scale);
      }
      storeGroup<T, Vec>(out + g, cnt, acc);
    }
    if (warpMaxU(maxAbs) < kExpMask) continue;
#pragma unroll
    for (int i = 0; i < kGroup; ++i) acc[i] = bitsFloat(kCanonicalNan);
    for (int g = lane * kGroup; g < len; g += 32 * kGroup) {
      storeGroup<T, Vec>(out + g, min(kGroup, len - g), acc);
    }
  }
}

}  // namespace

Result launchToWide16(const Wide16Args& a, zcollDataType_t dt, zcollDataType_t wire16, bool vec,
                      cudaStream_t stream) {
  const int grid = gridFor((a.chunkElems + kGroup - 1) / kGroup * a.nChunks);
  withDtype(dt, [&](auto tt) {
    using T = typename decltype(tt)::type;
    withWire16(wire16, [&](auto ht) {
      using H = typename decltype(ht)::type;
      withBool(vec, [&](auto v) {
        toWide16Kernel<T, H, decltype(v)::value><<<grid, kThreads, 0, stream>>>(a);
      });
    });
  });
  return checkLaunch("quantize (bits 16)");
}

Result launchSum16(const Sum16Args& a, bool list, zcollDataType_t dt, zcollDataType_t wire16,
                   cudaStream_t stream, const char* what) {
  const bool vec = aligned16(a.out);
  const int grid = gridFor((a.n + a.blockSize - 1) / a.blockSize * 32);
  withDtype(dt, [&](auto tt) {
    using T = typename decltype(tt)::type;
    withWire16(wire16, [&](auto ht) {
      using H = typename decltype(ht)::type;
      withBool(vec, [&](auto v) {
        withBool(list, [&](auto li) {
          sum16Kernel<T, H, decltype(v)::value, decltype(li)::value>
              <<<grid, kThreads, 0, stream>>>(a);
        });
      });
    });
  });
  return checkLaunch(what);
}

}  // namespace detail
}  // namespace cuda
}  // namespace quant
}  // namespace zcoll
