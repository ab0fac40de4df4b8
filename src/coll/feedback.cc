#include "coll/feedback.h"

namespace zcoll {

namespace {

// outQ = Q(tmp); residual = tmp - D(outQ) (dequantized times -1, then tmp added).
Result quantizeKeepingResidual(Executor& exec, size_t n, const quant::QuantParams& p,
                               float* residual, const float* tmp, void* outQ) {
  ZCOLL_CHECK(exec.quantize(tmp, zcollFloat32, n, p, outQ));
  const void* codes[] = {outQ};
  ZCOLL_CHECK(exec.dequantizeSum(codes, 1, n, p, -1.0f, residual, zcollFloat32));
  return exec.accumulate(residual, tmp, true, zcollFloat32, zcollSum, n);
}

}  // namespace

Result quantizeWithFeedback(Executor& exec, const void* in, zcollDataType_t dtype, size_t n,
                            const quant::QuantParams& p, float* residual, float* tmp,
                            void* outQ) {
  ZCOLL_CHECK(exec.toAcc(tmp, in, dtype, n));  // fp32 for every quantizable type
  ZCOLL_CHECK(exec.accumulate(tmp, residual, true, zcollFloat32, zcollSum, n));
  return quantizeKeepingResidual(exec, n, p, residual, tmp, outQ);
}

Result requantWithFeedback(Executor& exec, const void* const* chunks, int k, size_t n,
                           const quant::QuantParams& inParams,
                           const quant::QuantParams& outParams, float* residual, float* tmp,
                           void* outQ) {
  ZCOLL_CHECK(exec.dequantizeSum(chunks, k, n, inParams, 1.0f, tmp, zcollFloat32));
  ZCOLL_CHECK(exec.accumulate(tmp, residual, true, zcollFloat32, zcollSum, n));
  return quantizeKeepingResidual(exec, n, outParams, residual, tmp, outQ);
}

}  // namespace zcoll
