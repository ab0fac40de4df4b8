// The CUDA executor: the data operations of exec/executor.h on device pointers, enqueued on one
// stream (the call's): copies by cudaMemcpyAsync, reductions by cuda/reduce_cuda.cu, block
// quantization by the kernels of cuda/quant_*.cu. Same bytes as the host executor. A call that
// returns once enqueued runs on a side stream of zcoll's (makeSideExecutor) that starts after
// the caller's stream, while a stream memory wait holds the caller's stream until the call is
// done (api/launch.h).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "exec/executor.h"

namespace zcoll {

// An executor on `stream` (NULL: the default stream) of `device`.
Result makeCudaExecutor(cudaStream_t stream, int device, std::unique_ptr<Executor>* out);
// The words of queued calls' stream memory waits (DeviceComponent::allocWaitWords): cudaHostAlloc,
// mapped and portable, zeroed; freed with cudaFreeHost.
Result allocCudaWaitWords(size_t n, uint32_t** out);
void freeCudaWaitWords(uint32_t* words);
// Host memory the device reaches (DeviceComponent::registerHostMemory): cudaHostRegister, mapped
// and portable; undone with cudaHostUnregister.
Result registerCudaHostMemory(void* p, size_t bytes);
void unregisterCudaHostMemory(void* p);

}  // namespace zcoll
