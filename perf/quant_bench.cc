// Quantization kernels vs memcpy (Google Benchmark). Every operation x dtype x bits at 64 KiB,
// 1 MiB, 16 MiB and 256 MiB of unquantized data; bytes_per_second counts bytes read + bytes
// written (memcpy: 2 x size). Names: <op>/<dtype>/<bits>/<size> with op in memcpy, quantize,
// dequantize, dequant_sum, dequant_reduce_requant; GPU variants are prefixed gpu/ (device-to-
// device copy baseline: gpu/memcpy/<size>) and report an error when no device is present.
//
// Settings: blockSize 256, symmetric, round to nearest even, k = 4 chunks for the sums. For
// dequant_reduce_requant the dtype only sets the element count (size / element size); its input
// and output are quantized (same bits in and out).
//
//   build-quant/perf/quant_bench --benchmark_filter='16777216' --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "quant/isa.h"
#include "quant/quant.h"

#if ZCOLL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda/quant_cuda.h"
#endif

namespace zcoll {
namespace quant {
namespace {

constexpr int kChunks = 4;
const size_t kSizes[] = {size_t{64} << 10, size_t{1} << 20, size_t{16} << 20, size_t{256} << 20};

enum class Op { kQuantize, kDequantize, kSum, kRequant };
const char* opName(Op op) {
  switch (op) {
    case Op::kQuantize: return "quantize";
    case Op::kDequantize: return "dequantize";
    case Op::kSum: return "dequant_sum";
    case Op::kRequant: return "dequant_reduce_requant";
  }
  return "?";
}

const char* dtName(zcollDataType_t dt) {
  return dt == zcollFloat16 ? "fp16" : dt == zcollBfloat16 ? "bf16" : "fp32";
}

QuantParams benchParams(int bits) {
  QuantParams p;
  p.bits = bits;
  p.blockSize = 256;
  return p;
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using HostBuf = std::unique_ptr<uint8_t, FreeDeleter>;

// 64-byte aligned, every page touched.
HostBuf hostAlloc(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  HostBuf b(static_cast<uint8_t*>(std::aligned_alloc(64, rounded ? rounded : 64)));
  std::memset(b.get(), 0, rounded);
  return b;
}

// Pseudo-random values in roughly [-4, 4) written in dt (fast: the 256 MiB cases fill 64M).
void fillData(void* p, size_t n, zcollDataType_t dt) {
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    float v = static_cast<float>(static_cast<int32_t>(s >> 32)) * (1.0f / 536870912.0f);
    if (dt == zcollFloat16) {
      static_cast<half_t*>(p)[i] = floatToHalf(v);
    } else if (dt == zcollBfloat16) {
      static_cast<bf16_t*>(p)[i] = floatToBf16(v);
    } else {
      static_cast<float*>(p)[i] = v;
    }
  }
}

// ---- CPU ----------------------------------------------------------------------------------------
void BM_memcpy(benchmark::State& state, size_t bytes) {
  HostBuf src = hostAlloc(bytes), dst = hostAlloc(bytes);
  std::memset(src.get(), 1, bytes);
  for (auto _ : state) {
    std::memcpy(dst.get(), src.get(), bytes);
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * bytes));
}

void BM_cpu(benchmark::State& state, Op op, zcollDataType_t dt, int bits, size_t bytes) {
  QuantParams p = benchParams(bits);
  size_t n = bytes / dtypeSize(dt), qb = quantizedBytes(n, p);
  HostBuf data = hostAlloc(bytes), q = hostAlloc(qb * kChunks), out = hostAlloc(qb);
  fillData(data.get(), n, dt);
  const void* chunks[kChunks];
  for (int c = 0; c < kChunks; ++c) {
    if (quantize(data.get(), dt, n, p, q.get() + c * qb) != zcollSuccess) {
      state.SkipWithError("quantize failed");
      return;
    }
    chunks[c] = q.get() + c * qb;
  }
  size_t traffic = 0;
  for (auto _ : state) {
    Result r = zcollSuccess;
    switch (op) {
      case Op::kQuantize: r = quantize(data.get(), dt, n, p, q.get()); traffic = bytes + qb; break;
      case Op::kDequantize: r = dequantize(q.get(), n, p, data.get(), dt); traffic = qb + bytes; break;
      case Op::kSum:
        r = dequantizeSum(chunks, kChunks, n, p, 1.0f / kChunks, data.get(), dt);
        traffic = kChunks * qb + bytes;
        break;
      case Op::kRequant:
        r = dequantReduceRequant(chunks, kChunks, n, p, p, out.get());
        traffic = kChunks * qb + qb;
        break;
    }
    if (r != zcollSuccess) state.SkipWithError("operation failed");
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * traffic));
  state.SetLabel(isaName(activeIsa()));
}

// ---- GPU ----------------------------------------------------------------------------------------
#if ZCOLL_HAVE_CUDA
struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) {
    if (cudaMalloc(&p, bytes) != cudaSuccess) p = nullptr;
  }
  ~DevBuf() {
    if (p) cudaFree(p);
  }
};

