// CUDA's device component (exec/device_component.h): recognises CUDA device memory, makes the
// CUDA executor for a call's stream, describes the current device for the topology exchange and
// shares device memory through CUDA IPC. This file defines builtinDeviceComponent() for a build
// with CUDA, so the library's lower layers reach CUDA through the link, never an include.
#include <cuda_runtime_api.h>

#include "cuda/cuda_ipc.h"
#include "cuda/executor_cuda.h"
#include "cuda/quant_cuda.h"
#include "exec/device_component.h"

namespace zcoll {

namespace {

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

}  // namespace

const DeviceComponent* builtinDeviceComponent() { return anyCudaDevice() ? &kCuda : nullptr; }

}  // namespace zcoll
