#include "core/progress.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/params.h"
#include "base/process.h"
#include "core/peer_notice.h"

namespace zcoll {

using Clock = std::chrono::steady_clock;

namespace {


Result checkPeer(zcollComm* comm, int peer) {
  if (peer < 0 || peer >= comm->nranks || comm->route[peer] == nullptr)
    return fail(zcollInternalError, "no route to rank %d", peer);
  return zcollSuccess;
}

void cancelPending(Request* reqs, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!reqs[i].complete() && reqs[i].transport != nullptr) reqs[i].transport->cancel(&reqs[i]);
}

// In lifecycle order: the device transports after their host routes.
Result progressAll(zcollComm* comm) {
  for (const auto& t : comm->transportList) ZCOLL_CHECK(t->progress());
  return zcollSuccess;
}

// A transfer with `peer` failed with `error`: say so in terms of what the peers told us (a
// close or failure notice may be waiting to be matched), and record the cause.
Result explainPeerFailure(zcollComm* comm, int peer, Result error) {
  progressAll(comm);
  if (noticeFrom(comm, peer) == Notice::kClosed) {
    recordFailureCause(comm, peer, true);
    return fail(zcollRemoteError, "rank %d: rank %d (pid %d on %s) destroyed its communicator",
                comm->rank, peer, comm->peers[peer].pid, comm->peers[peer].hostName);
  }
  int reporter = noticeFrom(comm, peer) == Notice::kFailed ? peer : failedPeer(comm);
  if (reporter >= 0) {
    uint64_t word = comm->notices.inbox[2 * reporter + 1];
    recordFailureCause(comm, static_cast<int>(word >> 1), (word & 1) != 0);
    return failureReportedBy(comm, reporter);
  }
  recordFailureCause(comm, peer, false);
  return error;
}

// A post to `peer` failed: explain it, break the comm and tell every peer.
Result postFailed(zcollComm* comm, int peer, Result error) {
  Result r = explainPeerFailure(comm, peer, error);
  breakAndNotify(comm, r);
  return r;
}

}  // namespace

void countTransfer(zcollComm* comm, int peer, size_t bytes, bool sending) {
  zcollPath_t path = comm->pathTo(peer);
  auto& c = sending ? comm->stats.sent[path] : comm->stats.recv[path];
  c.fetch_add(bytes, std::memory_order_relaxed);
}

// Why a communicator broke, as a flight record's `reason`.
static const char* breakReason(const zcollComm* comm, Result error) {
  if (error == zcollTimeout) return "timeout";
  return comm->revoked.load() ? "revoke" : "error";
}

void breakComm(zcollComm* comm, Result error) {
  int expected = zcollSuccess;
  if (!comm->asyncError.compare_exchange_strong(expected, error)) return;
  // Every rank whose communicator breaks keeps its record (ZCOLL_DEBUG_DUMP, if set), with the
  // error it broke with; zcollCommAbort dumps its own ("abort").
  if (!comm->aborting.load()) dumpFlightRecord(comm, breakReason(comm, error));
}

void breakAndNotify(zcollComm* comm, Result error) {
  breakComm(comm, error);
  sendPeerNotices(comm, Notice::kFailed, kNoticeWaitMs);
}

// The transport for a message of a call on `kind` memory to or from `peer`: a device call's
// device route, else the host route. Empty messages take the host route whatever the kind (a
// count of 0 may come with a NULL buffer, which is host memory, on one side only).
static Result routeFor(const zcollComm* comm, int peer, MemKind kind, size_t bytes,
                       Transport** out) {
  *out = comm->route[peer];
  if (kind != MemKind::kDevice || bytes == 0) return zcollSuccess;
  if (!comm->deviceRouted(peer))
    return fail(zcollUnsupported, "rank %d cannot move device bytes to or from rank %d: %s",
                comm->rank, peer,
                comm->deviceRouteWhy.empty() ? "" : comm->deviceRouteWhy[peer].c_str());
  *out = comm->deviceRoute[peer];
  return zcollSuccess;
}