// Times `body` with CUDA events (manual time), per iteration.
template <class F>
void timeOnStream(benchmark::State& state, cudaStream_t s, F&& body, size_t traffic) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  body();  // warm-up
  for (auto _ : state) {
    cudaEventRecord(a, s);
    if (body() != zcollSuccess) {
      state.SkipWithError("GPU operation failed");
      break;
    }
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    state.SetIterationTime(ms / 1e3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * traffic));
}

void BM_gpuMemcpy(benchmark::State& state, size_t bytes) {
  if (!cuda::cudaDeviceAvailable()) {
    state.SkipWithError("no CUDA device available");
    return;
  }
  DevBuf src(bytes), dst(bytes);
  timeOnStream(state, nullptr, [&] {
    return cudaMemcpyAsync(dst.p, src.p, bytes, cudaMemcpyDeviceToDevice, nullptr) == cudaSuccess
               ? zcollSuccess : zcollCudaError;
  }, 2 * bytes);
}

void BM_gpu(benchmark::State& state, Op op, zcollDataType_t dt, int bits, size_t bytes) {
  if (!cuda::cudaDeviceAvailable()) {
    state.SkipWithError("no CUDA device available");
    return;
  }
  QuantParams p = benchParams(bits);
  size_t n = bytes / dtypeSize(dt), qb = quantizedBytes(n, p);
  DevBuf data(bytes), q(qb * kChunks), out(qb);
  HostBuf host = hostAlloc(bytes);
  fillData(host.get(), n, dt);
  cudaMemcpy(data.p, host.get(), bytes, cudaMemcpyHostToDevice);
  const void* chunks[kChunks];
  for (int c = 0; c < kChunks; ++c) {
    chunks[c] = static_cast<uint8_t*>(q.p) + c * qb;
    cuda::quantize(data.p, dt, n, p, const_cast<void*>(chunks[c]), nullptr);
  }
  size_t traffic = op == Op::kRequant ? (kChunks + 1) * qb
                   : op == Op::kSum   ? kChunks * qb + bytes
                                      : qb + bytes;
  timeOnStream(state, nullptr, [&] {
    switch (op) {
      case Op::kQuantize: return cuda::quantize(data.p, dt, n, p, q.p, nullptr);
      case Op::kDequantize: return cuda::dequantize(q.p, n, p, data.p, dt, nullptr);
      case Op::kSum:
        return cuda::dequantizeSum(chunks, kChunks, n, p, 1.0f / kChunks, data.p, dt, nullptr);
      case Op::kRequant: return cuda::dequantReduceRequant(chunks, kChunks, n, p, p, out.p, nullptr);
    }
    return zcollInternalError;
  }, traffic);
}
#endif

void registerAll() {
  const Op ops[] = {Op::kQuantize, Op::kDequantize, Op::kSum, Op::kRequant};
  const zcollDataType_t dts[] = {zcollFloat32, zcollFloat16, zcollBfloat16};
  for (size_t bytes : kSizes) {
    std::string size = std::to_string(bytes);
    benchmark::RegisterBenchmark(("memcpy/" + size).c_str(), BM_memcpy, bytes);
    for (Op op : ops) {
      for (zcollDataType_t dt : dts) {
        for (int bits : {8, 4}) {
          std::string name = std::string(opName(op)) + "/" + dtName(dt) + "/int" +
                             std::to_string(bits) + "/" + size;
          benchmark::RegisterBenchmark(name.c_str(), BM_cpu, op, dt, bits, bytes);
        }
      }
    }
  }
#if ZCOLL_HAVE_CUDA
  for (size_t bytes : kSizes) {
    std::string size = std::to_string(bytes);
    benchmark::RegisterBenchmark(("gpu/memcpy/" + size).c_str(), BM_gpuMemcpy, bytes)
        ->UseManualTime();
    for (Op op : ops) {
      for (zcollDataType_t dt : dts) {
        for (int bits : {8, 4}) {
          std::string name = std::string("gpu/") + opName(op) + "/" + dtName(dt) + "/int" +
                             std::to_string(bits) + "/" + size;
          benchmark::RegisterBenchmark(name.c_str(), BM_gpu, op, dt, bits, bytes)
              ->UseManualTime();
        }
      }
    }
  }
#endif
}

}  // namespace
}  // namespace quant
}  // namespace zcoll

int main(int argc, char** argv) {
  zcoll::quant::registerAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
