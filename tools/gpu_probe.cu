// Measurements of the GPU itself for the GPU kit (tools/gpu_check.sh), built there with nvcc:
//
//   gpu_probe queue   how many operations a stream takes while it cannot run them before a
//                     submission blocks (the launch queue depth that tests/support/fake_device.h's
//                     FakeHardware::queueDepth stands in for): a kernel spins on a host-mapped
//                     flag, then tiny kernels (and, separately, cudaLaunchHostFunc host functions
//                     and event records) are submitted until one takes more than 5 ms or 100000
//                     went in; with CUDA_DEVICE_MAX_CONNECTIONS=1 in the environment, the same.
//   gpu_probe held    issue 38's question (a): a stream held by cuStreamWaitValue32 on a host word,
//                     then 1..40 new streams, each given a kernel and a copy: which of them
//                     complete while the word is not stored yet (a stream sharing the held
//                     stream's hardware queue cannot). Run it with CUDA_DEVICE_MAX_CONNECTIONS
//                     unset, 8 and 32 (the kit does).
//   gpu_probe blocked issue 38's question (b): with a stream held so, whether cudaMalloc,
//                     cudaFree and a pageable copy return within 2 s on this thread, and whether
//                     another thread's kernel on an unrelated stream completes within 2 s; each
//                     is released by storing the word afterwards, so nothing waits forever.
//   gpu_probe d2d     device-to-device copy bandwidth (cudaMemcpyAsync on one stream, 1 MiB to
//                     1 GiB), the bound the device kernels and the two-ranks-on-one-GPU runs are
//                     compared with (GB/s = 1e9 bytes; read + write counted once, as nccl-tests'
//                     algbw).
//
// Prints one line per measurement; exits 1 with the CUDA error where a call fails, 77 without a
// device.
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

namespace {

#define CHECK(call)                                                                     \
  do {                                                                                  \
    cudaError_t err_ = (call);                                                          \
    if (err_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "gpu_probe: %s failed: %s (%s)\n", #call, cudaGetErrorName(err_), \
                   cudaGetErrorString(err_));                                           \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Spins until *flag is nonzero, or about 20 s of GPU clock (never forever).
__global__ void spin(volatile int* flag, long long limitCycles) {
  long long start = clock64();
  while (*flag == 0 && clock64() - start < limitCycles) {
  }
}
__global__ void tiny(int* sink) {
  if (threadIdx.x == 0 && sink[0] == 12345) sink[1] = 1;
}
void CUDART_CB hostNop(void*) {}

enum class Op { kKernel, kHostFunc, kEvent };
const char* opName(Op op) {
  return op == Op::kKernel ? "kernel launches" : op == Op::kHostFunc ? "host functions" : "event records";
}

void queueDepth(Op op) {
  int* flagHost = nullptr;
  int* flagDev = nullptr;
  int* sink = nullptr;
  CHECK(cudaHostAlloc(&flagHost, sizeof(int), cudaHostAllocMapped));
  *flagHost = 0;
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&flagDev), flagHost, 0));
  CHECK(cudaMalloc(&sink, 2 * sizeof(int)));
  CHECK(cudaMemset(sink, 0, 2 * sizeof(int)));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t ev;
  CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  int clockKhz = 0;
  CHECK(cudaDeviceGetAttribute(&clockKhz, cudaDevAttrClockRate, 0));
  spin<<<1, 1, 0, s>>>(flagDev, static_cast<long long>(clockKhz) * 1000 * 20);
  CHECK(cudaGetLastError());
  const int kMax = 100000;
  int n = 0;
  double slowest = 0, blockedMs = 0;
  for (; n < kMax; ++n) {
    auto t = Clock::now();
    if (op == Op::kKernel) {
      tiny<<<1, 32, 0, s>>>(sink);
      CHECK(cudaGetLastError());
    } else if (op == Op::kHostFunc) {
      CHECK(cudaLaunchHostFunc(s, hostNop, nullptr));
    } else {
      CHECK(cudaEventRecord(ev, s));
    }
    double ms = msSince(t);
    if (ms > slowest) slowest = ms;
    if (ms > 5.0) {
      blockedMs = ms;
      break;
    }
  }
  __atomic_store_n(flagHost, 1, __ATOMIC_SEQ_CST);
  CHECK(cudaStreamSynchronize(s));
  const char* conn = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  if (n < kMax) {
    std::printf("queue %s: submission %d blocked (%.1f ms) behind a waiting kernel: depth %d "
                "(CUDA_DEVICE_MAX_CONNECTIONS=%s)\n",
                opName(op), n + 1, blockedMs, n, conn ? conn : "unset");
  } else {
    std::printf("queue %s: %d submitted without blocking (slowest %.3f ms): depth >= %d "
                "(CUDA_DEVICE_MAX_CONNECTIONS=%s)\n",
                opName(op), kMax, slowest, kMax, conn ? conn : "unset");
  }
  CHECK(cudaEventDestroy(ev));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(sink));
  CHECK(cudaFreeHost(flagHost));
}

