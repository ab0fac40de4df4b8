// The executor for a call's memory kind: the host one, or the device component's (CUDA's) on the
// call's stream.
#include "exec/executor.h"

#include <string>

#ifdef ZCOLL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace zcoll {

Result makeExecutor(MemKind kind, zcollStream_t stream, int deviceOrdinal,
                    std::unique_ptr<Executor>* owned, Executor** out) {
  if (kind == MemKind::kHost) {
    *out = &hostExecutor();
    return zcollSuccess;
  }
  const DeviceComponent* device = deviceComponent();
  if (device == nullptr) {
#ifdef ZCOLL_HAVE_CUDA
    return fail(zcollUnsupported, "device buffers: no CUDA device is available to this process");
#else
    return fail(zcollUnsupported,
                "device buffers: this zcoll was built without CUDA (nvcc was not found at build "
                "time)");
#endif
  }
  ZCOLL_CHECK(device->makeExecutor(stream, deviceOrdinal, owned));
  *out = owned->get();
  return zcollSuccess;
}

std::string executorSummary() {
#ifdef ZCOLL_HAVE_CUDA
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("host; cuda: built, no device (") + cudaGetErrorName(err) + ")";
  }
  if (n == 0) return "host; cuda: built, no device";
  return "host, cuda (" + std::to_string(n) + (n == 1 ? " device)" : " devices)");
#else
  return "host; cuda: not built";
#endif
}

}  // namespace zcoll
