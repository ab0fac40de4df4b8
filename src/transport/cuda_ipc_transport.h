// cuda_ipc: device bytes between the processes of one node, device to device (NVLink, PCIe, or
// inside one GPU), never through host memory. Written over DeviceIpc (transport/device_ipc.h),
// so the protocol runs on a CPU with the tests' stand-in device; CUDA's is cuda/cuda_ipc.cc.
//
// Memory, fixed at init (defect 3 of issue 30): allocating device memory and opening or closing
// an IPC mapping synchronize the device implicitly, so none of it may happen inside a call whose
// caller's stream waits for it (base/stream_holds.h). So, when it connects, each rank allocates
// for each peer it reaches kSlotsPerPeer slots of kSlotBytes (one allocation per peer, exported
// once), the pair trade the handles over the host route and each maps its peer's at once. A call
// then only copies. When the communicator is destroyed each rank closes its mappings of its
// peers' slots, tells them so, and frees its own slots once every peer has closed its mapping
// of them (CUDA: freeing first is undefined behavior), or leaves them allocated when a peer
// never says so (a peer whose process ended has no mapping left).
//
// Protocol, one rendezvous per piece, the receiver reading (the shape of the shm transport's
// single-copy rendezvous): a message is sent in pieces of at most kSlotBytes, in order.
//   sender    copies piece k of its buffer into a free slot of the peer's (on the DeviceIpc copy
//             stream), posts a receive for its acknowledgement, and sends a Descriptor {magic,
//             piece bytes, message bytes, handle + offset of the slot} tagged
//             makeDescriptorTag(tag) over the peer's host route (shm or ucx);
//   receiver  receives the descriptor (posting the next piece's receive at once), copies the
//             piece from the slot into its buffer on the DeviceIpc copy stream and, once the copy
//             is done, acknowledges with one word (0, or the zcollResult_t that failed it) on
//             makeAckTag(tag, itself);
//   sender    frees the slot on the acknowledgement; the send completes with the last one.
// With two slots per peer a piece is copied into a slot while the peer reads the other. Slots
// are per peer and used in message order, so one peer's progress never waits on another's.
// With user buffers (ZCOLL_CUDA_IPC_USER_BUFFERS=1, for buffers that live as long as the comm,
// as NCCL's registered ones) the sender first offers the allocation that holds its buffer
// itself (one piece, no copy); the receiver takes it only if that allocation is mapped already
// or no stream of its process is held (opening is then safe), and otherwise acknowledges with
// kUseSlots, and the sender sends the message through its slots. Queued device calls hold their
// callers' streams while they run, so they never offer user buffers.
//
// Both ends decide per message by the memory kind of their call (core/progress.h): a send and
// its receive must both be device calls. The descriptor's tag has a bit no host message has,
// so a device send never meets a host receive (or the reverse): a mismatch times out on both
// sides (ZCOLL_TIMEOUT) instead of delivering a descriptor as data.
//
// Ordering: a message's copies wait for the fence of its call's work up to the post (a sender's
// copies into slots, and the moment a user buffer is offered, on the outbound copy lane; a
// receiver's copies on the inbound one), so the sender's buffer holds its bytes and nothing of
// the receiver's call still uses its buffer when they run; a receive completes only when its
// last copy is done, so the work the executor issues after Stage::wait sees the bytes.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "transport/cuda_ipc_peer_memory.h"
#include "transport/device_ipc.h"
#include "transport/peer_memory.h"
#include "transport/registry.h"
#include "transport/transport.h"

namespace zcoll {

class CudaIpcTransport final : public FencedTransport {
 public:
  static constexpr size_t kSlotBytes = size_t(2) << 20;
  static constexpr int kSlotsPerPeer = 2;
  // An acknowledgement that refuses a user buffer (the receiver would have to open a mapping
  // while a stream is held): send the message through the slots instead.
  static constexpr uint64_t kUseSlots = ~uint64_t{0};

  // `maxPath`: the farthest GPU path class (topology.h GpuPath) this transport takes
  // (ZCOLL_CUDA_IPC_LEVEL); `userBuffers`: offer senders' own buffers first
  // (ZCOLL_CUDA_IPC_USER_BUFFERS, unless calls are queued); `copyWaitMs`: the longest wait for
  // one of its own device copies and for allocating while streams are held
  // (TransportSettings::copyWaitMs). Allocates and fills the probe block peers read at init.
  // `windowBytes`: this rank's window (ZCOLL_DEVICE_WINDOW_BYTES; 0: none), allocated at
  // connect when it has cuda_ipc peers.
  static Result create(std::unique_ptr<DeviceIpc> ipc, int maxPath, bool userBuffers,
                       int copyWaitMs, std::unique_ptr<CudaIpcTransport>* out,
                       size_t windowBytes = 0);
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
  // a pair agree on it) is judged (canConnect, then a read of its probe block); the two ranks
  // of each such pair trade verdicts over the host routes (args.exchange); each pair where both
  // said yes trades the handles of the slots each made for the other, maps the peer's, and
  // trades whether that worked. The pair uses cuda_ipc only if both said yes every time, so an
  // asymmetric failure can never leave one side waiting. ZCOLL_DEVICE_TRANSPORT=cuda_ipc fails
  // for a node peer without it. The host routes then carry the descriptors and acknowledgements.
  Result connect(const ConnectArgs& args) override;
  // Closes this rank's mappings of its peers' slots, trades "closed" with each peer, and frees
  // its own slots (once no stream is held) where the peer closed its mapping or is gone.
  void close(int flushMs) override;

