// The inter-node half of the stream-triggered calls (trigger/ring.h, issue 38): a rank's stream
// copies each step's slot into a pinned outbox and writes "outbox full"; the proxy (the
// communicator's progress thread, running one operation per call) polls that flag, sends the
// outbox to every rank on other nodes over the host route (UCX) straight from it, receives
// theirs into pinned inboxes and writes "inbox full"; the stream waits for that flag and reads
// the inbox in place (the kernels read mapped host memory, or copy it to the device). The proxy
// makes no CUDA call: it reads and stores host words and posts host messages, so no wait on a
// stream depends on CUDA work this process submits later (the device rule).
//
// Flags (host words registered with the device, this process only), handshakes as the ring's:
//   outFull[k]          kFull: the stream filled outbox k (the stream writes it); kEmpty: the
//                       proxy sent it to every remote peer (the proxy stores it)
//   inFull[k][p]        kFull: inbox k of remote peer p holds its step (the proxy stores it);
//                       kEmpty: the stream read it (the stream writes it)
//   done                the number of calls whose stream work has ended (the stream writes it):
//                       after a failure the proxy releases the waits until it has
// Each step of a call, on the proxy: wait until every inbox k is read, post the receives into
// them, wait until outbox k is full, post the sends, wait for all of them (waitAll: timeout,
// abort and peer failures as for any transfer), then store inFull = kFull and outFull = kEmpty.
// Messages carry the call's own tag sequence (drawn at call time, in the call's turn), with the
// step's index: every rank issues the same calls in the same order.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/comm.h"
#include "exec/executor.h"

namespace zcoll {

// What one step of a call moves between nodes, by comm rank. A gather step (stride 0) sends the
// first toRank[r] bytes of the slot (this rank's piece: the same for every r) to every rank r of
// other nodes and receives fromRank[r] bytes into r's inbox. A parts step (a reduce step: the
// slot holds one part per rank, part r at r * stride) sends part r (toRank[r] bytes) to rank r
// only, and receives from every rank r its part for this rank (fromRank[r] bytes) at this
// rank's part of r's inbox, where the stream reads it as it reads a node peer's slot.
struct ProxyStep {
  int slot = 0;
  size_t stride = 0;
  std::vector<size_t> toRank, fromRank;

  // A gather step: this rank's piece of bytes[me] bytes to every rank, bytes[r] from rank r.
  static ProxyStep gather(const std::vector<size_t>& bytes, int me);
  // A gather step whose pieces all have `bytes` bytes.
  static ProxyStep uniform(int nranks, size_t bytes);
  // A parts step: part r (bytes[r] bytes at r * stride) to rank r; bytes[me] from every rank.
  static ProxyStep parts(size_t stride, const std::vector<size_t>& bytes, int me);
};

class TriggerProxy {
 public:
  // Buffers and flags for the `remote` comm ranks (of `nranks`), slots of `slotBytes`, in
  // page-aligned host memory registered with the device (synchronizes the device: only while no
  // stream is held, which the ring's make() ensures).
  static Result make(const std::vector<int>& remote, int nranks, size_t slotBytes,
                     std::unique_ptr<TriggerProxy>* out);
  ~TriggerProxy();
  TriggerProxy(const TriggerProxy&) = delete;
  TriggerProxy& operator=(const TriggerProxy&) = delete;

  bool isRemote(int rank) const { return remoteIndex_[rank] >= 0; }
  const char* inbox(int slot, int peer) const {
    return inboxes_ + (size_t(slot) * remote_.size() + remoteIndex_[peer]) * slotBytes_;
  }

  // The stream's side, each on `ex`'s stream (ring.h's begin / publish / await / finish).
  Result waitOutboxFree(Executor& ex, int slot);
  // Copies what `step` sends from the slot at `from` into the outbox (a gather step's piece, or
  // the parts for other nodes' ranks at their offsets), writes outFull, and notes the step for
  // the proxy (takeSteps).
  Result publish(Executor& ex, const char* from, const ProxyStep& step);
  Result awaitInbox(Executor& ex, int slot, int peer);
  Result finish(Executor& ex, int slot);
  // After a call's last step: the stream writes the call's number into `done`.
  Result endCall(Executor& ex);
  // The steps noted since the last take: the call's, for its proxy operation.
  std::vector<ProxyStep> takeSteps();

  // The proxy's side (the progress thread; no CUDA call): serves a call's steps. Across nodes
  // the messages of a parts step carry only the bytes their receiver reduces (a reduce-scatter
  // sends each rank of another node its chunk's piece, not the slot).
  Result serve(zcollComm* comm, uint32_t seq, const std::vector<ProxyStep>& steps);
  // Stores kReleased into every flag this rank's streams wait on (host stores only).
  void releaseWaits();
  // Whether the streams ended every call issued so far (the `done` word).
  bool allCallsEnded() const;
  // Whether every outbox was sent (no step of this rank waits for the proxy to send).
  bool outboxesSent() const;

 private:
  TriggerProxy() = default;
  char* outbox(int slot) const { return outboxes_ + size_t(slot) * slotBytes_; }
  char* inboxFor(int slot, int peer) const { return const_cast<char*>(inbox(slot, peer)); }
  uint32_t* outFull(int slot) const { return words_ + slot; }
  uint32_t* inFull(int slot, int peer) const {
    return words_ + 2 + size_t(slot) * remote_.size() + remoteIndex_[peer];
  }
  uint32_t* done() const { return words_ + 2 + 2 * remote_.size(); }
  Result serveStep(zcollComm* comm, uint32_t seq, uint32_t index, const ProxyStep& step);

  std::vector<int> remote_;       // comm ranks on other nodes
  std::vector<int> remoteIndex_;  // comm rank -> index in remote_, -1 for this node's
  size_t slotBytes_ = 0;
  char* base_ = nullptr;  // one mapping: the words, then the outboxes, then the inboxes
  size_t bytes_ = 0;
  bool registered_ = false;
  uint32_t* words_ = nullptr;
  char* outboxes_ = nullptr;
  char* inboxes_ = nullptr;
  std::vector<ProxyStep> steps_;     // noted by publish, taken by the call: the caller's thread,
                                     // in the call's turn
  std::atomic<uint32_t> issued_{0};  // calls whose endCall was queued
};

}  // namespace zcoll
