// One round of messages between ranks of an existing communicator over its own connections, on
// point-to-point tags no collective uses, for the calls that make a new communicator from it
// without a rendezvous: zcollCommShrink (core/shrink.h) and zcollCommGrow (core/grow.h). It
// works on a broken or revoked comm: failure notices are not a reason to stop (every rank of a
// shrink saw its parent break); what ends the wait early is a peer of the round going down (its
// process ended on this machine, its transport reported it, it destroyed or aborted its comm:
// whyPeerGone, core/progress.h), checked every 50 ms, or the comm's timeout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/comm.h"

namespace zcoll {

// What a round's failures say, and its tags.
struct ExchangeContext {
  const char* fn;      // the entry point, first in every message: "zcollCommShrink"
  const char* during;  // "during the shrink"
  const char* retry;   // what to do when a peer is gone: "call zcollCommShrink again without it"
  const char* whoWaits;  // the peers a timeout waited for: "the other ranks that stay"
  const char* whyLate;   // why they may be late: "a rank that stays did not call ..."
  // The tag of a message from `src`; `attempt` keeps a later call from taking a message of an
  // earlier, failed one.
  uint64_t (*tag)(uint32_t attempt, int src, uint32_t step);
  uint32_t attempt;
  int extraWaitSec = 0;  // waited beyond the comm's timeout (a peer that waits on a third party)
};

class MemberExchange {
 public:
  MemberExchange(zcollComm* comm, const ExchangeContext& ctx, uint32_t step);
  ~MemberExchange();  // cancels what is still pending (an error path)
  MemberExchange(const MemberExchange&) = delete;
  MemberExchange& operator=(const MemberExchange&) = delete;

  // Sends `mine` to every rank of `to` and receives bytes[p] bytes from every rank p of `from`
  // (this rank skipped in both), then waits for all of it. Call once.
  Result run(const std::vector<int>& to, const std::string& mine, const std::vector<int>& from,
             const std::vector<size_t>& bytes);
  // Every rank of `ranks` to every other.
  Result run(const std::vector<int>& ranks, const std::string& mine,
             const std::vector<size_t>& bytes) {
    return run(ranks, mine, ranks, bytes);
  }
  // What rank p sent (after run).
  const std::string& from(int p) const { return theirs_[p]; }

 private:
  Result waitForPeers();

  zcollComm* comm_;
  ExchangeContext ctx_;
  uint32_t step_;
  std::vector<std::string> theirs_;  // by comm rank
  std::vector<Request> reqs_;        // sized once: transports hold pointers into it
  size_t posted_ = 0;
};

}  // namespace zcoll
