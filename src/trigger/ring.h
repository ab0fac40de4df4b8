// Stream-triggered device calls inside a node (issue 38): a call computes its whole schedule on
// the caller's thread and enqueues all of its device work on the caller's stream when it is
// made: copies, the reduction kernels, and stream memory writes and waits on flags. A wait is
// released only by a peer's GPU work (its stream's write) or, on an abort, by the host storing
// the flag (no CUDA call): never by CUDA work this process submits later. No progress thread
// takes part, so nothing of the call runs after it returns but the device's own work.
//
// The ring of a communicator whose ranks all share one node, each on its own device (or in its
// own process), every pair reached through cuda_ipc with a window (transport/peer_memory.h):
//   window   this rank's cuda_ipc window, mapped by every peer at init, split in two slots and
//            an accumulator: step s fills slot k = s % 2, which the peers read in place.
//   flags    host words every rank maps (trigger/shared_flags.h), registered with its device:
//              handshake[k][reader][owner]   kFull: owner's slot k holds a step for reader
//                                            (owner's stream writes it); kEmpty: reader has
//                                            read it (reader's stream writes it)
// Step s of a rank, all on its stream (begin / publish / await / finish), k = s % 2:
//   wait handshake[k][p][me] & kEmpty   every peer has read the slot this step refills
//   fill the slot; write handshake[k][p][me] = kFull for every peer
//   wait handshake[k][me][p] & kFull; read p's slot (copy, or reduce in place)
//   write handshake[k][me][p] = kEmpty for every peer
// Every step awaits every peer, so each word strictly alternates kFull (its owner) and kEmpty
// (its reader): a wait never mistakes an old value for a new one. The values never grow, so a
// call captured into a CUDA graph (its stream memory operations fixed at capture) waits for and
// writes the right values at every replay, interleaved with eager calls in any order the ranks
// share. Slot k is picked by a step count kept per communicator, identically on every rank
// (calls, and replays, are made in the same order on every rank, as NCCL requires). An abort
// stores kReleased (both bits) into every word this rank waits on: every wait passes.
// A rank's steps run in order: one call's on its stream; a call on another stream than the
// previous call's first waits for that call's mark (an event, Executor::waitMark). A graph's
// replay runs when it is launched, which the ring does not see: the caller launches it in stream
// order with the communicator's other calls (see zcoll.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/comm.h"
#include "exec/executor.h"
#include "transport/peer_memory.h"
#include "trigger/handshake.h"
#include "trigger/proxy.h"
#include "trigger/shared_flags.h"

namespace zcoll {

class TriggerRing {
 public:
  // The ring of `comm`, made collectively at init (every rank decides alike), or null with the
  // reason in *why when the communicator does not qualify (see above); a failure on any rank
  // leaves every rank without one, logged, never an error: calls then run synchronously.
  static Result make(zcollComm* comm, std::shared_ptr<TriggerRing>* out, std::string* why);
  // Waits (on the host) until every stream that ran a step of this ring got past it and every
  // peer read this rank's last slots, at most the communicator's timeout (releasing every wait
  // after an abort, or once that timeout passed, for as long again). Then frees the flags, or
  // keeps them when a stream never got there.
  ~TriggerRing();

  int nranks() const { return n_; }
  int me() const { return me_; }
  // Bytes of one slot, and of the accumulator.
  size_t slotBytes() const { return slotBytes_; }
  size_t accBytes() const { return accBytes_; }
  char* acc() const { return window_ + 2 * slotBytes_; }
  char* mySlot(uint64_t step) const { return window_ + (step % 2) * slotBytes_; }
  // A peer's slot of `step`: a node peer's in its window; another node's in this rank's inbox
  // for it (trigger/proxy.h).
  const char* peerSlot(int peer, uint64_t step) const {
    if (proxy_ && proxy_->isRemote(peer)) return proxy_->inbox(step % 2, peer);
    return peerWindows_[peer] + (step % 2) * slotBytes_;
  }

