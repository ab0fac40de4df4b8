#include "exec/device_component.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace zcoll {

namespace {

std::atomic<const DeviceComponent*> gReplaced{nullptr};

}  // namespace

#ifndef ZCOLL_HAVE_CUDA
const DeviceComponent* builtinDeviceComponent() { return nullptr; }
#endif

const DeviceComponent* deviceComponent() {
  const DeviceComponent* c = gReplaced.load(std::memory_order_acquire);
  return c != nullptr ? c : builtinDeviceComponent();
}

void setDeviceComponent(const DeviceComponent* c) {
  gReplaced.store(c, std::memory_order_release);
}

bool singleHardwareQueue() {
  const char* v = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

MemKind memoryKind(const void* ptr) {
  if (ptr == nullptr) return MemKind::kHost;
  const DeviceComponent* c = deviceComponent();
  return c != nullptr && c->owns(ptr) ? MemKind::kDevice : MemKind::kHost;
}

}  // namespace zcoll
