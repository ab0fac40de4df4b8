// Device buffers for the perf binaries (see device.h). The CUDA runtime is linked statically
// (CUDA::cudart_static, as the library does): it loads the driver library at run time, so these
// binaries start, and fail --device 1 with a message, on machines without a GPU or driver.
#include "common/device.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifdef ZCOLL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "common/cuda_device_name.h"
#endif

namespace zcoll {
namespace perf {
namespace {

int gRank = -1;

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  return *end == '\0' && x >= 0 && x < (1 << 20) ? int(x) : fallback;
}

#ifdef ZCOLL_HAVE_CUDA
void cudaCheck(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "rank %d: %s failed: CUDA error %s: %s\n", gRank, what, cudaGetErrorName(e),
               cudaGetErrorString(e));
  std::fflush(stdout);
  std::exit(1);
}
#else
[[noreturn]] void noCuda(const char* what) {
  std::fprintf(stderr, "rank %d: %s: this build has no CUDA support\n", gRank, what);
  std::exit(1);
}
#endif

}  // namespace

bool deviceBuild() {
#ifdef ZCOLL_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int localRankFromEnv() {
  const char* const names[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                               "SLURM_LOCALID"};
  for (const char* n : names) {
    int v = envInt(n, -1);
    if (v >= 0) return v;
  }
  return 0;
}

void setDeviceRank(int rank) { gRank = rank; }

#ifdef ZCOLL_HAVE_CUDA

std::string selectDevice(int* device) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count <= 0) {
    std::string why = e != cudaSuccess ? std::string(cudaGetErrorName(e)) + ": " +
                                             cudaGetErrorString(e)
                                       : "cudaGetDeviceCount gives 0";
    return "no CUDA device (" + why + ")";
  }
  *device = localRankFromEnv() % count;
  e = cudaSetDevice(*device);
  if (e != cudaSuccess)
    return "no CUDA device (cudaSetDevice(" + std::to_string(*device) + "): " +
           cudaGetErrorString(e) + ")";
  int supported = 0;
  if (zcollGetDeviceSupport(&supported) != zcollSuccess || !supported)
    return "zcoll has no device support in this process (see zcoll_info)";
  return "";
}

std::string describeDevice(int device) { return cudaDeviceName(device); }

zcollStream_t createStream() {
  cudaStream_t s = nullptr;
  cudaCheck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  return s;  // cudaStream_t and zcollStream_t are both CUstream_st*
}

void destroyStream(zcollStream_t stream) {
  if (stream) cudaCheck(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

void synchronize(zcollStream_t stream, const char* what) {
  cudaCheck(cudaStreamSynchronize(stream), what);
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) (void)cudaFree(ptr_);
}

unsigned char* DeviceBuffer::ensure(size_t bytes) {
  bytes = bytes ? (bytes + 255) / 256 * 256 : 256;
  if (bytes <= bytes_) return ptr_;
  if (ptr_) cudaCheck(cudaFree(ptr_), "cudaFree");
  ptr_ = nullptr;
  bytes_ = 0;
  void* p = nullptr;
  char what[64];
  std::snprintf(what, sizeof(what), "cudaMalloc(%zu)", bytes);
  cudaCheck(cudaMalloc(&p, bytes), what);
  ptr_ = static_cast<unsigned char*>(p);
  bytes_ = bytes;
  return ptr_;
}

void copyToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes)
    cudaCheck(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (to device)");
}

void copyToHost(void* dst, const void* src, size_t bytes) {
  if (bytes) cudaCheck(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (to host)");
}

#else  // no CUDA in this build

std::string selectDevice(int*) {
  return "this build has no CUDA support (zcoll configured without CUDA: ZCOLL_WITH_CUDA)";
}
std::string describeDevice(int) { return ""; }
zcollStream_t createStream() { noCuda("cudaStreamCreate"); }
void destroyStream(zcollStream_t) {}
void synchronize(zcollStream_t, const char* what) { noCuda(what); }
DeviceBuffer::~DeviceBuffer() {}
unsigned char* DeviceBuffer::ensure(size_t) { noCuda("cudaMalloc"); }
void copyToDevice(void*, const void*, size_t) { noCuda("cudaMemcpy"); }
void copyToHost(void*, const void*, size_t) { noCuda("cudaMemcpy"); }

#endif

}  // namespace perf
}  // namespace zcoll
