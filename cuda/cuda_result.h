// A CUDA runtime call's error as a zcollResult_t with a message naming the call. A failed call's
// error is also taken off the thread's last-error slot (cudaGetLastError): a non-sticky error
// (an invalid argument, a refused allocation) must not surface again in the next launch check,
// where it would be blamed on a kernel that ran fine. Sticky errors stay (CUDA keeps them).
#pragma once

#include <cuda_runtime_api.h>

#include "base/result.h"

namespace zcoll {

inline Result cudaResult(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return zcollSuccess;
  (void)cudaGetLastError();
  return fail(zcollCudaError, "%s failed: %s (%s)", what, cudaGetErrorName(err),
              cudaGetErrorString(err));
}

}  // namespace zcoll
