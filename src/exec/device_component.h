// Where a buffer lives, and who works on it. Host buffers run on the caller's thread with the
// host executor; device buffers belong to the device memory component (UCC's mc shape), which
// recognises its pointers and makes the executor for a call on a stream. The built-in component
// is CUDA's (when built, and a device is present); another can be put in its place, as the tests
// do to run the whole device path on a CPU with a stand-in device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/result.h"
#include "zcoll/zcoll.h"

namespace zcoll {

class Executor;
class DeviceIpc;
struct DeviceIdentity;

enum class MemKind { kHost, kDevice };

struct DeviceComponent {
  const char* name;
  // Whether this process has begun using the device (CUDA: a context is current on the calling
  // thread, or some device's primary context is active), asked before `owns`: a job that never
  // touched the device (host buffers only, on a machine with GPUs) must not get a context on
  // GPU 0 from a pointer query, which CUDA creates on demand. It must create nothing itself.
  // Once true it stays true (the component may remember it). NULL: always in use.
  bool (*inUse)();
  // Whether `ptr` is memory of this device kind (called with non-NULL pointers only, once inUse
  // said yes); *device then names the device that holds it (its ordinal in this process).
  bool (*owns)(const void* ptr, int* device);
  // The executor for a call whose buffers are on `device`, work ordered on `stream`.
  Result (*makeExecutor)(zcollStream_t stream, int device, std::unique_ptr<Executor>* out);
  // The device the calling thread works on (CUDA: its current device), for the topology
  // exchange at init (transport/device_ipc.h). NULL: the component names no device.
  Result (*describeDevice)(DeviceIdentity* out);
  // Sharing this device's memory with the other processes of the machine, for the cuda_ipc
  // transport (transport/device_ipc.h). NULL: the component cannot; device bytes between ranks
  // then always travel through host staging.
  Result (*makeIpc)(std::unique_ptr<DeviceIpc>* out);
  // `n` zeroed 32-bit words of host memory the device reads (CUDA: cudaHostAlloc, mapped and
  // portable) for the stream memory waits of queued calls (exec/wait_words.h), and their free.
  // Both synchronize the device implicitly: called only when no stream is held
  // (base/stream_holds.h). NULL: no stream memory waits (device calls then fail to queue).
  Result (*allocWaitWords)(size_t n, uint32_t** out);
  void (*freeWaitWords)(uint32_t* words);
  // Whether calls queued on streams (ZCOLL_DEVICE_CALLS=async) are trusted on this device, so
  // that ZCOLL_DEVICE_CALLS=auto (the default) queues them. CUDA: false. A queued call's stream
  // waits on a word that the progress thread stores only after CUDA work it submits later;
  // CUDA's stream memory operations allow that to deadlock when the later work shares a hardware
  // queue with the wait (issue 38; src/README.md "Launching a call"), and the model that avoids
  // it (everything submitted at call time) has not run on a GPU. The CPU stand-in device of the
  // tests: true (it checks the queued path's ordering rules).
  bool queuedCallsTrusted;
  // Makes `bytes` of host memory at `p` (page aligned; shared with other processes: a memfd
  // mapping) reachable by this device's stream memory operations (CUDA: cudaHostRegister, mapped
  // and portable), for the flags of stream-triggered calls (src/trigger); and undoes it. Both
  // synchronize the device implicitly: called only when no stream is held. NULL: the component
  // runs no stream-triggered calls.
  Result (*registerHostMemory)(void* p, size_t bytes);
  void (*unregisterHostMemory)(void* p);
};

// The component this build brings: CUDA's when built with CUDA and a device is present, else
// NULL. Defined by the device's own folder (cuda/device_component_cuda.cc), or by
// device_component.cc in a build without CUDA: the link, not an include, connects exec/ to cuda/.
const DeviceComponent* builtinDeviceComponent();

// The active device component: the one set last, else the built-in one, else none (NULL).
const DeviceComponent* deviceComponent();
// Replaces the device component (NULL: back to the built-in one). Not thread-safe against
// running calls: set it before communicating.
void setDeviceComponent(const DeviceComponent* c);

// CUDA_DEVICE_MAX_CONNECTIONS=1 in the environment: every stream of the process feeds one
// hardware queue (CUDA reads it when a context is created; a process sets it before). Read when
// a communicator is made: its device calls then run on the caller's thread (api/launch.h).
bool singleHardwareQueue();

// Whether a communicator made now queues its device calls on streams, for ZCOLL_DEVICE_CALLS
// `setting` ("auto", "async" or "sync", already validated): sync with one hardware queue
// (singleHardwareQueue) whatever the setting; async when asked; for auto, async only where the
// active device component trusts queued calls (DeviceComponent::queuedCallsTrusted), sync
// otherwise (CUDA). Forcing async on a component that does not trust it logs a warning once.
bool deviceCallsQueued(const std::string& setting);

// kDevice when the device component owns `ptr` (*device: the device holding it, when given);
// kHost otherwise (no component, NULL, memory the device does not know, or a device this process
// has not begun to use: the component is not even asked then, DeviceComponent::inUse).
MemKind memoryKind(const void* ptr, int* device = nullptr);

}  // namespace zcoll
