// staged: device bytes through host memory, for the peers cuda_ipc does not reach (other nodes,
// a path beyond ZCOLL_CUDA_IPC_LEVEL, ZCOLL_DEVICE_TRANSPORT=staged). The host transports (self,
// shm, ucx without CUDA support, which Debian's UCX 1.13 is) carry host memory only.
//
// A message travels in chunks of kChunkBytes over the peer's host route, pipelined: the sender
// copies chunk after chunk from the device into the host (DeviceIpc::startCopy, the device's copy
// engine) and hands each to the network as soon as it is there, while later chunks are still
// being copied; the receiver posts every chunk's receive at once and copies each to the device as
// soon as it has arrived. So the three legs (device to host, network, host to device) overlap.
//
// Memory, and why: the device's copies go through a fixed ring of kRingSlots pinned chunk
// buffers, allocated when the transport is created (cudaHostAlloc synchronizes the device
// implicitly: it must never run inside a call whose caller's stream waits for it,
// base/stream_holds.h). The network works on ordinary host memory, one buffer per message from a
// pool ([8-byte header][bytes], the header in front of a power-of-two capacity, so a message of
// 2^k bytes takes 2^k + 8, not 2^(k+1)), copied to or from a ring slot on the CPU. A slot is
// held only while one of this rank's own copies runs, never while a peer is awaited, so a fixed
// ring cannot deadlock whatever the peers do; the price is one host copy per chunk on each side.
//
// Wire: chunk 0 is [8-byte total size][the first min(bytes, kChunkBytes) bytes], then one
// message per further chunk, all with the message's tag (messages with one tag from one peer
// match in posting order). The size lets a receive fail a mismatch at once (zcollInvalidUsage),
// and a host receive never takes a device message as data (its size differs by 8). Empty
// messages never come here: they take the host route (core/progress.cc).
//
// Ordering: a message's copies wait for the fence of its call's work up to the post (sends on the
// device's outbound copy lane, receives on the inbound one), so the device buffer holds the
// sender's bytes and nothing of the receiver's call still uses its buffer when they run; a
// receive completes only when its last copy to the device is done.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/block_pool.h"
#include "transport/device_ipc.h"
#include "transport/registry.h"
#include "transport/transport.h"

namespace zcoll {

class StagedTransport final : public FencedTransport {
 public:
  static constexpr size_t kChunkBytes = size_t(1) << 20;
  static constexpr size_t kHeaderBytes = 8;
  static constexpr int kRingSlots = 4;

  // `engine`: the device's copy engine and pinned memory (its own object: its copies run on a
  // stream of their own). Allocates the ring once no stream of this process is held, waiting at
  // most `waitMs` (base/stream_holds.h).
  static Result create(std::unique_ptr<DeviceIpc> engine, int waitMs,
                       std::unique_ptr<StagedTransport>* out);
  // The table's row (transport/registry.h): whenever this rank has a device whose component
  // offers a copy engine (a rank alone in its comm sends to itself through it too); a copy
  // engine that does not start is a warning (device calls then fail on this rank).
  static Result createFor(const TransportSettings& settings, const std::vector<Transport*>& above,
                          std::unique_ptr<Transport>* out);
  // Frees the ring once no stream is held (later, if one is), unless a copy never ended.
  ~StagedTransport() override;

  const char* name() const override { return "staged"; }
  unsigned memKinds() const override { return kDeviceMemory; }
  // Every peer: the fallback of device routes (its route names why the transport above
  // refused; "this rank" for itself).
  bool canConnect(const PeerReach& peer, std::string* why) const override;
  // Device routes: the host route to each rank carries its chunks.
  Result connect(const ConnectArgs& args) override {
    if (args.kind == kDeviceMemory) {
      hosts_ = args.hostRoutes;
      aborting_ = args.aborting;
    }
    return zcollSuccess;
  }

  // Its copies wait for the call's fence: sends read, and receives write, the device buffer only
  // after the call's work before the post (Transport::waitsForFences).
  Result postSendAfter(int peer, const void* buf, size_t bytes, uint64_t tag, Request* req,
                       std::shared_ptr<DeviceFence> after) override;
  Result postRecvAfter(int peer, void* buf, size_t bytes, uint64_t tag, Request* req,
                       std::shared_ptr<DeviceFence> after) override;
  Result progress() override;
  bool pending() const override { return !active_.empty(); }
  bool peerFailed(int peer) const override;
  // Cancels the chunks on the host route and waits for the copies the message started.
  void cancel(Request* req) override;

  struct Op;  // one message in flight (staged_transport.cc)

 private:
  explicit StagedTransport(std::unique_ptr<DeviceIpc> engine);
  Result start(Op* op, Request* req);
  Result advanceSend(Op* op, bool* finished);
  Result advanceRecv(Op* op, bool* finished);
  void abandon(Op* op);
  void finish(Op* op, Result status);
  int takeSlot();

  std::unique_ptr<DeviceIpc> engine_;
  const std::atomic<bool>* aborting_ = nullptr;  // the comm's (ConnectArgs::aborting)
  // How long to wait for this transport's own copies when cancelling or closing: not at all
  // once the comm is being aborted (they may wait for work that never ends).
  int copyDrainMs(int normalMs) const {
    return aborting_ != nullptr && aborting_->load() ? 0 : normalMs;
  }
  std::vector<Transport*> hosts_;  // per rank
  std::vector<Op*> active_;
  std::vector<void*> ring_;        // kRingSlots pinned chunk buffers
  std::vector<int> freeSlots_;
  bool ringLost_ = false;          // a copy did not end: the ring is never freed
  BlockPool buffers_;              // host memory of messages, kept across messages
  std::vector<BlockPool::Block> retired_;  // of cancelled messages: a host transport may
                                           // still touch them, freed when this dies
};

}  // namespace zcoll
