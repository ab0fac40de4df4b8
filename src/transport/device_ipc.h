// A device's copy engine and its memory shared between the processes of one machine (CUDA IPC),
// as the device memory component offers them (exec/device_component.h: DeviceComponent::makeIpc). The
// device transports, cuda_ipc (transport/cuda_ipc_transport.h) and staged
// (transport/staged_transport.h), are written over this interface only, so their protocols run
// on a CPU with the tests' stand-in device; CUDA's implementation lives in cuda/cuda_ipc.cc.
//
// One object per communicator, used by one thread at a time (the comm's order). Handles exist
// for whole allocations only (cudaIpcGetMemHandle takes an allocation's base): a range travels
// as the allocation's handle plus the range's offset in it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "base/device_fence.h"
#include "base/result.h"

namespace zcoll {

// What a peer needs to reach a range of this process's device memory. Plain old data: it
// travels inside cuda_ipc's descriptors between processes of one build.
struct IpcHandle {
  uint8_t opaque[64];  // the kind's handle of the allocation (cudaIpcMemHandle_t)
  uint64_t base;       // the allocation's address in the exporting process
  uint64_t offset;     // the range's offset in the allocation
  int32_t pid;         // the exporting process's pid (for messages)
  int32_t reserved;
  uint64_t process;    // the exporting process (base/process.h: processToken, not the pid, which
                       // repeats across pid namespaces): a handle from this very process is not
                       // opened (CUDA refuses), its address is used as it is
};

// The device a rank works on (the calling thread's current device when the communicator is
// created, as NCCL binds a communicator to it), exchanged at init. Plain old data.
struct DeviceIdentity {
  int32_t present;   // 1: the rank has a device of the active component
  int32_t ordinal;   // its index in the rank's process
  int32_t ipc;       // 1: its memory can be shared with other processes (makeIpc works)
  int32_t netDirect;  // 1: the rank's network transport (UCX) carries this device's memory
  char kind[16];     // the component's name ("cuda")
  char busId[16];    // PCI bus id, lowercase "0000:12:00.0"; "" when unknown
  uint8_t uuid[16];  // the device's UUID (all zero when unknown)
};

// Who maps a peer's allocation (DeviceIpc::map, transport/ipc_mappings.h): a call's user buffer,
// cached for later calls, or an owner holding it until unmap (slots, windows, registrations).
enum class MapUse { kCached, kHeld };

class DeviceIpc {
 public:
  virtual ~DeviceIpc() = default;
  virtual const char* name() const = 0;

  // The handle of the allocation that holds [ptr, ptr + bytes), with ptr's offset in it.
  // zcollUnsupported when this memory cannot be shared (CUDA: stream-ordered or virtual-memory
  // allocations); the transport then sends from a shared block (allocShared) instead.
  virtual Result exportRange(const void* ptr, size_t bytes, IpcHandle* out) = 0;

  // The address, in this process, of the range a peer exported. The allocation is mapped on
  // first use (cudaIpcOpenMemHandle costs milliseconds); a new allocation has a new handle (CUDA
  // promises it), so a mapping is never reused for other memory. `use` says who asks
  // (transport/ipc_mappings.h): kHeld (slots, windows, registrations, probes) counts one hold
  // that unmap() gives back, and a held allocation is never closed while any hold remains (two
  // windows carved from one allocation share its mapping); kCached (a call's user buffer) keeps
  // it until unmapAll(), or until the table is full (a few thousand mappings), when the least
  // recently used one that nobody holds is closed (after drain()). Opening (and that closing)
  // synchronizes the device implicitly: a map() that is not mapped() must run only while no
  // stream is held (base/stream_holds.h).
  virtual Result map(const IpcHandle& h, const void** out, MapUse use) = 0;
  // Whether map(h) would find h's allocation mapped already (or this process's own): no open.
  virtual bool mapped(const IpcHandle& h) = 0;
  // Gives back one hold of h's allocation (map with kHeld); the last one closes the mapping if
  // map() opened one (after the copies started so far), which synchronizes the device
  // implicitly, as opening does.
  virtual void unmap(const IpcHandle& h) = 0;
  // Closes every mapping map() opened (after the copies started so far), as an importer must
  // before the exporter frees the memory (CUDA: freeing first is undefined behavior). Closing
  // synchronizes the device implicitly, as opening does.
  virtual void unmapAll() = 0;

  // The copy streams: one for bytes leaving this rank (a send's copies) and one for bytes
  // arriving (a receive's), so a rank's sends and receives do not queue behind each other
  // (device to host and host to device run on different copy engines).
  enum class Lane { kOut, kIn };
  // Starts dst[0, bytes) = src[0, bytes) on `lane`, after `after` when given (the work of the
  // call that posted the message, up to the post: base/device_fence.h): each pointer is device
  // memory of this process, memory mapped by map(), or host memory. Copies of one lane run in
  // the order they were started; bytes 0 with a fence names the moment the fence is passed.
  // *ticket names the copy for copyDone().
  virtual Result startCopy(void* dst, const void* src, size_t bytes, uint64_t* ticket,
                           Lane lane = Lane::kOut, const DeviceFence* after = nullptr) = 0;
  // Whether copy `ticket` (and so every copy started before it on its lane) is done. A failed
  // copy is an error (zcollCudaError for CUDA, with the runtime's message).
  virtual Result copyDone(uint64_t ticket, bool* done) = 0;
  // Waits until every copy started so far is done, at most about `waitMs`: zcollTimeout after.
  virtual Result drain(int waitMs) = 0;

  // Device memory of this process that exportRange accepts (cudaMalloc for CUDA), for the
  // init probe and cuda_ipc's slots. Freed by freeShared or when this object dies. These and
  // allocHost/freeHost synchronize the device implicitly: they run only while no stream is held
  // (base/stream_holds.h).
  virtual Result allocShared(size_t bytes, void** out) = 0;
  virtual void freeShared(void* p) = 0;
  // Host memory this device copies to and from fastest (pinned: cudaHostAlloc), for the staged
  // transport's chunks. Freed by freeHost or when this object dies.
  virtual Result allocHost(size_t bytes, void** out) = 0;
  virtual void freeHost(void* p) = 0;
};

// Keeps `ipc` for the rest of the process: a copy of it that never ended (a device that stopped,
// an abort) may still use its streams and memory, so neither is freed (the object stays
// reachable: no leak report).
inline void abandonDeviceIpc(std::unique_ptr<DeviceIpc> ipc) {
  static std::mutex mu;
  static auto* kept = new std::vector<std::unique_ptr<DeviceIpc>>;  // never destroyed
  std::lock_guard<std::mutex> lock(mu);
  kept->push_back(std::move(ipc));
}

}  // namespace zcoll