namespace {

// Orders a message of a call on `exec` after the call's work issued so far: a fence for a
// transport whose copies wait for one (*after), else the executor flushed.
Result orderAfterWork(Executor* exec, const Transport* t, size_t bytes,
                      std::shared_ptr<DeviceFence>* after) {
  if (exec == nullptr || bytes == 0) return zcollSuccess;
  if (t->waitsForFences()) return exec->fence(after);
  return exec->flush();
}

MemKind kindOf(const Executor* exec) {
  return exec != nullptr ? exec->memKind() : MemKind::kHost;
}

}  // namespace

Result postSend(zcollComm* comm, int peer, const void* buf, size_t bytes, uint64_t tag,
                Request* req, Executor* exec) {
  ZCOLL_CHECK(checkPeer(comm, peer));
  Transport* t = nullptr;
  ZCOLL_CHECK(routeFor(comm, peer, kindOf(exec), bytes, &t));
  std::shared_ptr<DeviceFence> after;
  ZCOLL_CHECK(orderAfterWork(exec, t, bytes, &after));
  countTransfer(comm, peer, bytes, true);
  Result r = after ? t->postSendAfter(peer, buf, bytes, tag, req, std::move(after))
                   : t->postSend(peer, buf, bytes, tag, req);
  req->receive = false;  // a Request may be reused across directions
  if (r != zcollSuccess) r = postFailed(comm, peer, r);
  return r;
}

Result postRecv(zcollComm* comm, int peer, void* buf, size_t bytes, uint64_t tag, Request* req,
                Executor* exec) {
  ZCOLL_CHECK(checkPeer(comm, peer));
  Transport* t = nullptr;
  ZCOLL_CHECK(routeFor(comm, peer, kindOf(exec), bytes, &t));
  std::shared_ptr<DeviceFence> after;
  ZCOLL_CHECK(orderAfterWork(exec, t, bytes, &after));
  countTransfer(comm, peer, bytes, false);
  Result r = after ? t->postRecvAfter(peer, buf, bytes, tag, req, std::move(after))
                   : t->postRecv(peer, buf, bytes, tag, req);
  req->receive = true;
  if (r != zcollSuccess) r = postFailed(comm, peer, r);
  return r;
}

const char* whyPeerGone(const zcollComm* comm, int peer) {
  if (peerLeft(comm, peer)) return "destroyed or aborted its communicator";
  if (comm->route[peer]->peerFailed(peer)) return "failed or disconnected";
  if (comm->sameMachine(peer) && processGone(comm->peers[peer].pid)) return "exited";
  return nullptr;
}

namespace {

// A peer is down when it said it failed, or it is gone (whyPeerGone).
bool peerDown(const zcollComm* comm, int peer) {
  if (peer == comm->rank) return false;
  return noticeFrom(comm, peer) != Notice::kNone || whyPeerGone(comm, peer) != nullptr;
}

// Watches the pending requests' peers. A down peer fails the wait only after a grace period
// of further progress, so data it delivered before leaving is still matched.
// A peer that reported a failure fails every wait at once: the operation cannot complete on
// every rank, and this rank's own notice passes the news on.
class PeerWatch {
 public:
  Result check(zcollComm* comm, Request* reqs, size_t n, Clock::time_point now) {
    if (now - lastCheck_ < std::chrono::milliseconds(50)) return zcollSuccess;
    lastCheck_ = now;
    int failed = failedPeer(comm);
    if (failed >= 0) return explainPeerFailure(comm, failed, zcollRemoteError);
    for (size_t i = 0; i < n; ++i) {
      if (reqs[i].complete() || !peerDown(comm, reqs[i].peer)) continue;
      if (downSince_ == Clock::time_point{}) downSince_ = now;
      if (now - downSince_ > std::chrono::milliseconds(200)) {
        bool closed = noticeFrom(comm, reqs[i].peer) == Notice::kClosed;
        recordFailureCause(comm, reqs[i].peer, closed);
        return fail(zcollRemoteError, "rank %d: rank %d (pid %d on %s) %s",
                    comm->rank, reqs[i].peer, comm->peers[reqs[i].peer].pid,
                    comm->peers[reqs[i].peer].hostName,
                    noticeFrom(comm, reqs[i].peer) == Notice::kClosed
                        ? "destroyed its communicator"
                        : "failed or disconnected");
      }
    }
    return zcollSuccess;
  }

