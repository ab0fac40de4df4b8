// CUDA reduction kernels: the operations of src/exec/reduce_kernels.h on device pointers,
// enqueued on a stream, with the same element rules (src/exec/reduce_math.h), so the same bits.
// Arguments are validated by the callers (the collectives' entry points); a failed launch
// returns zcollCudaError with the CUDA error text.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "base/result.h"
#include "zcoll/zcoll.h"

namespace zcoll {
namespace cuda {

Result toAcc(void* acc, const void* in, zcollDataType_t dtype, size_t n, cudaStream_t stream);
Result accumulate(void* acc, const void* in, bool inIsAcc, zcollDataType_t dtype, zcollRedOp_t op,
                  size_t n, cudaStream_t stream);
Result combine(void* out, const void* a, const void* b, zcollDataType_t dtype, zcollRedOp_t op,
               int avgDivisor, size_t n, cudaStream_t stream);
Result fromAcc(void* out, const void* acc, zcollDataType_t dtype, zcollRedOp_t op, int nranks,
               size_t n, cudaStream_t stream);
// out[i] = in[i] * scalar (reduce_math.h scaleElement; out may be in): `scalar` one element of
// dtype, read now from host memory, or with scalarOnDevice read from device memory by the kernel.
Result scale(void* out, const void* in, zcollDataType_t dtype, size_t n, const void* scalar,
             bool scalarOnDevice, cudaStream_t stream);

}  // namespace cuda
}  // namespace zcoll
