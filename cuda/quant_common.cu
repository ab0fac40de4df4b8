// Host-side helpers of the CUDA quantization launchers: device detection, argument checks, and
// launch error checking.
#include "cuda/quant_kernels.cuh"

namespace zcoll {
namespace quant {
namespace cuda {

bool cudaDeviceAvailable() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // "no device" is an answer here (init errors stay sticky)
    return false;
  }
  return count > 0;
}

namespace detail {

Result checkDtype(zcollDataType_t dt, const char* what) {
  if (dt == zcollFloat32 || dt == zcollFloat16 || dt == zcollBfloat16) return zcollSuccess;
  return fail(zcollInvalidArgument,
              "%s (cuda): dtype %d is not supported (float32, float16 or bfloat16 only)", what,
              static_cast<int>(dt));
}

Result checkQuantBuffer(const void* p, size_t n, const char* what, const char* name) {
  if (n == 0) return zcollSuccess;
  if (p == nullptr) return fail(zcollInvalidArgument, "%s (cuda): %s is NULL", what, name);
  if (!aligned16(p)) {
    return fail(zcollInvalidArgument, "%s (cuda): quantized buffer %s must be 16-byte aligned",
                what, name);
  }
  return zcollSuccess;
}

Result checkData(const void* p, size_t n, zcollDataType_t dt, const char* what, const char* name) {
  if (n == 0) return zcollSuccess;
  if (p == nullptr) return fail(zcollInvalidArgument, "%s (cuda): %s is NULL", what, name);
  if (reinterpret_cast<uintptr_t>(p) % dtypeSize(dt) != 0) {
    return fail(zcollInvalidArgument, "%s (cuda): %s is not aligned to its element size", what,
                name);
  }
  return zcollSuccess;
}

Result checkChunks(const void* const* chunks, int k, size_t n, const char* what) {
  if (k < 1 || k > kMaxSumChunks) {
    return fail(zcollInvalidArgument, "%s (cuda): k = %d, must be in [1, %d]", what, k,
                kMaxSumChunks);
  }
  if (n == 0) return zcollSuccess;
  if (chunks == nullptr) return fail(zcollInvalidArgument, "%s (cuda): chunks is NULL", what);
  for (int c = 0; c < k; ++c) ZCOLL_CHECK(checkQuantBuffer(chunks[c], n, what, "chunks[c]"));
  return zcollSuccess;
}

Result checkLaunch(const char* what) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return zcollSuccess;
  return fail(zcollCudaError, "%s kernel launch failed: %s (%s)", what, cudaGetErrorName(err),
              cudaGetErrorString(err));
}

}  // namespace detail
}  // namespace cuda
}  // namespace quant
}  // namespace zcoll
