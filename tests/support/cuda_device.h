// Why the CUDA device tests cannot run here, in the runtime's own words ("" when a device is
// there): the reason every GPU-only test gives GTEST_SKIP. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace zcoll::test {

inline std::string noCudaDeviceReason() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no CUDA device: cudaGetDeviceCount returned ") + cudaGetErrorName(err) +
           " (" + cudaGetErrorString(err) + ")";
  }
  if (count == 0) return "no CUDA device: cudaGetDeviceCount found 0 devices";
  return "";
}

}  // namespace zcoll::test
