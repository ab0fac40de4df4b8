// CUDA's device fence (base/device_fence.h): an event recorded on a call's stream by the CUDA
// executor (Executor::fence), waited for by the copy streams of CUDA IPC (cuda/cuda_ipc.cc,
// cudaStreamWaitEvent). The event comes from the executor's pool and goes back to it when the
// fence dies: a wait already queued on it is not affected by a later record (CUDA waits for the
// record that was the event's latest when the wait was issued).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

#include "base/device_fence.h"

namespace zcoll {

struct CudaFence final : DeviceFence {
  cudaEvent_t event = nullptr;
  std::function<void()> giveBack;  // returns the event to its pool
  ~CudaFence() override {
    if (giveBack) giveBack();
  }
};

}  // namespace zcoll
