#include "core/memory.h"

#ifdef ZCOLL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace zcoll {

#ifdef ZCOLL_HAVE_CUDA
namespace {
bool anyDevice() {
  static const bool present = [] {
    int n = 0;
    bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    cudaGetLastError();  // clear the sticky "no driver" error on machines without a GPU
    return ok;
  }();
  return present;
}
}  // namespace

MemKind memoryKind(const void* ptr) {
  if (ptr == nullptr || !anyDevice()) return MemKind::kHost;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();
    return MemKind::kHost;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged ? MemKind::kDevice
                                                                                 : MemKind::kHost;
}
#else
MemKind memoryKind(const void*) { return MemKind::kHost; }
#endif

}  // namespace zcoll
