// dequantReduceRequant on the GPU (the qgZ middle hop): one warp per output block. The fp32 sum
// of a group over the k input chunks is computed in chunk order in both passes (reduce, then
// quantize) instead of being stored: identical values, no scratch memory. Any k: beyond
// kParamChunks the kernel reads the chunk pointers from a device array (ChunkPtrs).
#include "cuda/quant_kernels.cuh"

namespace zcoll {
namespace quant {
namespace cuda {
namespace {

using namespace detail;

struct RequantArgs {
  ChunkPtrs chunks;
  int k;
  size_t n;
  int inBlock, outBlock;
  bool stochastic;
  uint64_t seed;
  uint64_t elementOffset;
  uint8_t* out;
};

// Sum of elements [e, e + cnt) over the chunks; canonical NaN where an input block is non-finite.
template <int InBits, bool InSym, bool List>
__device__ __forceinline__ void groupSum(const RequantArgs& a, const Layout& li, size_t e, int cnt,
                                         float v[kGroup]) {
  size_t j = e / a.inBlock;
  int q[kGroup];
  for (int c = 0; c < a.k; ++c) {
    const uint8_t* base = a.chunks.at<List>(c);
    float scale = reinterpret_cast<const float*>(base)[j];
    float zero = InSym ? 0.0f : reinterpret_cast<const float*>(base + li.zerosOffset)[j];
    if (decodesToNan(scale, zero)) {
#pragma unroll
      for (int i = 0; i < kGroup; ++i) v[i] = bitsFloat(kCanonicalNan);
      return;
    }
    loadQGroup<InBits, InSym>(base + li.valuesOffset, e, cnt, q);
#pragma unroll
    for (int i = 0; i < kGroup; ++i) {
      float d = dequantizeValue(q[i], scale, zero, InSym);
      v[i] = c == 0 ? d : addRn(v[i], d);
    }
  }
}

template <int InBits, bool InSym, int OutBits, bool OutSym, bool List>
__global__ void requantKernel(RequantArgs a) {
  Layout li = layoutOf(a.n, a.inBlock, InBits, InSym);
  Layout lo = layoutOf(a.n, a.outBlock, OutBits, OutSym);
  size_t nWarps = static_cast<size_t>(gridDim.x) * blockDim.x / 32;
  int lane = threadIdx.x & 31;
  float v[kGroup];
  int q[kGroup] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (size_t j = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       j < lo.nblocks; j += nWarps) {
    size_t e0 = j * a.outBlock;
    int len = static_cast<int>(min(static_cast<size_t>(a.outBlock), a.n - e0));
    Stats st;
    st.init();
    for (int g = lane * kGroup; g < len; g += 32 * kGroup) {
      int cnt = min(kGroup, len - g);
      groupSum<InBits, InSym, List>(a, li, e0 + g, cnt, v);
      st.add(v, cnt);
    }
    BlockParams bp = st.finish<OutBits, OutSym>();
    writeBlockHeader<OutSym>(a.out, lo, j, bp, lane);
    bool quantizable = paramsQuantizable(bp);
    float rcp = quantReciprocal(bp.scale);
    for (int g = lane * kGroup; g < len; g += 32 * kGroup) {
      int cnt = min(kGroup, len - g);
      if (quantizable) {
        groupSum<InBits, InSym, List>(a, li, e0 + g, cnt, v);
        quantizeGroup<OutBits, OutSym>(v, bp, rcp, a.stochastic, a.seed, a.elementOffset + e0 + g,
                                       q);
      }
      storeQGroup<OutBits>(a.out + lo.valuesOffset, e0 + g, cnt, q);
    }
  }
}

Result launchRequant(const RequantArgs& a, bool list, const QuantParams& in,
                     const QuantParams& out, cudaStream_t stream) {
  size_t nblocks = (a.n + out.blockSize - 1) / out.blockSize;
  int grid = gridFor(nblocks * 32);
  withBits(in.bits, [&](auto ib) {
    withBool(in.symmetric, [&](auto is) {
      withBits(out.bits, [&](auto ob) {
        withBool(out.symmetric, [&](auto os) {
          withBool(list, [&](auto li) {
            requantKernel<decltype(ib)::value, decltype(is)::value, decltype(ob)::value,
                          decltype(os)::value, decltype(li)::value>
                <<<grid, kThreads, 0, stream>>>(a);
          });
        });
      });
    });
  });
  return checkLaunch("dequantReduceRequant");
}

}  // namespace

Result dequantReduceRequant(const void* const* chunks, int k, size_t n, const QuantParams& inParams,
                            const QuantParams& outParams, void* outQ, cudaStream_t stream) {
  const char* what = "dequantReduceRequant";
  ZCOLL_CHECK(validate(inParams));
  ZCOLL_CHECK(validate(outParams));
  ZCOLL_CHECK(checkChunks(chunks, k, n, what));
  ZCOLL_CHECK(checkQuantBuffer(outQ, n, what, "output"));
  if (n == 0) return zcollSuccess;
  RequantArgs a{};
  DeviceChunkList list;  // freed in stream order after the launch (or on an error path)
  bool useList = false;
  ZCOLL_CHECK(setChunkPtrs(chunks, k, stream, what, &a.chunks, &list, &useList));
  a.k = k;
  a.n = n;
  a.inBlock = inParams.blockSize;
  a.outBlock = outParams.blockSize;
  a.stochastic = outParams.stochastic;
  a.seed = outParams.seed;
  a.elementOffset = outParams.elementOffset;
  a.out = static_cast<uint8_t*>(outQ);
  return launchRequant(a, useList, inParams, outParams, stream);
}

}  // namespace cuda
}  // namespace quant
}  // namespace zcoll
