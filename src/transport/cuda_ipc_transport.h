// cuda_ipc: device bytes between the processes of one node, device to device (NVLink, PCIe, or
// inside one GPU), never through host memory. Written over DeviceIpc (transport/device_ipc.h),
// so the protocol runs on a CPU with the tests' stand-in device; CUDA's is cuda/cuda_ipc.cc.
//
// Protocol, one rendezvous per message, the receiver reading (the shape of the shm transport's
// single-copy rendezvous):
//   sender    copies its buffer into a shared block of zcoll's (device memory peers map once)
//             and exports the block (handle + offset), or, with user buffers on, exports the
//             allocation that holds the buffer itself (no copy), posts a receive for
//             the acknowledgement, and sends a Descriptor {magic, bytes, handle} tagged
//             makeDescriptorTag(tag) over the peer's host route (shm or ucx);
//   receiver  receives the descriptor, maps the allocation (cached), copies the bytes into its
//             buffer on the DeviceIpc copy stream and, once the copy is done, acknowledges with
//             one word (0, or the zcollResult_t that failed it) on makeAckTag(tag, itself);
//   sender    completes on the acknowledgement: its buffer is free again.
// Both ends decide per message by the memory kind of their call (core/progress.h): a send and
// its receive must both be device calls. The descriptor's tag has a bit no host message has,
// so a device send never meets a host receive (or the reverse): a mismatch times out on both
// sides (ZCOLL_TIMEOUT) instead of delivering a descriptor as data.
//
// Ordering: Stage::send and Stage::recv flush the call's executor before posting, so the
// sender's buffer holds its bytes and nothing of the receiver's call still uses its buffer; a
// receive completes only when its copy is done, so the work the executor issues after
// Stage::wait sees the bytes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/block_pool.h"
#include "transport/device_ipc.h"
#include "transport/peer_memory.h"
#include "transport/registry.h"
#include "transport/transport.h"

namespace zcoll {

class CudaIpcTransport final : public Transport, public PeerMemory {
 public:
  // `maxPath`: the farthest GPU path class (topology.h GpuPath) this transport takes
  // (ZCOLL_CUDA_IPC_LEVEL); `userBuffers`: peers read senders' own buffers, not a copy in a
  // shared block (ZCOLL_CUDA_IPC_USER_BUFFERS); `copyWaitMs`: the longest wait for one of its
  // own device copies (TransportSettings::copyWaitMs). Allocates and fills the probe block peers
  // read at init.
  static Result create(std::unique_ptr<DeviceIpc> ipc, int maxPath, bool userBuffers,
                       int copyWaitMs, std::unique_ptr<CudaIpcTransport>* out);
  // The table's row (transport/registry.h), with peers: on when this rank's device can share
  // its memory (the device component offers IPC) and ZCOLL_DEVICE_TRANSPORT allows it; off
  // (no device work, only its part in choosing device routes: connect) with a device otherwise,
  // or without one under ZCOLL_DEVICE_TRANSPORT=cuda_ipc; none else. A failure to start is an
  // error under ZCOLL_DEVICE_TRANSPORT=cuda_ipc, a warning otherwise.
  static Result createFor(const TransportSettings& settings, const std::vector<Transport*>& above,
                          std::unique_ptr<Transport>* out);
  ~CudaIpcTransport() override;

  const char* name() const override { return "cuda_ipc"; }
  unsigned memKinds() const override { return kDeviceMemory; }
  // Before connect: whether the pair can use it (same machine and node, both devices
  // shareable, same GPU or a path within ZCOLL_CUDA_IPC_LEVEL). After connect: whether both
  // ranks of the pair said yes, and why (not).
  bool canConnect(const PeerReach& peer, std::string* why) const override;

