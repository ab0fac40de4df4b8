// Error feedback for a quantization step (docs/ZEROPP.md "Quantized all-reduce"): the value
// quantized is the input plus the residual the step kept last time, and the step keeps the new
// residual, value - dequant(codes), in fp32. Built from the executor's data operations, so it
// runs on whatever memory the call's executor works on.
#pragma once

#include <cstddef>

#include "exec/executor.h"
#include "quant/quant.h"

namespace zcoll {

// v = in + residual (fp32, into tmp); outQ = Q(v) with p; residual = v - D(outQ).
// in: n elements of dtype; residual, tmp: n fp32 each; outQ: quantizedBytes(n, p).
Result quantizeWithFeedback(Executor& exec, const void* in, zcollDataType_t dtype, size_t n,
                            const quant::QuantParams& p, float* residual, float* tmp, void* outQ);

// v = sum over k of D(chunks[k]) with inParams, plus residual; outQ = Q(v) with outParams;
// residual = v - D(outQ). The requantization of qgZ's two hops, with feedback.
Result requantWithFeedback(Executor& exec, const void* const* chunks, int k, size_t n,
                           const quant::QuantParams& inParams,
                           const quant::QuantParams& outParams, float* residual, float* tmp,
                           void* outQ);

}  // namespace zcoll