  // Its copies wait for the call's fence (Transport::waitsForFences): a send's pieces are copied
  // into slots, and a user buffer offered, only after the call's work before the post; a
  // receive's copies land after it.
  Result postSendAfter(int peer, const void* buf, size_t bytes, uint64_t tag, Request* req,
                       std::shared_ptr<DeviceFence> after) override;
  Result postRecvAfter(int peer, void* buf, size_t bytes, uint64_t tag, Request* req,
                       std::shared_ptr<DeviceFence> after) override;
  Result progress() override;
  bool pending() const override { return !active_.empty(); }
  bool peerFailed(int peer) const override;
  void cancel(Request* req) override;
  // Waits, at most about `waitMs`, for the acknowledgements of cancelled sends a peer may still
  // be reading, and for copies into cancelled receives.
  void settleCancelled(int waitMs) override;

  // Its peer memory (transport/cuda_ipc_peer_memory.h), offered once connected: this rank's
  // window and registered buffers as the pairs map them.
  PeerMemory* peerMemory() override { return ipc_ != nullptr && connected_ ? &memory_ : nullptr; }

  struct Op;     // one message in flight (cuda_ipc_transport.cc)
  struct Piece;  // one piece of it

 private:
  CudaIpcTransport(std::unique_ptr<DeviceIpc> ipc, int maxPath, bool userBuffers, int copyWaitMs,
                   size_t windowBytes);
  // A transport that only takes part in choosing device routes (ipc_ null).
  static std::unique_ptr<CudaIpcTransport> off();
  Result makeProbe();
  Result makeSlots(const ConnectArgs& a, const std::vector<char>& pairs);
  Result tradeHandles(const ConnectArgs& a, const std::vector<char>& pairs,
                      std::vector<char>* mapped);
  Result advanceSend(Op* op, bool maySlot, bool* finished);
  Result advanceRecv(Op* op, bool* finished);
  Result startPiece(Op* op);
  Result readPiece(Op* op, Piece* p);
  Result acknowledge(Op* op, Piece* p, Result outcome);
  Result postDescriptorRecv(Op* op);
  void finish(Op* op, Result status);
  void releaseSlots(Op* op, bool copiesDone, bool peerDone);
  void tradeClosed(int waitMs);
  void freeOwnSlots();

  std::unique_ptr<DeviceIpc> ipc_;  // null: off on this rank
  int maxPath_;
  bool userBuffers_;
  int copyWaitMs_;
  bool forced_ = false;              // ZCOLL_DEVICE_TRANSPORT=cuda_ipc
  bool connected_ = false;           // connect ran: canConnect answers from agreed_ and why_
  bool closed_ = false;
  std::vector<char> agreed_;         // per rank: both ranks of the pair said yes
  std::vector<std::string> why_;     // per rank: why (not)
  int rank_ = -1;
  const std::atomic<bool>* aborting_ = nullptr;  // the comm's (ConnectArgs::aborting)
  // How long to wait for this transport's own copies when cancelling or closing: not at all
  // once the comm is being aborted (they may wait for work that never ends).
  int copyDrainMs(int normalMs) const {
    return aborting_ != nullptr && aborting_->load() ? 0 : normalMs;
  }
  std::vector<Transport*> hosts_;  // per rank: the control route
  std::vector<int> pids_;          // per rank
  std::string address_;
  void* probeBlock_ = nullptr;
  // Per rank: the slots this rank made for it (its allocation and handle) and their use.
  struct PeerSlots {
    void* area = nullptr;        // kSlotsPerPeer * kSlotBytes of device memory, or null
    IpcHandle handle{};
    bool peerMapped = false;     // the peer may have mapped it: freed only once it says closed
    std::vector<int> free;       // slot indices free for a piece
    int lost = 0;                // slots a cancelled piece may still be read from: never reused
  };
  std::vector<PeerSlots> slots_;
  std::vector<char> mappedPeer_;  // per rank: this rank mapped that rank's slots for it
  std::vector<Op*> active_;     // posted, not complete
  std::vector<Op*> cancelled_;  // sends whose peer may still read: awaiting acknowledgements
  CudaIpcPeerMemory memory_;  // made with ipc_ (above): declared after it
};

}  // namespace zcoll
