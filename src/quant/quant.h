// Block quantization engine (internal API used by the qwZ / hpZ / qgZ collectives).
//
// A chunk of n elements is cut into blocks of blockSize elements (the last may be short); each
// block is quantized to INT8 or INT4 with its own fp32 scale (and minimum when asymmetric), or,
// with bits 16 (qgZ's intra-node hop at intraBits 16), every element is carried as a 16-bit float
// (`wire16`: bf16 or fp16, round to nearest even; no scales) and the blocks only decide where a
// non-finite value turns the output NaN. The
// quantized bytes follow the wire format of docs/WIRE_FORMAT.md (version 3): header-free, fixed
// by (n, blockSize, bits, symmetric), identical on every CPU ISA variant and on the GPU
// (cuda/quant_cuda.h mirrors these calls on device pointers).
//
// Contracts for every call below:
//  - Inputs and outputs of unquantized data: zcollFloat32, zcollFloat16, zcollBfloat16.
//    Arithmetic is fp32.
//  - The caller owns and sizes every buffer (size queries below); nothing allocates. Input and
//    output buffers must not overlap. No alignment is required on the CPU (16 bytes is best).
//  - Single-threaded, re-entrant; runs on the calling thread.
//  - On a bad argument the call returns zcollInvalidArgument (message via threadLastError())
//    before touching any output.
//  - Non-finite input (NaN/Inf) in a block: the whole block dequantizes to NaN.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/result.h"
#include "zcoll/zcoll.h"

namespace zcoll {
namespace quant {

struct QuantParams {
  int bits = 8;            // 4 or 8: block-quantized codes; 16: 16-bit floats (wire16)
  int blockSize = 256;     // elements per block: a multiple of 32 in [32, 4096]
  bool symmetric = true;   // false: per-block minimum + 2^bits - 1 levels
  bool stochastic = false; // stochastic rounding (unbiased), else round to nearest even
  uint64_t seed = 0;       // stochastic rounding: same seed + same input -> same bytes
  // Global index of this call's first element for the stochastic-rounding hash: give different
  // chunks / ranks / steps disjoint index ranges (or different seeds) so that they do not reuse
  // random numbers. quantizeChunks numbers chunk c's elements from elementOffset + c*chunkElems.
  uint64_t elementOffset = 0;
  // bits 16: the 16-bit float every element travels as, zcollBfloat16 or zcollFloat16 (the
  // conversion rounds to nearest even; `symmetric`, `stochastic` and `seed` do not apply).
  zcollDataType_t wire16 = zcollBfloat16;
};

// zcollInvalidArgument with a message naming the bad field.
Result validate(const QuantParams& p);
// zcollInvalidArgument when a requantization's output params have bits 16 (it writes codes).
Result checkBlockOutput(const QuantParams& outParams, const char* what);
// Whether elements of `dtype` can be quantized (float32, float16, bfloat16), and the one
// refusal every caller gives (the CPU and CUDA kernels, the ZeRO++ entry points): "`what`:
// datatype int32 (2) cannot be quantized: use zcollFloat32, zcollFloat16 or zcollBfloat16".
bool quantizable(zcollDataType_t dtype);
Result checkQuantizable(zcollDataType_t dtype, const char* what);
// zcollInvalidArgument unless the dequantizeSum scale is finite.
Result validateSumScale(float scale, const char* what);

// ---- Size queries (bytes) --------------------------------------------------------------------
// One quantized chunk of n elements; always a multiple of 16 (0 for n = 0).
size_t quantizedBytes(size_t n, const QuantParams& p);
// quantizeChunks output: nChunks slots of quantizedBytes(chunkElems) each.
size_t quantizedChunksBytes(size_t chunkElems, size_t nChunks, const QuantParams& p);
// Unquantized output of dequantize / dequantizeSum: n * element size (0 for a bad dtype).
size_t dequantizedBytes(size_t n, zcollDataType_t dtype);
// dequantReduceRequant output: quantizedBytes(n, outParams).
size_t requantizedBytes(size_t n, const QuantParams& outParams);

// ---- Operations --------------------------------------------------------------------------------
// in[n] (dtype) -> out[quantizedBytes(n, p)].
Result quantize(const void* in, zcollDataType_t dtype, size_t n, const QuantParams& p, void* out);

// The qgZ fused quantize + reorder: in holds nChunks chunks of chunkElems elements; chunk i is
// quantized as its own layout into slot destOrder[i] of out (slot s starts at
// s * quantizedBytes(chunkElems)). destOrder == nullptr means identity; otherwise each entry must
// lie in [0, nChunks) and form a permutation (not checked beyond the range).
Result quantizeChunks(const void* in, zcollDataType_t dtype, size_t chunkElems, size_t nChunks,
                      const int* destOrder, const QuantParams& p, void* out);

// q (n elements quantized with p) -> out[n] (dtype).
Result dequantize(const void* q, size_t n, const QuantParams& p, void* out, zcollDataType_t dtype);

// out[i] = (sum over c = 0..k-1, in this order, of dequantize(chunks[c])[i]) * scale, in fp32,
// written in dtype. All k chunks hold n elements quantized with p. A block that is non-finite in
// any chunk gives NaN.
Result dequantizeSum(const void* const* chunks, int k, size_t n, const QuantParams& p, float scale,
                     void* out, zcollDataType_t dtype);

// outQ = quantize(sum over c of dequantize(chunks[c]), outParams): the qgZ middle hop. Input and
// output bits, block sizes and modes are independent (input bits 16 included; output bits 4 or
// 8 only); the sum is fp32 in chunk order.
Result dequantReduceRequant(const void* const* chunks, int k, size_t n, const QuantParams& inParams,
                            const QuantParams& outParams, void* outQ);

}  // namespace quant
}  // namespace zcoll
