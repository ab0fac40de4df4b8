// CUDA quantization kernels: the operations of src/quant/quant.h on device pointers, producing
// the same bytes (wire format v1, docs/WIRE_FORMAT.md) as the CPU kernels for the same input.
// Internal API, used by the collectives.
//
// Contracts for every call:
//  - Data pointers are device pointers; arrays of chunk pointers and destOrder are host memory
//    (read before the call returns). Quantized buffers (outputs and inputs) must be 16-byte
//    aligned; unquantized buffers need only element alignment (16 bytes gives vector access).
//  - Work is enqueued on `stream` and the call returns without synchronizing. Buffers must stay
//    valid until the stream reaches the work. Nothing is allocated.
//  - Bad arguments or an unsupported configuration return zcollInvalidArgument before anything
//    is launched; a failed launch returns zcollCudaError with the CUDA error text
//    (threadLastError()). Never silently does nothing.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "quant/quant.h"

namespace zcoll {
namespace quant {
namespace cuda {

// Limits of one call (kernel-parameter space): chunks summed / reordered per launch.
constexpr int kMaxSumChunks = 64;
constexpr int kMaxReorderChunks = 256;  // quantizeChunks launches in batches of this many

// True when cudaGetDeviceCount succeeds with at least one device; never aborts (a machine
// without a GPU or driver reports false; the launchers then fail with zcollCudaError).
bool cudaDeviceAvailable();

Result quantize(const void* in, zcollDataType_t dtype, size_t n, const QuantParams& p, void* out,
                cudaStream_t stream);

Result quantizeChunks(const void* in, zcollDataType_t dtype, size_t chunkElems, size_t nChunks,
                      const int* destOrder, const QuantParams& p, void* out, cudaStream_t stream);

Result dequantize(const void* q, size_t n, const QuantParams& p, void* out, zcollDataType_t dtype,
                  cudaStream_t stream);

// k <= kMaxSumChunks.
Result dequantizeSum(const void* const* chunks, int k, size_t n, const QuantParams& p, float scale,
                     void* out, zcollDataType_t dtype, cudaStream_t stream);

// k <= kMaxSumChunks.
Result dequantReduceRequant(const void* const* chunks, int k, size_t n, const QuantParams& inParams,
                            const QuantParams& outParams, void* outQ, cudaStream_t stream);

}  // namespace cuda
}  // namespace quant
}  // namespace zcoll
