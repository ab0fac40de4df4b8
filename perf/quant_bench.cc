// Quantization kernels vs memcpy (Google Benchmark). Every operation x dtype x bits at 64 KiB,
// 1 MiB, 16 MiB and 256 MiB of unquantized data; bytes_per_second counts bytes read + bytes
// written (memcpy: 2 x size). Names: <op>/<dtype>/<bits>/<size> with op in memcpy, quantize,
// dequantize, dequant_sum, dequant_reduce_requant; GPU variants are prefixed gpu/ (device-to-
// device copy baseline: gpu/memcpy/<size>) and report an error when no device is present.
//
// CPU benchmarks also report vs_memcpy, the ratio to a memcpy of the same size timed between
// their own iterations (see CopyReference); GPU benchmarks the same against a device-to-device
// copy. bound/<op>/... (dequant_sum, dequant_reduce_requant): a bare loop with the operation's
// least traffic on the same working set (BM_bound), the memory-side limit of its vs_memcpy.
//
// Settings: blockSize 256, symmetric, round to nearest even, k = 4 chunks for the sums. For
// dequant_reduce_requant the dtype only sets the element count (size / element size); its input
// and output are quantized (same bits in and out).
//
//   build-quant/perf/quant_bench --benchmark_filter='16777216' --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "base/dtype.h"
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

QuantOp quantOpOf(Op op) {
  switch (op) {
    case Op::kQuantize: return QuantOp::kQuantize;
    case Op::kDequantize: return QuantOp::kDequantize;
    case Op::kSum: return QuantOp::kSum;
    case Op::kRequant: return QuantOp::kRequantize;
  }
  return QuantOp::kQuantize;
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

// Alongside bytes_per_second, every CPU benchmark reports vs_memcpy: its best-iteration
// bandwidth over that of a memcpy of the same input size timed between its iterations (paused,
// not counted). Interleaving makes the ratio robust on a shared, noisy machine, where a memcpy
// benchmark run seconds earlier or later sees a different load.
class CopyReference {
 public:
  explicit CopyReference(size_t bytes)
      : bytes_(bytes), src_(hostAlloc(bytes)), dst_(hostAlloc(bytes)) {
    std::memset(src_.get(), 1, bytes);
  }
  void timeOnce() {
    auto t0 = Clock::now();
    std::memcpy(dst_.get(), src_.get(), bytes_);
    benchmark::ClobberMemory();
    best_ = std::min(best_, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  double bandwidth() const { return 2.0 * static_cast<double>(bytes_) / best_; }

 private:
  using Clock = std::chrono::steady_clock;
  size_t bytes_;
  HostBuf src_, dst_;
  double best_ = 1e30;
};

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
  size_t traffic = op == Op::kQuantize ? bytes + qb
                   : op == Op::kDequantize ? qb + bytes
                   : op == Op::kSum ? kChunks * qb + bytes
                                    : kChunks * qb + qb;
  auto run = [&]() -> Result {
    switch (op) {
      case Op::kQuantize: return quantize(data.get(), dt, n, p, q.get());
      case Op::kDequantize: return dequantize(q.get(), n, p, data.get(), dt);
      case Op::kSum: return dequantizeSum(chunks, kChunks, n, p, 1.0f / kChunks, data.get(), dt);
      case Op::kRequant: return dequantReduceRequant(chunks, kChunks, n, p, p, out.get());
    }
    return zcollInternalError;
  };
  CopyReference copy(bytes);
  double best = 1e30;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    Result r = run();
    benchmark::ClobberMemory();
    std::chrono::duration<double> t = std::chrono::steady_clock::now() - t0;
    best = std::min(best, t.count());
    if (r != zcollSuccess) {
      state.SkipWithError("operation failed");
      break;
    }
    state.PauseTiming();
    copy.timeOnce();
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * traffic));
  state.counters["vs_memcpy"] = static_cast<double>(traffic) / best / copy.bandwidth();
  state.SetLabel(isaName(activeIsa(quantOpOf(op))));
}

