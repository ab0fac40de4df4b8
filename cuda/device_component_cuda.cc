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

bool cudaOwns(const void* ptr, int* device) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  *device = attr.device;
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

Result cudaExecutorOn(zcollStream_t stream, int device, std::unique_ptr<Executor>* out) {
  return makeCudaExecutor(reinterpret_cast<cudaStream_t>(stream), device, out);
}

Result cudaDescribeDevice(DeviceIdentity* out) { return describeCudaDevice(out); }

Result cudaMakeIpc(std::unique_ptr<DeviceIpc>* out) { return makeCudaIpc(out); }

// cudaPointerGetAttributes is asked only once cudaInUse() (cuda/cuda_ipc.h): on a host pointer
// in a process that never touched CUDA it would create a context on device 0.
const DeviceComponent kCuda{"cuda",         cudaInUse,          cudaOwns,
                            cudaExecutorOn, cudaDescribeDevice, cudaMakeIpc,
                            allocCudaWaitWords, freeCudaWaitWords,
                            /*queuedCallsTrusted=*/false,
                            registerCudaHostMemory, unregisterCudaHostMemory};

}  // namespace

const DeviceComponent* builtinDeviceComponent() { return anyCudaDevice() ? &kCuda : nullptr; }

}  // namespace zcoll
