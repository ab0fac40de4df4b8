// dequantize / dequantizeSum on the GPU: one thread per group of 8 elements (which lies inside
// one block). out = (d_0 + d_1 + ... + d_{k-1}) * scale in fp32, in chunk order, like the CPU;
// a block that is non-finite in any chunk gives the canonical NaN. Any k: beyond kParamChunks the
// kernel reads the chunk pointers from a device array (quant_kernels.cuh, ChunkPtrs), and nothing
// else changes. Bits 16 (16-bit floats): quant_wide16.cu.
#include "cuda/quant_kernels.cuh"

namespace zcoll {
namespace quant {
namespace cuda {
namespace {

using namespace detail;

struct SumArgs {
  ChunkPtrs chunks;
  int k;
  size_t n;
  int blockSize;
  float scale;
  bool applyScale;  // false: plain dequantize (k = 1, no multiply)
  void* out;
};

template <int Bits, bool Sym, bool List>
__device__ __forceinline__ bool sumGroup(const ChunkPtrs& chunks, int k, const Layout& l,
                                         size_t j, size_t e, int cnt, float acc[kGroup]) {
  int q[kGroup];
  for (int c = 0; c < k; ++c) {
    const uint8_t* base = chunks.at<List>(c);
    float scale = reinterpret_cast<const float*>(base)[j];
    float zero = Sym ? 0.0f : reinterpret_cast<const float*>(base + l.zerosOffset)[j];
    if (decodesToNan(scale, zero)) return false;
    loadQGroup<Bits, Sym>(base + l.valuesOffset, e, cnt, q);
#pragma unroll
    for (int i = 0; i < kGroup; ++i) {
      float d = dequantizeValue(q[i], scale, zero, Sym);
      acc[i] = c == 0 ? d : addRn(acc[i], d);
    }
  }
  return true;
}

template <class T, int Bits, bool Sym, bool Vec, bool List>
__global__ void dequantSumKernel(SumArgs a) {
  Layout l = layoutOf(a.n, a.blockSize, Bits, Sym);
  size_t groups = (a.n + kGroup - 1) / kGroup;
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t g = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups;
       g += stride) {
    size_t e = g * kGroup;
    int cnt = static_cast<int>(a.n - e < static_cast<size_t>(kGroup) ? a.n - e : kGroup);
    float acc[kGroup];
    bool finite = sumGroup<Bits, Sym, List>(a.chunks, a.k, l, e / a.blockSize, e, cnt, acc);
#pragma unroll
    for (int i = 0; i < kGroup; ++i) {
      acc[i] = !finite ? bitsFloat(kCanonicalNan) : (a.applyScale ? mulRn(acc[i], a.scale) : acc[i]);
    }
    storeGroup<T, Vec>(static_cast<T*>(a.out) + e, cnt, acc);
  }
}

Result launchSum(const SumArgs& a, bool list, const QuantParams& p, zcollDataType_t dt,
                 cudaStream_t stream, const char* what) {
  bool vec = aligned16(a.out);
  int grid = gridFor((a.n + kGroup - 1) / kGroup);
  withDtype(dt, [&](auto tt) {
    using T = typename decltype(tt)::type;
    withBits(p.bits, [&](auto bits) {
      withBool(p.symmetric, [&](auto sym) {
        withBool(vec, [&](auto v) {
          withBool(list, [&](auto li) {
            dequantSumKernel<T, decltype(bits)::value, decltype(sym)::value, decltype(v)::value,
                             decltype(li)::value><<<grid, kThreads, 0, stream>>>(a);
          });
        });
      });
    });
  });
  return checkLaunch(what);
}

Result sumImpl(const void* const* chunks, int k, size_t n, const QuantParams& p, float scale,
               bool applyScale, void* out, zcollDataType_t dt, cudaStream_t stream,
               const char* what) {
  ZCOLL_CHECK(validate(p));
  ZCOLL_CHECK(checkQuantizable(dt, what));
  ZCOLL_CHECK(checkChunks(chunks, k, n, what));
  ZCOLL_CHECK(validateSumScale(scale, what));
  ZCOLL_CHECK(checkData(out, n, dt, what, "output"));
  if (n == 0) return zcollSuccess;
  SumArgs a{};
  DeviceChunkList list;  // freed in stream order after the launch (or on an error path)
  bool useList = false;
  ZCOLL_CHECK(setChunkPtrs(chunks, k, stream, what, &a.chunks, &list, &useList));
  if (p.bits == 16) {  // quant_wide16.cu
    Sum16Args w{a.chunks, k, n, p.blockSize, scale, applyScale, out};
    return launchSum16(w, useList, dt, p.wire16, stream, what);
  }
  a.k = k;
  a.n = n;
  a.blockSize = p.blockSize;
  a.scale = scale;
  a.applyScale = applyScale;
  a.out = out;
  return launchSum(a, useList, p, dt, stream, what);
}

}  // namespace

Result dequantize(const void* q, size_t n, const QuantParams& p, void* out, zcollDataType_t dtype,
                  cudaStream_t stream) {
  const void* chunks[1] = {q};
  return sumImpl(chunks, 1, n, p, 1.0f, false, out, dtype, stream, "dequantize");
}

Result dequantizeSum(const void* const* chunks, int k, size_t n, const QuantParams& p, float scale,
                     void* out, zcollDataType_t dtype, cudaStream_t stream) {
  return sumImpl(chunks, k, n, p, scale, true, out, dtype, stream, "dequantizeSum");
}

}  // namespace cuda
}  // namespace quant
}  // namespace zcoll
