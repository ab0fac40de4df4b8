#include "coll/shm_read.h"

#include <algorithm>

#include "base/dtype.h"
#include "exec/bulk_copy.h"
#include "exec/reduce_kernels.h"
#include "transport/shm_transport.h"

namespace zcoll {

namespace {

constexpr size_t kPieceBytes = 128 * 1024;  // a piece and its accumulator stay in L2

}  // namespace

bool everyPeerOnShm(const zcollComm* comm, const Group& g) {
  if (comm->shmTransport() == nullptr) return false;
  for (int p : g.ranks)
    if (p != comm->rank && comm->route[p] != comm->shmTransport()) return false;
  return true;
}

bool everyPeerOnShm(const zcollComm* comm) { return everyPeerOnShm(comm, worldGroup(comm)); }

// Sends this member's item (items + g.me * itemBytes) to every other member of g and receives
// member p's into items + p * itemBytes.
Result tradeItems(const Stage& st, const Group& g, uint32_t step, void* items, size_t itemBytes) {
  char* at = static_cast<char*>(items);
  RequestList reqs(2 * static_cast<size_t>(g.size()));
  for (int k = 1; k < g.size(); ++k) {
    int p = (g.me + k) % g.size();
    ZCOLL_CHECK(st.recv(g.ranks[p], at + p * itemBytes, itemBytes, step, reqs.next()));
    ZCOLL_CHECK(st.send(g.ranks[p], at + g.me * itemBytes, itemBytes, step, reqs.next()));
  }
  return st.wait(reqs);
}

Result PeerBuffers::publish(const Stage& st, const Group& g, const void* mine, size_t bytes) {
  return publishAs(st, g, mine, bytes, false);
}

Result PeerBuffers::publishWritable(const Stage& st, const Group& g, void* mine, size_t bytes) {
  ZCOLL_CHECK(publishAs(st, g, mine, bytes, true));
  if (published_[g.me].region.fd >= 0) writable_[g.me] = static_cast<char*>(mine);
  return zcollSuccess;
}

Result PeerBuffers::publishAs(const Stage& st, const Group& g, const void* mine, size_t bytes,
                              bool write) {
  comm_ = st.comm();
  ranks_ = g.ranks;
  published_.assign(g.size(), Published{});
  published_[g.me] = Published{reinterpret_cast<uintptr_t>(mine), bytes,
                               shm::findHostMemory(mine, bytes)};
  ZCOLL_CHECK(tradeItems(st, g, 0, published_.data(), sizeof(Published)));
  view_.assign(g.size(), nullptr);
  view_[g.me] = static_cast<const char*>(mine);
  writable_.assign(g.size(), nullptr);
  maps_.clear();
  maps_.resize(g.size());
  for (int i = 0; i < g.size(); ++i) {
    const Published& p = published_[i];
    if (i == g.me) continue;
    if (p.region.fd < 0 || p.bytes == 0) {
      comm_->shmTransport()->noteFrees(ranks_[i], p.region.frees);
      continue;
    }
    ZCOLL_CHECK(comm_->shmTransport()->mapRegistered(ranks_[i], p.region, p.bytes, write,
                                                     &maps_[i], &view_[i]));
    if (write) writable_[i] = maps_[i]->writableBase() + (view_[i] - maps_[i]->base());
  }
  return zcollSuccess;
}

Result PeerBuffers::read(int i, size_t offset, void* dst, size_t bytes) const {
  if (offset > published_[i].bytes || bytes > published_[i].bytes - offset)
    return fail(zcollInternalError, "shm read: %zu bytes at %zu lie outside the %llu bytes rank "
                "%d published", bytes, offset,
                static_cast<unsigned long long>(published_[i].bytes), ranks_[i]);
  if (view_[i] != nullptr) {
    bulkCopy(dst, view_[i] + offset, bytes);
    return zcollSuccess;
  }
  return comm_->shmTransport()->read(ranks_[i], published_[i].addr + offset, dst, bytes);
}

Result tradeTokens(const Stage& st, const Group& g, uint32_t step) {
  std::vector<uint8_t> tokens(g.size(), 1);
  return tradeItems(st, g, step, tokens.data(), 1);
}

Result shareWindows(const Stage& st, const Group& g, const shm::WindowRef& mine, const char* myBase,
                    uint32_t step, std::vector<const char*>* base) {
  std::vector<shm::WindowRef> refs(g.size());
  refs[g.me] = mine;
  ZCOLL_CHECK(tradeItems(st, g, step, refs.data(), sizeof(shm::WindowRef)));
  base->assign(g.size(), myBase);
  for (int p = 0; p < g.size(); ++p)
    if (p != g.me) ZCOLL_CHECK(st.comm()->shmTransport()->peerWindow(g.ranks[p], refs[p], &(*base)[p]));
  return zcollSuccess;
}

Result readAndReduce(zcollComm* comm, Executor& ex, const PeerBuffers& in, size_t offset,
                     size_t m, zcollDataType_t dtype, zcollRedOp_t op, char* out,
                     const std::vector<char*>& copies) {
  const int w = comm->nranks;
  const size_t es = dtypeSize(dtype);
  const size_t pieceElems = std::max<size_t>(1, kPieceBytes / es);
  const size_t accOffset = (pieceElems * es + 63) / 64 * 64;
  void* scratch = nullptr;
  ZCOLL_CHECK(scratchGet(comm, ex, accOffset + pieceElems * accSize(dtype), &scratch));
  char* buf = static_cast<char*>(scratch);
  char* acc = buf + accOffset;
  for (size_t done = 0; done < m; done += pieceElems) {
    const size_t k = std::min(pieceElems, m - done);
    const size_t at = offset + done * es;
    for (int p = 0; p < w; ++p) {
      const void* piece = in.view(p) != nullptr ? in.view(p) + at : buf;
      if (piece == buf) ZCOLL_CHECK(in.read(p, at, buf, k * es));
      ZCOLL_CHECK(p == 0 ? ex.toAcc(acc, piece, dtype, k)
                         : ex.accumulate(acc, piece, false, dtype, op, k));
    }
    ZCOLL_CHECK(ex.fromAcc(out + done * es, acc, dtype, op, w, k));
    // Plain stores, to pieces in cache: streaming them measured 1.9x slower at 4 MiB and no
    // better from 16 MiB (perf/RESULTS.md, "write to peers").
    for (char* copy : copies) ZCOLL_CHECK(ex.copy(copy + done * es, out + done * es, k * es));
  }
  return zcollSuccess;
}

void countPeerReads(zcollComm* comm, const Group& g, size_t bytes) {
  for (int p : g.ranks) {
    if (p == comm->rank) continue;
    countTransfer(comm, p, bytes, false);
    countTransfer(comm, p, bytes, true);
  }
}

}  // namespace zcoll
