#include "core/peer_notice.h"

#include <chrono>
#include <string>
#include <thread>

#include "base/log.h"
#include "base/tags.h"

namespace zcoll {

namespace {

constexpr size_t kNoticeBytes = 2 * sizeof(uint64_t);

uint64_t encode(Notice kind, int code) {
  return (uint64_t{static_cast<uint32_t>(kind)} << 32) | static_cast<uint32_t>(code);
}

Notice kindOf(uint64_t word) { return static_cast<Notice>(word >> 32); }

bool anyPending(const std::vector<Request>& reqs) {
  for (const Request& r : reqs)
    if (r.transport != nullptr && !r.complete()) return true;
  return false;
}

void progressTransports(zcollComm* comm) {
  for (Transport* t : comm->transports()) t->progress();
}

// Progresses until `sends` have left, at most `waitMs`.
void waitForSends(zcollComm* comm, const std::vector<Request>& sends, int waitMs) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs);
  while (anyPending(sends) && std::chrono::steady_clock::now() < deadline) {
    progressTransports(comm);
    std::this_thread::yield();
  }
  if (anyPending(sends))
    ZCOLL_INFO(LogSubsys::kNet, "rank %d: a notice to a peer did not leave within %d ms",
               comm->rank, waitMs);
}

}  // namespace

Result armPeerNotices(zcollComm* comm) {
  PeerNotices& n = comm->notices;
  n.inbox.assign(2 * static_cast<size_t>(comm->nranks), 0);
  n.recvs.assign(comm->nranks, Request{});
  n.sends.assign(comm->nranks, Request{});
  n.goneInbox.assign(comm->nranks, 0);
  n.goneRecvs.assign(comm->nranks, Request{});
  n.goneSends.assign(comm->nranks, Request{});
  for (int p = 0; p < comm->nranks; ++p) {
    if (p == comm->rank || comm->route[p] == nullptr) continue;
    ZCOLL_CHECK(comm->route[p]->postRecv(p, &n.inbox[2 * p], kNoticeBytes, makeNoticeTag(p),
                                         &n.recvs[p]));
    ZCOLL_CHECK(comm->route[p]->postRecv(p, &n.goneInbox[p], sizeof(uint64_t), makeGoneTag(p),
                                         &n.goneRecvs[p]));
  }
  n.armed = true;
  return zcollSuccess;
}

void sendPeerNotices(zcollComm* comm, Notice kind, int waitMs) {
  PeerNotices& n = comm->notices;
  if (!n.armed || n.sent != 0) return;  // once: after a close nothing follows, nor after a failure
  n.sent = static_cast<uint32_t>(kind);
  n.outbox[0] = encode(kind, comm->asyncError.load());
  int cause = n.causeRank >= 0 ? n.causeRank : comm->rank;
  n.outbox[1] = (uint64_t{static_cast<uint32_t>(cause)} << 1) | (n.causeClosed ? 1 : 0);
  for (int p = 0; p < comm->nranks; ++p) {
    if (p == comm->rank || comm->route[p] == nullptr) continue;
    if (noticeFrom(comm, p) == Notice::kClosed) continue;  // gone: nobody would read it
    if (comm->route[p]->postSend(p, n.outbox, kNoticeBytes, makeNoticeTag(comm->rank),
                                 &n.sends[p]) != zcollSuccess)
      n.sends[p].reset();
  }
  ZCOLL_INFO(LogSubsys::kNet, "rank %d told its peers: %s", comm->rank,
                  kind == Notice::kClosed ? "closed" : "failed");
  waitForSends(comm, n.sends, waitMs);
}

void sendGoneNotices(zcollComm* comm, int waitMs) {
  PeerNotices& n = comm->notices;
  if (!n.armed || n.sent != static_cast<uint32_t>(Notice::kFailed) || n.goneSent) return;
  n.goneSent = true;
  for (int p = 0; p < comm->nranks; ++p) {
    if (p == comm->rank || comm->route[p] == nullptr || peerLeft(comm, p)) continue;
    if (comm->route[p]->postSend(p, &n.goneOutbox, sizeof(uint64_t), makeGoneTag(comm->rank),
                                 &n.goneSends[p]) != zcollSuccess)
      n.goneSends[p].reset();
  }
  waitForSends(comm, n.goneSends, waitMs);
}

bool peerLeft(const zcollComm* comm, int peer) {
  const PeerNotices& n = comm->notices;
  if (noticeFrom(comm, peer) == Notice::kClosed) return true;
  if (!n.armed || peer < 0 || peer >= static_cast<int>(n.goneRecvs.size())) return false;
  const Request& r = n.goneRecvs[peer];
  return r.complete() && r.status == zcollSuccess;
}

Notice noticeFrom(const zcollComm* comm, int peer) {
  const PeerNotices& n = comm->notices;
  if (!n.armed || peer < 0 || peer >= static_cast<int>(n.recvs.size())) return Notice::kNone;
  const Request& r = n.recvs[peer];
  if (!r.complete() || r.status != zcollSuccess) return Notice::kNone;
  return kindOf(n.inbox[2 * peer]);
}

void recordFailureCause(zcollComm* comm, int rank, bool closed) {
  PeerNotices& n = comm->notices;
  if (n.causeRank >= 0) return;
  n.causeRank = rank;
  n.causeClosed = closed;
}

Result failureReportedBy(const zcollComm* comm, int peer) {
  uint64_t word = comm->notices.inbox[2 * peer + 1];
  int cause = static_cast<int>(word >> 1);
  bool closed = (word & 1) != 0;
  std::string why = cause == peer ? std::string("its communicator failed")
                    : closed      ? "rank " + std::to_string(cause) + " destroyed its communicator"
                                  : "rank " + std::to_string(cause) + " failed";
  return fail(zcollRemoteError, "rank %d: rank %d (pid %d on %s) reported that %s",
              comm->rank, peer, comm->peers[peer].pid, comm->peers[peer].hostName, why.c_str());
}

int failedPeer(const zcollComm* comm) {
  for (int p = 0; p < comm->nranks; ++p)
    if (noticeFrom(comm, p) == Notice::kFailed) return p;
  return -1;
}

void retirePeerNotices(zcollComm* comm) {
  PeerNotices& n = comm->notices;
  if (!n.armed) return;
  for (Request& r : n.recvs)
    if (r.transport != nullptr && !r.complete()) r.transport->cancel(&r);
  for (Request& r : n.sends)
    if (r.transport != nullptr && !r.complete()) r.transport->cancel(&r);
  for (std::vector<Request>* reqs : {&n.goneRecvs, &n.goneSends})
    for (Request& r : *reqs)
      if (r.transport != nullptr && !r.complete()) r.transport->cancel(&r);
  n.armed = false;
}

}  // namespace zcoll
