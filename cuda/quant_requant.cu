// dequantReduceRequant on the GPU (the qgZ middle hop): one warp per output block. Each lane sums
// its groups of the block over the k input chunks once (fp32, chunk order 0..k-1, as the CPU) and
// keeps the sums in shared memory (its own slots: no synchronization) between the two passes
// (block statistics, then quantize). Every value written is a function of the block being written
// only: the codes of a block that is all zero or not finite are zeros (the wire format's rule),
// never the previous block's. Any k: beyond kParamChunks the kernel reads the chunk pointers from
// a device array (ChunkPtrs).
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

// The same for bits-16 chunks of H (no block parameters): a non-finite value stays in the sum,
// whose block the requantization then marks non-finite (as the CPU's).
template <class H, bool List>
__device__ __forceinline__ void groupSum16(const RequantArgs& a, size_t e, int cnt,
                                           float v[kGroup]) {
  float d[kGroup];
  for (int c = 0; c < a.k; ++c) {
    loadGroup<H, true>(reinterpret_cast<const H*>(a.chunks.at<List>(c)) + e, cnt, d);
#pragma unroll
    for (int i = 0; i < kGroup; ++i) v[i] = c == 0 ? d[i] : addRn(v[i], d[i]);
  }
}

// Shared memory of the sums: per warp, per lane, laneGroups groups of 8 floats as two float4
// each, laid out [warp][slot][lane] so that a warp's 16-byte accesses hit distinct banks.
__host__ __device__ constexpr int laneGroupsFor(int outBlock) {
  return (outBlock + 32 * kGroup - 1) / (32 * kGroup);
}
constexpr size_t kSumBytesPerLaneGroup = 32 * kGroup * sizeof(float);  // per warp: 1 KiB
constexpr size_t kMaxSumBytes = 48 * 1024;  // per CUDA block: the default limit, no opt-in
static_assert(kMaxBlockSize / (32 * kGroup) * kSumBytesPerLaneGroup <= kMaxSumBytes,
              "one warp's sums of the largest block fit");

// H: the 16-bit float of InBits 16 inputs (unused otherwise).
template <int InBits, bool InSym, int OutBits, bool OutSym, bool List, class H = bf16_t>
__global__ void requantKernel(RequantArgs a) {
  extern __shared__ float4 sums[];
  Layout li = layoutOf(a.n, a.inBlock, InBits, InSym);
  Layout lo = layoutOf(a.n, a.outBlock, OutBits, OutSym);
  size_t nWarps = static_cast<size_t>(gridDim.x) * blockDim.x / 32;
  int lane = threadIdx.x & 31;
  int laneGroups = laneGroupsFor(a.outBlock);
  float4* mine = sums + static_cast<size_t>(threadIdx.x / 32) * (2 * laneGroups * 32) + lane;
  float v[kGroup];
  for (size_t j = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       j < lo.nblocks; j += nWarps) {
    size_t e0 = j * a.outBlock;
    int len = static_cast<int>(min(static_cast<size_t>(a.outBlock), a.n - e0));
    Stats st;
    st.init();
    for (int s = 0, g = lane * kGroup; g < len; ++s, g += 32 * kGroup) {
      int cnt = min(kGroup, len - g);
      if constexpr (InBits == 16) {
        groupSum16<H, List>(a, e0 + g, cnt, v);
      } else {
        groupSum<InBits, InSym, List>(a, li, e0 + g, cnt, v);
      }
      st.add(v, cnt);
      mine[(2 * s) * 32] = make_float4(v[0], v[1], v[2], v[3]);
      mine[(2 * s + 1) * 32] = make_float4(v[4], v[5], v[6], v[7]);
    }
    BlockParams bp = st.finish<OutBits, OutSym>();
    writeBlockHeader<OutSym>(a.out, lo, j, bp, lane);
    bool quantizable = paramsQuantizable(bp);
    float rcp = quantReciprocal(bp.scale);
    for (int s = 0, g = lane * kGroup; g < len; ++s, g += 32 * kGroup) {
      int cnt = min(kGroup, len - g);
      int q[kGroup] = {0, 0, 0, 0, 0, 0, 0, 0};  // per group: zeros unless quantized below
      if (quantizable) {
        float4 x = mine[(2 * s) * 32], y = mine[(2 * s + 1) * 32];
        v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w, v[4] = y.x, v[5] = y.y, v[6] = y.z,
        v[7] = y.w;
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
  size_t warpBytes = laneGroupsFor(out.blockSize) * kSumBytesPerLaneGroup;
  int warps = static_cast<int>(kMaxSumBytes / warpBytes);
  warps = warps < kThreads / 32 ? warps : kThreads / 32;  // 8 warps up to 1536-element blocks
  int threads = warps * 32;
  size_t smem = warps * warpBytes;
  int grid = gridFor(nblocks * 32, threads);
  if (in.bits == 16) {
    withWire16(in.wire16, [&](auto ht) {
      withBits(out.bits, [&](auto ob) {
        withBool(out.symmetric, [&](auto os) {
          withBool(list, [&](auto li) {
            requantKernel<16, true, decltype(ob)::value, decltype(os)::value, decltype(li)::value,
                          typename decltype(ht)::type><<<grid, threads, smem, stream>>>(a);
          });
        });
      });
    });
    return checkLaunch("dequantReduceRequant");
  }
  withBits(in.bits, [&](auto ib) {
    withBool(in.symmetric, [&](auto is) {
      withBits(out.bits, [&](auto ob) {
        withBool(out.symmetric, [&](auto os) {
          withBool(list, [&](auto li) {
            requantKernel<decltype(ib)::value, decltype(is)::value, decltype(ob)::value,
                          decltype(os)::value, decltype(li)::value>
                <<<grid, threads, smem, stream>>>(a);
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
  ZCOLL_CHECK(checkBlockOutput(outParams, what));
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
