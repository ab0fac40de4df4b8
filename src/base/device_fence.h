// A point in the work queued on a device stream (CUDA: an event recorded there). A call's
// executor makes one (Executor::fence) for the device transports, whose copies on the device's
// copy engine wait for it (DeviceIpc::startCopy) instead of the host waiting for the call's stream
// before every send and receive. Both belong to one device component, which alone knows what a
// fence holds; it lives as long as someone may still queue a wait on it.
#pragma once

namespace zcoll {

struct DeviceFence {
  virtual ~DeviceFence() = default;
};

}  // namespace zcoll