  // Before a call's first step on `ex`: when the previous call ran on another stream, `ex` waits
  // for its mark (no wait for a capturing stream: the graph runs when launched).
  Result join(Executor& ex, bool capturing);
  // The step protocol (above), each on `ex`'s stream.
  Result begin(Executor& ex, uint64_t* step);
  // `moves`: what the step sends to and receives from ranks of other nodes (trigger/proxy.h;
  // its slot is set here), unused on one node.
  Result publish(Executor& ex, uint64_t step, ProxyStep moves);
  // publish's halves, for a step that sends to other nodes before its slot is complete (a rail
  // gather step): `from` what the proxy sends (moves: ProxyStep::gather), then the node's
  // handshakes.
  Result publishRemote(Executor& ex, uint64_t step, const char* from, ProxyStep moves);
  Result publishLocal(Executor& ex, uint64_t step);
  // A step whose pieces all have `bytes` bytes (ProxyStep::uniform).
  Result publish(Executor& ex, uint64_t step, size_t bytes) {
    return publish(ex, step, ProxyStep::uniform(n_, bytes));
  }
  Result await(Executor& ex, int peer, uint64_t step);
  Result finish(Executor& ex, uint64_t step);
  // After a call's last step on `ex`: a mark the destructor, drain and the next call on another
  // stream wait for. On a capturing stream a node of the graph, passed once the graph's latest
  // launch got past it (Executor::markStream), kept for the ring's life: the destructor and
  // drain then wait for launches in flight too (an abort releases them first).
  Result noteStream(Executor& ex, bool capturing);
  // Whether the ring's ranks span several nodes: steps then also go through the proxy
  // (trigger/proxy.h), one operation per call on the progress thread, and nothing can be
  // captured.
  bool spansNodes() const { return proxy_ != nullptr; }
  // Whether the ring spans nodes of equal size: gathers then go by rail, then node (steps.h).
  bool equalNodes() const { return proxy_ != nullptr && equalNodes_; }
  // The node layout: node count, a rank's node, the rank of node `node` at local index `local`.
  int nodes() const { return static_cast<int>(members_.size()); }
  int nodeOf(int rank) const { return nodeOf_[rank]; }
  int rankAt(int node, int local) const { return members_[node][local]; }
  // This rank's index among its node's ranks (its rail: the ranks of that index on every node).
  int myLocalIndex() const { return localOf_[me_]; }
  const std::vector<int>& localRanks() const { return local_; }
  // After a call's last step on `ex` (and before noteStream): with a proxy, the stream notes the
  // call's end, and the call's steps are handed over (empty: nothing for the proxy).
  Result endCall(Executor& ex, std::vector<ProxyStep>* proxySteps);
  // The proxy's operation for a call (the progress thread; no CUDA call): serves its steps with
  // the call's tag sequence; a failure breaks the comm (and tells the peers).
  Result serveProxy(zcollComm* comm, uint32_t seq, const std::vector<ProxyStep>& steps);
  // After a call's proxy operation failed or could not run: releases this rank's waits (again
  // at every poll) until its streams ended every call issued, at most the comm's timeout.
  void releaseAfterFailure();

  // Waits on the host (no CUDA call but event queries) until every step issued has run, at
  // most `timeoutMs`; zcollTimeout after. Calls that do not run on the ring call it first: they
  // use the window too. With `release`, or once the comm is aborting, it releases the waits
  // (releaseWaits) at every poll: a held stream's own later flag writes overwrite a release,
  // so one store is not enough.
  Result drain(int timeoutMs, bool release = false);
  // Stores kReleased into each flag this rank's streams wait on: a held stream goes on (its
  // data is then garbage; the communicator is broken). Host stores only.
  void releaseWaits();
  // Steps issued so far.
  uint64_t stepsIssued() const { return next_; }

 private:
  TriggerRing() = default;
  // The flags of a node's ranks, by their local indices.
  uint32_t* handshake(int slot, int reader, int owner) const {
    return flags_.word((size_t(slot) * local_.size() + localOf_[reader]) * local_.size() +
                       localOf_[owner]);
  }
  bool isLocal(int rank) const { return localOf_[rank] >= 0; }
  static size_t flagWords(int n) { return 2 * size_t(n) * n; }
  bool allPassed();
  bool peersReadAll() const;
  // This rank's part of make(): the flags, the window and the peers' windows.
  Result open(zcollComm* comm, int flagsPid, int flagsFd, PeerMemory* pm,
              const std::vector<ExposedRange>& windows);

  int n_ = 0, me_ = 0;
  std::vector<int> local_;    // the comm ranks of this rank's node
  std::vector<int> localOf_;  // comm rank -> index in local_, -1 on another node
  std::vector<std::vector<int>> members_;  // node -> its ranks (the comm's layout)
  std::vector<int> nodeOf_;                // comm rank -> its node
  bool equalNodes_ = false;
  std::unique_ptr<TriggerProxy> proxy_;  // ranks on other nodes: null with one node
  int timeoutMs_ = 0;
  const std::atomic<bool>* aborting_ = nullptr;
  SharedFlags flags_;
  char* window_ = nullptr;
  std::vector<const char*> peerWindows_;
  size_t slotBytes_ = 0, accBytes_ = 0;
  uint64_t next_ = 0;  // steps issued (the last one's number: its slot is next_ % 2)
  std::map<uintptr_t, std::shared_ptr<StreamMark>> marks_;  // per stream, its newest
  std::vector<std::shared_ptr<StreamMark>> unkeyed_;         // streams without a shared key
  std::vector<std::shared_ptr<StreamMark>> captured_;  // one per captured call, never dropped
  std::shared_ptr<StreamMark> lastMark_;  // the previous eager call's, on lastStream_
  uintptr_t lastStream_ = 0;
  bool lastKeyed_ = false;
};

// Whether the comm has a ring whose ranks span nodes (qgZ and the quantizing all-reduce then run
// synchronously: their inter-node requantization has no triggered form).
bool ringSpansNodes(const zcollComm* comm);

}  // namespace zcoll
