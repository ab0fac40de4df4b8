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
//            an accumulator: step s fills slot s % 2, which the peers read in place.
//   flags    host words every rank maps (trigger/shared_flags.h), registered with its device:
//              ready[dst][src]     src's slot holds step s for dst (src's stream writes s)
//              consumed[own][rdr]  rdr has read own's slot of step s (rdr's stream writes s)
//              chain[r]            rank r's step s is complete (r's stream writes s)
// Step s of a rank, all on its stream (begin / publish / await / finish):
//   wait chain[me] >= s-1            its previous step, on whatever stream it ran, is complete
//                                    (steps of one rank run in order: the slots and the
//                                    accumulator are reused by every stream)
//   wait consumed[me][p] >= s-2      every peer has read the slot this step refills
//   fill the slot; write ready[p][me] = s for every peer
//   wait ready[me][p] >= s; read p's slot (copy, or reduce in place)
//   write consumed[p][me] = s for every peer; write chain[me] = s
// Steps are counted per communicator, identically on every rank (calls are made in the same
// order on every rank, as NCCL requires), so every call's steps are static given its sizes. The
// counters are 32-bit and compared cyclically (cuStreamWaitValue32's GEQ).
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
#include "trigger/shared_flags.h"

namespace zcoll {

class TriggerRing {
 public:
  // The ring of `comm`, made collectively at init (every rank decides alike), or null with the
  // reason in *why when the communicator does not qualify (see above); a failure on any rank
  // leaves every rank without one, logged, never an error: calls then run synchronously.
  static Result make(zcollComm* comm, std::shared_ptr<TriggerRing>* out, std::string* why);
  // Waits (on the host) until every stream that ran a step of this ring got past it and every
  // peer read this rank's last slots, at most the communicator's timeout; after an abort
  // releases every wait first. Then frees the flags, or keeps them when a stream never got
  // there.
  ~TriggerRing();

  int nranks() const { return n_; }
  int me() const { return me_; }
  // Bytes of one slot, and of the accumulator.
  size_t slotBytes() const { return slotBytes_; }
  size_t accBytes() const { return accBytes_; }
  char* acc() const { return window_ + 2 * slotBytes_; }
  char* mySlot(uint64_t step) const { return window_ + (step % 2) * slotBytes_; }
  const char* peerSlot(int peer, uint64_t step) const {
    return peerWindows_[peer] + (step % 2) * slotBytes_;
  }

  // The step protocol (above), each on `ex`'s stream.
  Result begin(Executor& ex, uint64_t* step);
  Result publish(Executor& ex, uint64_t step);
  Result await(Executor& ex, int peer, uint64_t step);
  Result finish(Executor& ex, uint64_t step);
  // After a call's last step on `ex`: a mark the destructor and drain wait for.
  Result noteStream(Executor& ex);

  // Waits on the host (no CUDA call but event queries) until every step issued has run, at
  // most `timeoutMs`; zcollTimeout after. Calls that do not run on the ring call it first: they
  // use the window too.
  Result drain(int timeoutMs);
  // Stores a value past every step issued into each flag this rank's streams wait on: a held
  // stream goes on (its data is then garbage; the communicator is broken). Host stores only.
  void releaseWaits();
  // Steps issued so far.
  uint64_t stepsIssued() const { return next_; }

 private:
  TriggerRing() = default;
  uint32_t* ready(int dst, int src) const { return flags_.word(size_t(dst) * n_ + src); }
  uint32_t* consumed(int owner, int reader) const {
    return flags_.word(size_t(n_) * n_ + size_t(owner) * n_ + reader);
  }
  uint32_t* chain(int r) const { return flags_.word(2 * size_t(n_) * n_ + r); }
  static size_t flagWords(int n) { return 2 * size_t(n) * n + n; }
  bool allPassed();
  bool peersReadAll() const;
  // This rank's part of make(): the flags, the window and the peers' windows.
  Result open(zcollComm* comm, int flagsPid, int flagsFd, PeerMemory& pm,
              const std::vector<ExposedRange>& windows);

  int n_ = 0, me_ = 0;
  int timeoutMs_ = 0;
  const std::atomic<bool>* aborting_ = nullptr;
  SharedFlags flags_;
  char* window_ = nullptr;
  std::vector<const char*> peerWindows_;
  size_t slotBytes_ = 0, accBytes_ = 0;
  uint64_t next_ = 0;  // steps issued (the last one's number; flags hold its low 32 bits)
  std::map<uintptr_t, std::shared_ptr<StreamMark>> marks_;  // per stream, its newest
  std::vector<std::shared_ptr<StreamMark>> unkeyed_;         // streams without a shared key
};

}  // namespace zcoll
