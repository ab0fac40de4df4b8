#include <algorithm>
#include <numeric>

#include "base/dtype.h"
#include "coll/coll.h"

namespace zcoll {

Group worldGroup(const zcollComm* comm) {
  Group g;
  g.ranks.resize(comm->nranks);
  std::iota(g.ranks.begin(), g.ranks.end(), 0);
  g.me = comm->rank;
  return g;
}

Group makeGroup(const zcollComm* comm, std::vector<int> ranks) {
  Group g;
  g.ranks = std::move(ranks);
  g.me = static_cast<int>(std::find(g.ranks.begin(), g.ranks.end(), comm->rank) - g.ranks.begin());
  return g;
}

std::vector<size_t> worldAllGatherOffsets(const zcollComm* comm, const CollArgs& a) {
  const size_t bytes = a.count * dtypeSize(a.dtype);
  std::vector<size_t> off(comm->nranks + 1);
  for (int i = 0; i <= comm->nranks; ++i) off[i] = i * bytes;
  return off;
}

Stage::Stage(zcollComm* comm, Executor& exec)
    : comm_(comm), exec_(&exec), seq_(comm->collSeq++) {}

Result Stage::send(int peer, const void* buf, size_t bytes, uint32_t step, Request* req) const {
  return postSend(comm_, peer, buf, bytes, makeCollTag(seq_, comm_->rank, step), req, exec_);
}

Result Stage::recv(int peer, void* buf, size_t bytes, uint32_t step, Request* req) const {
  return postRecv(comm_, peer, buf, bytes, makeCollTag(seq_, peer, step), req, exec_);
}

Result Stage::sendControl(int peer, const void* buf, size_t bytes, uint32_t step,
                          Request* req) const {
  ZCOLL_CHECK(exec_->flush());
  return postSend(comm_, peer, buf, bytes, makeCollTag(seq_, comm_->rank, step), req,
                  &hostExecutor());
}

Result Stage::recvControl(int peer, void* buf, size_t bytes, uint32_t step, Request* req) const {
  ZCOLL_CHECK(exec_->flush());
  return postRecv(comm_, peer, buf, bytes, makeCollTag(seq_, peer, step), req,
                  &hostExecutor());
}

Result Stage::wait(Request* reqs, size_t n) const { return waitAll(comm_, reqs, n); }

Result Stage::copy(void* dst, const void* src, size_t bytes) const {
  if (bytes == 0 || dst == src) return zcollSuccess;
  ZCOLL_CHECK(exec_->copy(dst, src, bytes));
  comm_->stats.sent[zcollPathSelf].fetch_add(bytes, std::memory_order_relaxed);
  comm_->stats.recv[zcollPathSelf].fetch_add(bytes, std::memory_order_relaxed);
  return zcollSuccess;
}

Result Stage::exchange(int sendPeer, const void* sbuf, size_t sbytes, int recvPeer, void* rbuf,
                       size_t rbytes, uint32_t step) const {
  RequestList reqs(2);
  ZCOLL_CHECK(recv(recvPeer, rbuf, rbytes, step, reqs.next()));
  ZCOLL_CHECK(send(sendPeer, sbuf, sbytes, step, reqs.next()));
  return wait(reqs);
}

BalancedChunks balancedChunks(size_t count, int w, size_t elemSize) {
  BalancedChunks c{std::vector<size_t>(w + 1), std::vector<size_t>(w + 1)};
  for (int i = 0; i <= w; ++i) {
    c.elem[i] = count * i / w;
    c.byte[i] = c.elem[i] * elemSize;
  }
  return c;
}

Slices makeSlices(size_t units, size_t unitBytes, size_t maxSlices) {
  constexpr size_t kSliceBytes = size_t{1} << 20, kMaxSlices = 16;
  const size_t want = (units * unitBytes + kSliceBytes - 1) / kSliceBytes;
  return Slices{units, std::max<size_t>(std::min({want, kMaxSlices, maxSlices}), 1)};
}

RequestList::~RequestList() {
  for (size_t i = 0; i < used_; ++i)
    if (!reqs_[i].complete() && reqs_[i].transport != nullptr) reqs_[i].transport->cancel(&reqs_[i]);
}

void RequestList::clear() {
  for (size_t i = 0; i < used_; ++i) reqs_[i].reset();
  used_ = 0;
}

}  // namespace zcoll
