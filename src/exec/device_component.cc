#include "exec/device_component.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "base/log.h"

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

bool deviceCallsQueued(const std::string& setting) {
  if (singleHardwareQueue() || setting == "sync" || setting == "stream") return false;
  const DeviceComponent* c = deviceComponent();
  const bool trusted = c == nullptr || c->queuedCallsTrusted;
  if (setting == "auto") return trusted;
  static std::once_flag warned;
  if (!trusted)
    std::call_once(warned, [c] {
      ZCOLL_WARN(LogSubsys::kInit, "ZCOLL_DEVICE_CALLS=async on %s: a queued call's stream waits "
                 "for work submitted after it, which can deadlock when streams share a hardware "
                 "queue (issue 38, src/README.md \"Launching a call\"); not yet run on a GPU. "
                 "The default (auto) runs %s calls synchronously.", c->name, c->name);
    });
  return true;
}

MemKind memoryKind(const void* ptr, int* device) {
  if (ptr == nullptr) return MemKind::kHost;
  const DeviceComponent* c = deviceComponent();
  if (c == nullptr || (c->inUse != nullptr && !c->inUse())) return MemKind::kHost;
  int holder = -1;
  if (!c->owns(ptr, &holder)) return MemKind::kHost;
  if (device != nullptr) *device = holder;
  return MemKind::kDevice;
}

}  // namespace zcoll
