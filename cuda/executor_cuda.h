// The CUDA executor: the data operations of exec/executor.h on device pointers, enqueued on one
// stream (the call's): copies by cudaMemcpyAsync, reductions by cuda/reduce_cuda.cu, block
// quantization by the kernels of cuda/quant_*.cu. Same bytes as the host executor.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "exec/executor.h"

namespace zcoll {

std::unique_ptr<Executor> makeCudaExecutor(cudaStream_t stream);

}  // namespace zcoll
