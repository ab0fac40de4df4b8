#include "core/progress.h"

#include <sched.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/params.h"

namespace zcoll {

namespace {

void countBytes(zcollComm* comm, int peer, size_t bytes, bool sending) {
  zcollPath_t path = comm->pathTo(peer);
  auto& c = sending ? comm->stats.sent[path] : comm->stats.recv[path];
  c.fetch_add(bytes, std::memory_order_relaxed);
}

Result checkPeer(zcollComm* comm, int peer) {
  if (peer < 0 || peer >= comm->nranks || comm->route[peer] == nullptr)
    return fail(zcollInternalError, "no route to rank %d", peer);
  return zcollSuccess;
}

void cancelPending(Request* reqs, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!reqs[i].complete() && reqs[i].transport != nullptr) reqs[i].transport->cancel(&reqs[i]);
}

Result progressAll(zcollComm* comm) {
  ZCOLL_CHECK(comm->self.progress());
  if (comm->net) ZCOLL_CHECK(comm->net->progress());
  return zcollSuccess;
}

}  // namespace

void breakComm(zcollComm* comm, Result error) {
  int expected = zcollSuccess;
  comm->asyncError.compare_exchange_strong(expected, error);
}

Result postSend(zcollComm* comm, int peer, const void* buf, size_t bytes, uint64_t tag,
                Request* req) {
  ZCOLL_CHECK(checkPeer(comm, peer));
  countBytes(comm, peer, bytes, true);
  Result r = comm->route[peer]->postSend(peer, buf, bytes, tag, req);
  if (r != zcollSuccess) breakComm(comm, r);
  return r;
}

Result postRecv(zcollComm* comm, int peer, void* buf, size_t bytes, uint64_t tag, Request* req) {
  ZCOLL_CHECK(checkPeer(comm, peer));
  countBytes(comm, peer, bytes, false);
  Result r = comm->route[peer]->postRecv(peer, buf, bytes, tag, req);
  if (r != zcollSuccess) breakComm(comm, r);
  return r;
}

Result waitAll(zcollComm* comm, Request* reqs, size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(comm->timeoutSec);
  const int64_t spinCount = paramInt("ZCOLL_SPIN_COUNT");
  for (int64_t polls = 0;; ++polls) {
    Result r = progressAll(comm);
    size_t done = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!reqs[i].complete()) continue;
      ++done;
      if (reqs[i].status != zcollSuccess) r = reqs[i].status;
    }
    if (r == zcollSuccess && done == n) return zcollSuccess;
    if (r == zcollSuccess && comm->aborting.load(std::memory_order_relaxed))
      r = fail(zcollRemoteError, "communicator %s was aborted", comm->name.c_str());
    if (r == zcollSuccess && (polls & 1023) == 1023 && std::chrono::steady_clock::now() > deadline)
      r = fail(zcollTimeout,
               "rank %d waited more than %d s for %zu of %zu transfers (a peer is stuck, dead, "
               "or called a different collective; raise ZCOLL_TIMEOUT if it is just slow)",
               comm->rank, comm->timeoutSec, n - done, n);
    if (r != zcollSuccess) {
      cancelPending(reqs, n);
      breakComm(comm, r);
      return r;
    }
    if (polls >= spinCount) sched_yield();
  }
}

void copyLocal(zcollComm* comm, void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  std::memmove(dst, src, bytes);
  comm->stats.sent[zcollPathSelf].fetch_add(bytes, std::memory_order_relaxed);
  comm->stats.recv[zcollPathSelf].fetch_add(bytes, std::memory_order_relaxed);
}

void* Scratch::get(size_t bytes) {
  if (bytes > size_) {
    std::free(ptr_);
    size_t want = bytes + bytes / 4;
    ptr_ = std::aligned_alloc(64, (want + 63) / 64 * 64);
    size_ = ptr_ != nullptr ? want : 0;
  }
  return ptr_;
}

void Scratch::release() {
  std::free(ptr_);
  ptr_ = nullptr;
  size_ = 0;
}

}  // namespace zcoll

namespace zcoll {
Result scratchGet(zcollComm* comm, size_t bytes, void** out) {
  *out = comm->scratch.get(bytes == 0 ? 1 : bytes);
  if (*out == nullptr) return fail(zcollSystemError, "out of memory for %zu bytes of scratch", bytes);
  return zcollSuccess;
}
}  // namespace zcoll
