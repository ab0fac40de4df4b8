// CUDA quantization kernels: the operations of src/quant/quant.h on device pointers, producing
// the same bytes (the wire format of docs/WIRE_FORMAT.md) as the CPU kernels for the same input.
// Internal API, used by the collectives.
//
// Contracts for every call:
//  - Data pointers are device pointers; arrays of chunk pointers and destOrder are host memory
//    (read before the call returns). Quantized buffers (outputs and inputs) must be 16-byte
//    aligned; unquantized buffers need only element alignment (16 bytes gives vector access).
//  - Work is enqueued on `stream` and the call returns without synchronizing. Buffers must stay
//    valid until the stream reaches the work. Nothing is allocated, except by dequantizeSum and
//    dequantReduceRequant with more than kParamChunks chunks: a device array of the chunk
//    pointers, allocated and freed in stream order (cudaMallocAsync / cudaFreeAsync on `stream`).
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

// Chunk pointers a dequantizeSum / dequantReduceRequant launch carries in its kernel parameters.
// Beyond, any k: the pointers go to the kernel through a device array (see above), written on
// the stream by kernels whose parameters carry them (so the host array need not outlive the call).
constexpr int kParamChunks = 64;
constexpr int kMaxReorderChunks = 256;  // quantizeChunks launches in batches of this many

// True when cudaGetDeviceCount succeeds with at least one device; never aborts (a machine
// without a GPU or driver reports false; the launchers then fail with zcollCudaError).
bool cudaDeviceAvailable();

// Testing: caps the CUDA blocks of every launch of these kernels (0 restores the default,
// 65535), so that each warp (each thread of the dequantizing kernels) loops over many
// quantization blocks (groups), the grid-stride path of large tensors. Process-wide; takes
// effect at the next launch.
void setMaxGridForTesting(int blocks);

Result quantize(const void* in, zcollDataType_t dtype, size_t n, const QuantParams& p, void* out,
                cudaStream_t stream);

Result quantizeChunks(const void* in, zcollDataType_t dtype, size_t chunkElems, size_t nChunks,
                      const int* destOrder, const QuantParams& p, void* out, cudaStream_t stream);

Result dequantize(const void* q, size_t n, const QuantParams& p, void* out, zcollDataType_t dtype,
                  cudaStream_t stream);

// Any k >= 1; the sum is accumulated in fp32 in chunk order 0..k-1, then scaled (as the CPU).
Result dequantizeSum(const void* const* chunks, int k, size_t n, const QuantParams& p, float scale,
                     void* out, zcollDataType_t dtype, cudaStream_t stream);

// Any k >= 1 (as dequantizeSum).
Result dequantReduceRequant(const void* const* chunks, int k, size_t n, const QuantParams& inParams,
                            const QuantParams& outParams, void* outQ, cudaStream_t stream);

}  // namespace cuda
}  // namespace quant
}  // namespace zcoll
