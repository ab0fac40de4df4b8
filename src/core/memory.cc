#include "core/memory.h"

#include <atomic>

#ifdef ZCOLL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda/cuda_ipc.h"
#include "cuda/executor_cuda.h"
#include "cuda/quant_cuda.h"
#endif

namespace zcoll {

namespace {

#ifdef ZCOLL_HAVE_CUDA
bool anyCudaDevice() {
  static const bool present = quant::cuda::cudaDeviceAvailable();  // asked once: it costs a call
  return present;
}

bool cudaOwns(const void* ptr) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

Result cudaExecutorOn(zcollStream_t stream, std::unique_ptr<Executor>* out) {
  return makeCudaExecutor(reinterpret_cast<cudaStream_t>(stream), out);
}

Result cudaDescribeDevice(DeviceIdentity* out) { return describeCudaDevice(out); }

Result cudaMakeIpc(std::unique_ptr<DeviceIpc>* out) { return makeCudaIpc(out); }

const DeviceComponent kCuda{"cuda", cudaOwns, cudaExecutorOn, cudaDescribeDevice, cudaMakeIpc};
#endif

const DeviceComponent* builtIn() {
#ifdef ZCOLL_HAVE_CUDA
  if (anyCudaDevice()) return &kCuda;
#endif
  return nullptr;
}

std::atomic<const DeviceComponent*> gReplaced{nullptr};

}  // namespace

const DeviceComponent* deviceComponent() {
  const DeviceComponent* c = gReplaced.load(std::memory_order_acquire);
  return c != nullptr ? c : builtIn();
}

void setDeviceComponent(const DeviceComponent* c) {
  gReplaced.store(c, std::memory_order_release);
}

MemKind memoryKind(const void* ptr) {
  if (ptr == nullptr) return MemKind::kHost;
  const DeviceComponent* c = deviceComponent();
  return c != nullptr && c->owns(ptr) ? MemKind::kDevice : MemKind::kHost;
}

}  // namespace zcoll