 private:
  Clock::time_point lastCheck_{};
  Clock::time_point downSince_{};
};

// A peer that these (completed) receives came from and that reported a failure, or -1. A
// failing rank tells its peers before its call returns, so before its caller can free or reuse
// a buffer that a transfer UCX could not cancel still reads from: data from such a peer is not
// trusted. A completed send is not affected: the transport is done with its buffer, and the
// peer failing afterwards (e.g. on a size mismatch with that very message) is the peer's error.
int peerThatReportedFailure(const zcollComm* comm, const Request* reqs, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (reqs[i].transport != nullptr && reqs[i].receive &&
        noticeFrom(comm, reqs[i].peer) == Notice::kFailed)
      return reqs[i].peer;
  return -1;
}

}  // namespace

// Spin first (lowest latency); then sleep until the transport has events (UCX wakeup fd, shm
// doorbell), or, where it cannot block or the requests wait on several transports, yield and
// sleep a little longer each time up to 100 us. With more ranks than cores, waiting ranks must
// leave the CPU to the ranks that have work.
constexpr int kBlockMs = 10;  // deadlines, aborts and dead peers are noticed within this

// The one transport (self aside) that every pending request waits on, or null when they wait
// on several: a rank can sleep on one transport's events only, and only while no other
// transport has operations under way (othersPending).
Transport* soleTransport(const Request* reqs, size_t n) {
  Transport* sole = nullptr;
  for (size_t i = 0; i < n; ++i) {
    Transport* t = reqs[i].transport;
    if (reqs[i].complete() || t == nullptr || t->completesOnPost() || t == sole) continue;
    if (sole != nullptr) return nullptr;
    sole = t;
  }
  return sole;
}

// Whether a transport other than `waitOn` (and self) has operations under way.
bool othersPending(const zcollComm* comm, const Transport* waitOn) {
  for (const auto& t : comm->transportList)
    if (t.get() != waitOn && !t->completesOnPost() && t->pending()) return true;
  return false;
}

void backoff(zcollComm* comm, const Request* reqs, size_t n, int64_t polls, int64_t spinCount) {
  if (polls < spinCount) return;
  Transport* waitOn = soleTransport(reqs, n);
  if (waitOn != nullptr && !othersPending(comm, waitOn) && waitOn->waitForEvents(kBlockMs)) return;
  int64_t idle = polls - spinCount;
  if (idle < 64) {
    sched_yield();
    return;
  }
  int64_t us = idle / 64;
  std::this_thread::sleep_for(std::chrono::microseconds(us < 100 ? us : 100));
}

// The peers the incomplete requests wait on, e.g. "rank 3 (receive), rank 1 (send, receive)",
// in the order first met; at most 8 named, then how many more.
std::string pendingPeers(const Request* reqs, size_t n) {
  struct Waiting {
    int peer;
    bool send, receive;
  };
  std::vector<Waiting> peers;
  for (size_t i = 0; i < n; ++i) {
    if (reqs[i].complete()) continue;
    Waiting* w = nullptr;
    for (Waiting& x : peers)
      if (x.peer == reqs[i].peer) w = &x;
    if (w == nullptr) {
      peers.push_back({reqs[i].peer, false, false});
      w = &peers.back();
    }
    (reqs[i].receive ? w->receive : w->send) = true;
  }
  constexpr size_t kNamed = 8;
  std::string out;
  for (size_t i = 0; i < peers.size() && i < kNamed; ++i) {
    const Waiting& w = peers[i];
    out += (i ? ", " : "") + (w.peer >= 0 ? "rank " + std::to_string(w.peer) : "an unknown peer") +
           (w.send && w.receive ? " (send, receive)" : w.send ? " (send)" : " (receive)");
  }
  if (peers.size() > kNamed) out += " and " + std::to_string(peers.size() - kNamed) + " more";
  return out.empty() ? "no peer" : out;
}

