// Measurements of the GPU itself for the GPU kit (tools/gpu_check.sh), built there with nvcc:
//
//   gpu_probe queue   how many operations a stream takes while it cannot run them before a
//                     submission blocks (the launch queue depth that tests/support/fake_device.h's
//                     FakeHardware::queueDepth stands in for): a kernel spins on a host-mapped
//                     flag, then tiny kernels (and, separately, cudaLaunchHostFunc host functions
//                     and event records) are submitted until one takes more than 5 ms or 100000
//                     went in; with CUDA_DEVICE_MAX_CONNECTIONS=1 in the environment, the same.
//   gpu_probe d2d     device-to-device copy bandwidth (cudaMemcpyAsync on one stream, 1 MiB to
//                     1 GiB), the bound the device kernels and the two-ranks-on-one-GPU runs are
//                     compared with (GB/s = 1e9 bytes; read + write counted once, as nccl-tests'
//                     algbw).
//
// Prints one line per measurement; exits 1 with the CUDA error where a call fails, 77 without a
// device.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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
  if (argc != 2 || (std::strcmp(argv[1], "queue") != 0 && std::strcmp(argv[1], "d2d") != 0)) {
    std::fprintf(stderr, "usage: gpu_probe queue|d2d\n");
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
  if (std::strcmp(argv[1], "queue") == 0) {
    queueDepth(Op::kKernel);
    queueDepth(Op::kHostFunc);
    queueDepth(Op::kEvent);
  } else {
    d2d();
  }
  return 0;
}