  // What peers need to probe this rank: the probe block's handle and its pattern.
  std::string address() const override { return address_; }
  // Reads a peer's probe block through the device (map, copy to the host) and checks its
  // pattern; false with the reason when the peer's memory cannot be reached.
  bool probe(const std::string& peerAddress, std::string* why);
  // Device routes, in phases: each node peer on this machine whose device and this rank's are
  // of one kind and can share memory (decided from what every rank exchanged, so both sides of
  // a pair agree on it) is judged (canConnect, then a read of its probe block), the two ranks
  // of each such pair trade verdicts over the host routes (args.exchange), and the pair uses
  // cuda_ipc only if both said yes, so an asymmetric failure can never leave one side waiting.
  // ZCOLL_DEVICE_TRANSPORT=cuda_ipc fails for a node peer without it. The host routes then
  // carry the descriptors and acknowledgements.
  Result connect(const ConnectArgs& args) override;

  Result postSend(int peer, const void* buf, size_t bytes, uint64_t tag, Request* req) override;
  Result postRecv(int peer, void* buf, size_t bytes, uint64_t tag, Request* req) override;
  Result progress() override;
  bool pending() const override { return !active_.empty(); }
  bool peerFailed(int peer) const override;
  void cancel(Request* req) override;
  // Waits, at most about `waitMs`, for the acknowledgements of cancelled sends a peer may still
  // be reading, and for copies into cancelled receives.
  void settleCancelled(int waitMs) override;

  // ---- PeerMemory (device memory of the node peers it connected) ----
  // Offered when on. Caller buffers are exposed only with ZCOLL_CUDA_IPC_USER_BUFFERS=1 (the
  // mapping stays in the peers after the call, as a send's export does: see exportSend), and
  // only where the memory can be exported (not stream-ordered or virtual-memory allocations:
  // mappable 0, and nothing reads it unmapped, so the algorithms fall back to messages). A
  // mapping is the DeviceIpc's, kept until the transport closes; the call's kernels read and
  // write it in this device's address space. Windows are shared blocks, grown by replacing them
  // with one at least twice as large; the replaced ones are kept (a peer may still map them)
  // until the transport is destroyed.
  PeerMemory* peerMemory() override { return ipc_ != nullptr ? this : nullptr; }
  bool exposesCallerBuffers() const override { return userBuffers_; }
  bool readsUnmapped() const override { return false; }
  size_t handleBytes() const override { return sizeof(IpcHandle); }
  Result expose(const void* ptr, size_t bytes, ExposedRange* out) override;
  Result map(int peer, const ExposedRange& r, bool writable, PeerView* view) override;
  Result read(int peer, const ExposedRange& r, size_t offset, void* dst, size_t bytes) override;
  Result ownWindow(size_t bytes, char** base, ExposedRange* ref) override;
  Result mapWindow(int peer, const ExposedRange& ref, const char** base) override;

  struct Op;  // one message in flight (cuda_ipc_transport.cc)

 private:
  CudaIpcTransport(std::unique_ptr<DeviceIpc> ipc, int maxPath, bool userBuffers, int copyWaitMs);
  // A transport that only takes part in choosing device routes (ipc_ null).
  static std::unique_ptr<CudaIpcTransport> off();
  Result makeProbe();
  Result exportSend(Op* op, const void* buf, size_t bytes);
  Result advance(Op* op, bool* finished);
  Result startRead(Op* op);
  Result acknowledge(Op* op, Result outcome);
  void finish(Op* op, Result status);
  void giveBackBlock(Op* op);

  std::unique_ptr<DeviceIpc> ipc_;  // null: off on this rank
  int maxPath_;
  bool userBuffers_;
  int copyWaitMs_;
  bool forced_ = false;              // ZCOLL_DEVICE_TRANSPORT=cuda_ipc
  bool connected_ = false;           // connect ran: canConnect answers from agreed_ and why_
  std::vector<char> agreed_;         // per rank: both ranks of the pair said yes
  std::vector<std::string> why_;     // per rank: why (not)
  int rank_ = -1;
  std::vector<Transport*> hosts_;  // per rank: the control route
  std::string address_;
  void* probeBlock_ = nullptr;
  std::vector<Op*> active_;     // posted, not complete
  std::vector<Op*> cancelled_;  // sends whose peer may still read: awaiting their acknowledgement
  BlockPool blocks_;            // shared blocks that sends copy their buffers into
  struct Window {
    void* ptr = nullptr;
    size_t bytes = 0;
    IpcHandle handle{};
  };
  std::vector<Window> windows_;  // this rank's window, the current one last
};

}  // namespace zcoll