namespace {

// The distinct peers of the incomplete requests, in the order first met.
std::vector<int> waitedPeers(const Request* reqs, size_t n) {
  std::vector<int> peers;
  for (size_t i = 0; i < n; ++i)
    if (!reqs[i].complete() && std::find(peers.begin(), peers.end(), reqs[i].peer) == peers.end())
      peers.push_back(reqs[i].peer);
  return peers;
}

// Tells the flight recorder which peers the running operation waits for, when that changes;
// clears it when the wait ends.
class WaitingNote {
 public:
  explicit WaitingNote(zcollComm* comm) : comm_(comm) {}
  ~WaitingNote() {
    if (noted_) comm_->recorder.setWaitingOn({});
  }
  // At most every 50 ms: a status query sees the change well within its 2 s.
  void update(const Request* reqs, size_t n, Clock::time_point now) {
    if (!comm_->recorder.enabled() || (noted_ && now - lastCheck_ < std::chrono::milliseconds(50)))
      return;
    lastCheck_ = now;
    std::vector<int> peers = waitedPeers(reqs, n);
    if (noted_ && peers == last_) return;
    comm_->recorder.setWaitingOn(peers);
    last_.swap(peers);
    noted_ = true;
  }

 private:
  zcollComm* comm_;
  bool noted_ = false;
  Clock::time_point lastCheck_;
  std::vector<int> last_;
};

}  // namespace

Result waitAll(zcollComm* comm, Request* reqs, size_t n) {
  const auto deadline = Clock::now() + std::chrono::seconds(comm->timeoutSec);
  const int64_t spinCount = comm->spinCount;
  PeerWatch watch;
  WaitingNote waiting(comm);
  for (int64_t polls = 0;; ++polls) {
    Result r = progressAll(comm);
    size_t done = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!reqs[i].complete()) continue;
      ++done;
      if (reqs[i].status != zcollSuccess && r == zcollSuccess) {
        r = reqs[i].status == zcollRemoteError
                ? explainPeerFailure(comm, reqs[i].peer, reqs[i].status)
                : reqs[i].status;
      }
    }
    if (r == zcollSuccess && done == n) {
      int failed = peerThatReportedFailure(comm, reqs, n);
      if (failed < 0) return zcollSuccess;
      r = explainPeerFailure(comm, failed, zcollRemoteError);
    }
    if (r == zcollSuccess && comm->aborting.load(std::memory_order_relaxed))
      r = fail(zcollRemoteError, "communicator %s was aborted", comm->name.c_str());
    if (r == zcollSuccess && comm->revoked.load(std::memory_order_relaxed))
      r = fail(zcollRemoteError, "communicator %s was revoked (zcollCommRevoke)",
               comm->name.c_str());
    if (r == zcollSuccess && (polls >= spinCount || (polls & 255) == 255)) {
      auto now = Clock::now();
      waiting.update(reqs, n, now);
      r = watch.check(comm, reqs, n, now);
      if (r == zcollSuccess && now > deadline)
        r = fail(zcollTimeout,
                 "rank %d waited more than %d s for %zu of %zu transfers, still waiting on %s "
                 "(a peer is stuck, or called a different collective: while the job runs, "
                 "`zcoll_info --status` names the rank behind and ZCOLL_CHECK_CALLS=on catches "
                 "mismatched calls; raise ZCOLL_TIMEOUT if it is just slow)",
                 comm->rank, comm->timeoutSec, n - done, n, pendingPeers(reqs, n).c_str());
    }
    if (r != zcollSuccess) {
      cancelPending(reqs, n);
      recordFailureCause(comm, comm->rank, false);  // if nobody else was to blame
      breakAndNotify(comm, r);
      return r;
    }
    backoff(comm, reqs, n, polls, spinCount);
  }
}

}  // namespace zcoll

namespace zcoll {
Result scratchGet(zcollComm* comm, const Executor& exec, size_t bytes, void** out) {
  Scratch& s = exec.memKind() == MemKind::kHost ? comm->scratch : comm->deviceScratch;
  return s.get(bytes, exec.memory(), out);
}
}  // namespace zcoll