// The memory side of dequant_sum and dequant_reduce_requant on their own working set: a bare
// loop that reads the k quantized chunks once and writes the output once (the least traffic
// either operation can have), here an XOR of the chunks (requant: into a quantized-size output;
// sum: repeated to the unquantized output size), timed and reported as BM_cpu does (vs_memcpy
// with the same traffic). Names: bound/<op>/<dtype>/<bits>/<size>; the ratio an operation
// reaches over its bound's is the fraction of the memory-side limit it gets.
#if defined(__x86_64__)
#define ZCOLL_BOUND_TARGET __attribute__((target("avx2")))  // wide loads and stores in the loop
#else
#define ZCOLL_BOUND_TARGET
#endif
ZCOLL_BOUND_TARGET void BM_bound(benchmark::State& state, Op op, zcollDataType_t dt, int bits, size_t bytes) {
  QuantParams p = benchParams(bits);
  size_t n = bytes / dtypeSize(dt), qb = quantizedBytes(n, p);
  size_t outBytes = op == Op::kSum ? bytes : qb;
  HostBuf q = hostAlloc(qb * kChunks), out = hostAlloc(outBytes);
  std::memset(q.get(), 3, qb * kChunks);
  size_t words = qb / 8, outWords = outBytes / 8;
  auto run = [&] {
    const uint64_t* c = reinterpret_cast<const uint64_t*>(q.get());
    uint64_t* o = reinterpret_cast<uint64_t*>(out.get());
    size_t stride = qb / 8;  // chunk c at c * qb (qb is a multiple of 16)
    // Every input word read once; every output word written once: words / outWords inputs per
    // output word (requantize: 1) or outWords / words outputs per input word (sum: 4-8).
    if (outWords <= words) {
      for (size_t i = 0; i < outWords; ++i) {
        o[i] = c[i] ^ c[stride + i] ^ c[2 * stride + i] ^ c[3 * stride + i];
      }
    } else {
      uint64_t sink = 0;
      size_t m = 0, r = 0;
      auto expand = [&](auto rc) {  // rc outputs per input word: the values part
        constexpr size_t R = decltype(rc)::value;
        m = std::min(words, outWords / R);
        r = R;
        for (size_t i = 0; i < m; ++i) {
          uint64_t x = c[i] ^ c[stride + i] ^ c[2 * stride + i] ^ c[3 * stride + i];
          for (size_t j = 0; j < R; ++j) o[i * R + j] = x + j;
        }
      };
      if (outWords >= 6 * words) {  // fp32: 8 outputs per 8 bytes of INT4, 16-bit: 4
        expand(std::integral_constant<size_t, 8>());
      } else {
        expand(std::integral_constant<size_t, 4>());
      }
      for (size_t i = m; i < words; ++i) {  // the rest of the input (block scales)
        sink ^= c[i] ^ c[stride + i] ^ c[2 * stride + i] ^ c[3 * stride + i];
      }
      for (size_t i = m * r; i < outWords; ++i) o[i] = sink;
    }
  };
  static_assert(kChunks == 4, "the bound loop reads 4 chunks");
  size_t traffic = kChunks * qb + outBytes;
  CopyReference copy(bytes);
  double best = 1e30;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    run();
    benchmark::ClobberMemory();
    std::chrono::duration<double> t = std::chrono::steady_clock::now() - t0;
    best = std::min(best, t.count());
    state.PauseTiming();
    copy.timeOnce();
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * traffic));
  state.counters["vs_memcpy"] = static_cast<double>(traffic) / best / copy.bandwidth();
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

// Event time of `body` on stream s, in seconds.
template <class F>
double eventTime(cudaStream_t s, cudaEvent_t a, cudaEvent_t b, F&& body, bool* ok) {
  cudaEventRecord(a, s);
  *ok = body() == zcollSuccess;
  cudaEventRecord(b, s);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  return ms / 1e3;
}

// Times `body` with CUDA events (manual time), per iteration. With refBytes > 0 it also times a
// device-to-device copy of refBytes between iterations and reports vs_memcpy, the ratio of the
// best-iteration bandwidths (as the CPU benchmarks do).
template <class F>
void timeOnStream(benchmark::State& state, cudaStream_t s, F&& body, size_t traffic,
                  size_t refBytes = 0) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  DevBuf refSrc(refBytes), refDst(refBytes);
  auto copy = [&] {
    return cudaMemcpyAsync(refDst.p, refSrc.p, refBytes, cudaMemcpyDeviceToDevice, s) == cudaSuccess
               ? zcollSuccess : zcollCudaError;
  };
  body();  // warm-up
  double best = 1e30, bestCopy = 1e30;
  bool ok = true;
  for (auto _ : state) {
    double t = eventTime(s, a, b, body, &ok);
    if (!ok) {
      state.SkipWithError("GPU operation failed");
      break;
    }
    state.SetIterationTime(t);
    best = std::min(best, t);
    if (refBytes > 0) bestCopy = std::min(bestCopy, eventTime(s, a, b, copy, &ok));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * traffic));
  if (refBytes > 0 && ok) {
    state.counters["vs_memcpy"] = (static_cast<double>(traffic) / best) /
                                  (2.0 * static_cast<double>(refBytes) / bestCopy);
  }
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
  }, traffic, bytes);
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
#if defined(__x86_64__)
    const bool boundRuns = __builtin_cpu_supports("avx2");  // BM_bound is compiled for AVX2
#else
    const bool boundRuns = true;
#endif
    for (Op op : {Op::kSum, Op::kRequant}) {
      if (!boundRuns) break;
      for (zcollDataType_t dt : dts) {
        for (int bits : {8, 4}) {
          std::string name = std::string("bound/") + opName(op) + "/" + dtName(dt) + "/int" +
                             std::to_string(bits) + "/" + size;
          benchmark::RegisterBenchmark(name.c_str(), BM_bound, op, dt, bits, bytes);
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

// The CPU and the variant each operation runs on, in the benchmark's context (printed first), so
// every table says what it measured.
std::string cpuModel() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

void addContext() {
  benchmark::AddCustomContext("cpu_model", cpuModel());
  std::string variants;
  for (QuantOp op : {QuantOp::kQuantize, QuantOp::kDequantize, QuantOp::kSum, QuantOp::kRequantize}) {
    variants += std::string(variants.empty() ? "" : " ") + quantOpName(op) + "=" +
                isaName(activeIsa(op));
  }
  benchmark::AddCustomContext("quant_variants", variants + " (" + isaChoiceReason() + ")");
}

}  // namespace
}  // namespace quant
}  // namespace zcoll

int main(int argc, char** argv) {
  zcoll::quant::registerAll();
  zcoll::quant::addContext();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
