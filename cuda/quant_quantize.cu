// quantize / quantizeChunks on the GPU: one warp per quantization block.
//   pass 1: each lane reduces its groups of 8 (max |x| bits, min, max), then a warp reduction;
//   every lane derives the same BlockParams (quant_math.h);
//   pass 2: each lane quantizes and packs its groups (8 or 4 bytes per store).
// Chunk c of a launch reads in[c * chunkElems ...] and writes slot dest[c]. Bits 16 (16-bit
// floats, no blocks): quant_wide16.cu.
#include "cuda/quant_kernels.cuh"

namespace zcoll {
namespace quant {
namespace cuda {
namespace {

using namespace detail;

struct QuantizeArgs {
  const void* in;        // first chunk of this launch
  uint8_t* out;          // slot 0
  size_t chunkElems;
  size_t slotBytes;
  int nChunks;           // in this launch
  int blockSize;
  bool stochastic;
  uint64_t seed;
  uint64_t firstIndex;   // global SR index of this launch's first element
  int dest[kMaxReorderChunks];
};

template <class T, int Bits, bool Sym, bool Vec>
__device__ void quantizeBlockWarp(const QuantizeArgs& a, const T* x, uint8_t* q, const Layout& l,
                                  size_t j, uint64_t g0, int lane) {
  size_t e0 = j * a.blockSize;
  size_t rest = a.chunkElems - e0;
  int len = static_cast<int>(rest < static_cast<size_t>(a.blockSize) ? rest : a.blockSize);
  float v[kGroup];
  Stats st;
  st.init();
  for (int g = lane * kGroup; g < len; g += 32 * kGroup) {
    int cnt = min(kGroup, len - g);
    loadGroup<T, Vec>(x + e0 + g, cnt, v);
    st.add(v, cnt);
  }
  BlockParams bp = st.finish<Bits, Sym>();
  writeBlockHeader<Sym>(q, l, j, bp, lane);
  uint8_t* vals = q + l.valuesOffset;
  int qv[kGroup] = {0, 0, 0, 0, 0, 0, 0, 0};
  bool quantizable = paramsQuantizable(bp);
  float rcp = quantReciprocal(bp.scale);
  for (int g = lane * kGroup; g < len; g += 32 * kGroup) {
    int cnt = min(kGroup, len - g);
    if (quantizable) {
      loadGroup<T, Vec>(x + e0 + g, cnt, v);
      quantizeGroup<Bits, Sym>(v, bp, rcp, a.stochastic, a.seed, g0 + e0 + g, qv);
    }
    storeQGroup<Bits>(vals, e0 + g, cnt, qv);
  }
}

template <class T, int Bits, bool Sym, bool Vec>
__global__ void quantizeKernel(QuantizeArgs a) {
  Layout l = layoutOf(a.chunkElems, a.blockSize, Bits, Sym);
  size_t total = l.nblocks * static_cast<size_t>(a.nChunks);
  size_t warp = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  size_t nWarps = static_cast<size_t>(gridDim.x) * blockDim.x / 32;
  int lane = threadIdx.x & 31;
  for (size_t w = warp; w < total; w += nWarps) {
    size_t c = w / l.nblocks, j = w % l.nblocks;
    const T* x = static_cast<const T*>(a.in) + c * a.chunkElems;
    uint8_t* q = a.out + static_cast<size_t>(a.dest[c]) * a.slotBytes;
    quantizeBlockWarp<T, Bits, Sym, Vec>(a, x, q, l, j, a.firstIndex + c * a.chunkElems, lane);
  }
}

Result launchQuantize(const QuantizeArgs& a, zcollDataType_t dt, const QuantParams& p, bool vec,
                      cudaStream_t stream) {
  size_t nblocks = (a.chunkElems + p.blockSize - 1) / p.blockSize;
  int grid = gridFor(nblocks * a.nChunks * 32);
  withDtype(dt, [&](auto tt) {
    using T = typename decltype(tt)::type;
    withBits(p.bits, [&](auto bits) {
      withBool(p.symmetric, [&](auto sym) {
        withBool(vec, [&](auto v) {
          quantizeKernel<T, decltype(bits)::value, decltype(sym)::value, decltype(v)::value>
              <<<grid, kThreads, 0, stream>>>(a);
        });
      });
    });
  });
  return checkLaunch("quantize");
}

Result checkQuantizeArgs(const void* in, zcollDataType_t dt, size_t total, const QuantParams& p,
                         void* out, const char* what) {
  ZCOLL_CHECK(validate(p));
  ZCOLL_CHECK(checkQuantizable(dt, what));
  ZCOLL_CHECK(checkData(in, total, dt, what, "input"));
  return checkQuantBuffer(out, total, what, "output");
}

// quantizeChunks at bits 16 (quant_wide16.cu), in batches of kMaxReorderChunks chunks.
Result quantizeWide16(const void* in, zcollDataType_t dtype, size_t chunkElems, size_t nChunks,
                      const int* destOrder, const QuantParams& p, void* out, bool vec,
                      cudaStream_t stream) {
  Wide16Args a{};
  a.out = static_cast<uint8_t*>(out);
  a.chunkElems = chunkElems;
  a.slotBytes = quantizedBytes(chunkElems, p);
  for (size_t first = 0; first < nChunks; first += kMaxReorderChunks) {
    size_t cnt = nChunks - first < static_cast<size_t>(kMaxReorderChunks) ? nChunks - first
                                                                          : kMaxReorderChunks;
    a.in = static_cast<const char*>(in) + first * chunkElems * dtypeSize(dtype);
    a.nChunks = static_cast<int>(cnt);
    for (size_t c = 0; c < cnt; ++c) {
      a.dest[c] = destOrder ? destOrder[first + c] : static_cast<int>(first + c);
    }
    ZCOLL_CHECK(launchToWide16(a, dtype, p.wire16, vec, stream));
  }
  return zcollSuccess;
}

}  // namespace

Result quantizeChunks(const void* in, zcollDataType_t dtype, size_t chunkElems, size_t nChunks,
                      const int* destOrder, const QuantParams& p, void* out, cudaStream_t stream) {
  const char* what = "quantizeChunks";
  ZCOLL_CHECK(checkQuantizeArgs(in, dtype, chunkElems * nChunks, p, out, what));
  if (chunkElems == 0 || nChunks == 0) return zcollSuccess;
  for (size_t c = 0; destOrder != nullptr && c < nChunks; ++c) {
    if (destOrder[c] < 0 || static_cast<size_t>(destOrder[c]) >= nChunks) {
      return fail(zcollInvalidArgument, "%s (cuda): destOrder[%zu] = %d, not in [0, %zu)", what,
                  c, destOrder[c], nChunks);
    }
  }
  size_t esize = dtypeSize(dtype);
  bool vec = aligned16(in) && (nChunks == 1 || (chunkElems * esize) % 16 == 0);
  if (p.bits == 16) return quantizeWide16(in, dtype, chunkElems, nChunks, destOrder, p, out, vec,
                                          stream);
  QuantizeArgs a{};
  a.out = static_cast<uint8_t*>(out);
  a.chunkElems = chunkElems;
  a.slotBytes = quantizedBytes(chunkElems, p);
  a.blockSize = p.blockSize;
  a.stochastic = p.stochastic;
  a.seed = p.seed;
  for (size_t first = 0; first < nChunks; first += kMaxReorderChunks) {
    size_t cnt = nChunks - first < static_cast<size_t>(kMaxReorderChunks) ? nChunks - first
                                                                          : kMaxReorderChunks;
    a.in = static_cast<const char*>(in) + first * chunkElems * esize;
    a.nChunks = static_cast<int>(cnt);
    a.firstIndex = p.elementOffset + first * chunkElems;
    for (size_t c = 0; c < cnt; ++c) {
      a.dest[c] = destOrder ? destOrder[first + c] : static_cast<int>(first + c);
    }
    ZCOLL_CHECK(launchQuantize(a, dtype, p, vec, stream));
  }
  return zcollSuccess;
}

Result quantize(const void* in, zcollDataType_t dtype, size_t n, const QuantParams& p, void* out,
                cudaStream_t stream) {
  return quantizeChunks(in, dtype, n, 1, nullptr, p, out, stream);
}

}  // namespace cuda
}  // namespace quant
}  // namespace zcoll