// A stream held by a stream memory wait on a host-mapped word, as zcoll's queued calls hold the
// caller's stream (src/README.md "Launching a call"); release() stores the word from the host.
class HeldStream {
 public:
  HeldStream() {
    using WaitValue = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    CHECK(cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000, cudaEnableDefault,
                                           &found));
    if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
      std::fprintf(stderr, "gpu_probe: cuStreamWaitValue32 not found\n");
      std::exit(1);
    }
    CHECK(cudaHostAlloc(&word_, sizeof(*word_), cudaHostAllocMapped | cudaHostAllocPortable));
    *word_ = 0;
    void* dev = nullptr;
    CHECK(cudaHostGetDevicePointer(&dev, word_, 0));
    CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    const CUresult r = reinterpret_cast<WaitValue>(fn)(
        reinterpret_cast<CUstream>(stream_), reinterpret_cast<CUdeviceptr>(dev), 1,
        CU_STREAM_WAIT_VALUE_GEQ);
    if (r != CUDA_SUCCESS) {
      std::fprintf(stderr, "gpu_probe: cuStreamWaitValue32 failed (%d)\n", static_cast<int>(r));
      std::exit(1);
    }
  }
  void release() { __atomic_store_n(word_, 1u, __ATOMIC_SEQ_CST); }
  ~HeldStream() {
    release();
    CHECK(cudaStreamSynchronize(stream_));
    CHECK(cudaStreamDestroy(stream_));
    CHECK(cudaFreeHost(word_));
  }

 private:
  unsigned int* word_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

const char* connections() {
  const char* c = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  return c != nullptr ? c : "unset";
}

// (a): which of `n` new streams' kernel + copy complete while a held stream waits.
void heldStreams(int n) {
  int* sink = nullptr;
  void* a = nullptr;
  void* b = nullptr;
  CHECK(cudaMalloc(&sink, 2 * sizeof(int)));
  CHECK(cudaMemset(sink, 0, 2 * sizeof(int)));
  CHECK(cudaMalloc(&a, 1 << 20));
  CHECK(cudaMalloc(&b, 1 << 20));
  CHECK(cudaDeviceSynchronize());
  std::vector<cudaStream_t> streams(n);
  std::vector<cudaEvent_t> done(n);
  {
    HeldStream held;
    for (int k = 0; k < n; ++k) {
      CHECK(cudaStreamCreateWithFlags(&streams[k], cudaStreamNonBlocking));
      CHECK(cudaEventCreateWithFlags(&done[k], cudaEventDisableTiming));
      tiny<<<1, 32, 0, streams[k]>>>(sink);
      CHECK(cudaGetLastError());
      CHECK(cudaMemcpyAsync(b, a, 1 << 20, cudaMemcpyDeviceToDevice, streams[k]));
      CHECK(cudaEventRecord(done[k], streams[k]));
    }
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    std::vector<bool> finished(n, false);
    int count = 0;
    while (count < n && Clock::now() < deadline) {
      for (int k = 0; k < n; ++k) {
        if (finished[k]) continue;
        const cudaError_t q = cudaEventQuery(done[k]);
        if (q == cudaSuccess) {
          finished[k] = true;
          ++count;
        } else if (q != cudaErrorNotReady) {
          CHECK(q);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::printf("held (CUDA_DEVICE_MAX_CONNECTIONS=%s): %d of %d new streams ran a kernel and a "
                "copy while a stream waited on an unstored word", connections(), count, n);
    if (count < n) {
      std::printf("; blocked behind it:");
      for (int k = 0; k < n; ++k)
        if (!finished[k]) std::printf(" %d", k + 1);
    }
    std::printf("\n");
    std::fflush(stdout);
  }  // the word is stored: everything runs
  CHECK(cudaDeviceSynchronize());
  for (int k = 0; k < n; ++k) {
    CHECK(cudaEventDestroy(done[k]));
    CHECK(cudaStreamDestroy(streams[k]));
  }
  CHECK(cudaFree(sink));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
}

// (b): whether `what` returns within 2 s while a stream is held; the hold is released after.
template <typename Op>
void whileHeld(const char* what, Op op) {
  HeldStream held;
  auto started = Clock::now();
  auto result = std::async(std::launch::async, op);
  const bool returned = result.wait_for(std::chrono::seconds(2)) == std::future_status::ready;
  held.release();
  result.get();
  std::printf("blocked (CUDA_DEVICE_MAX_CONNECTIONS=%s): %s %s (%.1f ms)\n", connections(), what,
              returned ? "returned while the stream was held" : "waited for the held stream",
              msSince(started));
  std::fflush(stdout);
}

void blockedCalls() {
  void* spare = nullptr;
  CHECK(cudaMalloc(&spare, 1 << 20));
  int* sink = nullptr;
  CHECK(cudaMalloc(&sink, 2 * sizeof(int)));
  CHECK(cudaDeviceSynchronize());
  whileHeld("cudaMalloc", [] {
    void* p = nullptr;
    CHECK(cudaMalloc(&p, 1 << 20));
    CHECK(cudaFree(p));  // after the release: measured with the malloc only while held
  });
  whileHeld("cudaFree", [spare] { CHECK(cudaFree(spare)); });
  whileHeld("a pageable cudaMemcpy to the device", [sink] {
    int host[2] = {0, 0};
    CHECK(cudaMemcpy(sink, host, sizeof(host), cudaMemcpyHostToDevice));
  });
  whileHeld("another thread's kernel on an unrelated stream (launched and synchronized)", [sink] {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    tiny<<<1, 32, 0, s>>>(sink);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaStreamDestroy(s));
  });
  CHECK(cudaFree(sink));
}

void d2d() {
  const size_t kMaxBytes = size_t{1} << 30;
  void* a = nullptr;
  void* b = nullptr;
  CHECK(cudaMalloc(&a, kMaxBytes));
  CHECK(cudaMalloc(&b, kMaxBytes));
  CHECK(cudaMemset(a, 1, kMaxBytes));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (size_t bytes = size_t{1} << 20; bytes <= kMaxBytes; bytes *= 4) {
    int iters = bytes <= (size_t{16} << 20) ? 50 : 10;
    CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));  // warm-up
    CHECK(cudaEventRecord(e0, s));
    for (int i = 0; i < iters; ++i) CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
    CHECK(cudaEventRecord(e1, s));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    double us = 1000.0 * ms / iters;
    std::printf("d2d copy %10zu bytes: %9.1f us  %7.1f GB/s\n", bytes, us, bytes / us / 1e3);
  }
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc == 2 ? argv[1] : "";
  if (std::strcmp(mode, "queue") != 0 && std::strcmp(mode, "d2d") != 0 &&
      std::strcmp(mode, "held") != 0 && std::strcmp(mode, "blocked") != 0) {
    std::fprintf(stderr, "usage: gpu_probe queue|held|blocked|d2d\n");
    return 2;
  }
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::printf("SKIP: no CUDA device (%s)\n", err != cudaSuccess ? cudaGetErrorName(err) : "0 devices");
    return 77;
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device 0: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount);
  if (std::strcmp(mode, "queue") == 0) {
    queueDepth(Op::kKernel);
    queueDepth(Op::kHostFunc);
    queueDepth(Op::kEvent);
  } else if (std::strcmp(mode, "held") == 0) {
    for (int n : {1, 2, 4, 8, 16, 24, 32, 40}) heldStreams(n);
  } else if (std::strcmp(mode, "blocked") == 0) {
    blockedCalls();
  } else {
    d2d();
  }
  return 0;
}
