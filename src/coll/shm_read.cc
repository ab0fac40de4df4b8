#include "coll/shm_read.h"

#include <algorithm>

#include "coll/reduce_kernels.h"
#include "core/dtype.h"
#include "core/peer_notice.h"

namespace zcoll {

namespace {

constexpr size_t kPieceBytes = 128 * 1024;  // a piece and its accumulator stay in L2

}  // namespace

Result readPeer(zcollComm* comm, int peer, uint64_t addr, void* dst, size_t bytes) {
  Result r = comm->shm->read(peer, addr, dst, bytes);
  if (r != zcollSuccess) {
    breakComm(comm, r);
    sendPeerNotices(comm, Notice::kFailed, kNoticeWaitMs);
  }
  return r;
}

bool everyPeerOnShm(const zcollComm* comm) {
  if (!comm->shm) return false;
  for (int p = 0; p < comm->nranks; ++p)
    if (p != comm->rank && comm->route[p] != comm->shm.get()) return false;
  return true;
}

Result tradeAddresses(const Stage& st, zcollComm* comm, const void* mine,
                      std::vector<uint64_t>* addr) {
  const int w = comm->nranks, me = comm->rank;
  addr->assign(w, 0);
  (*addr)[me] = reinterpret_cast<uintptr_t>(mine);
  RequestList reqs(2 * static_cast<size_t>(w));
  for (int k = 1; k < w; ++k) {
    int p = (me + k) % w;
    ZCOLL_CHECK(st.recv(p, &(*addr)[p], sizeof(uint64_t), 0, reqs.next()));
    ZCOLL_CHECK(st.send(p, &(*addr)[me], sizeof(uint64_t), 0, reqs.next()));
  }
  return st.wait(reqs);
}

Result tradeTokens(const Stage& st, zcollComm* comm, uint32_t step) {
  const int w = comm->nranks, me = comm->rank;
  std::vector<uint8_t> tokens(w, 1);
  RequestList reqs(2 * static_cast<size_t>(w));
  for (int k = 1; k < w; ++k) {
    int p = (me + k) % w;
    ZCOLL_CHECK(st.recv(p, &tokens[p], 1, step, reqs.next()));
    ZCOLL_CHECK(st.send(p, &tokens[me], 1, step, reqs.next()));
  }
  return st.wait(reqs);
}

Result readAndReduce(zcollComm* comm, Executor& ex, const std::vector<uint64_t>& addr,
                     const char* in, size_t offset, size_t m, zcollDataType_t dtype,
                     zcollRedOp_t op, char* out) {
  const int w = comm->nranks, me = comm->rank;
  const size_t es = dtypeSize(dtype);
  const size_t pieceElems = std::max<size_t>(1, kPieceBytes / es);
  const size_t accOffset = (pieceElems * es + 63) / 64 * 64;
  void* scratch = nullptr;
  ZCOLL_CHECK(scratchGet(comm, accOffset + pieceElems * accSize(dtype), &scratch));
  char* buf = static_cast<char*>(scratch);
  char* acc = buf + accOffset;
  for (size_t done = 0; done < m; done += pieceElems) {
    const size_t k = std::min(pieceElems, m - done);
    const size_t at = offset + done * es;
    for (int p = 0; p < w; ++p) {
      const void* piece = in + at;
      if (p != me) {
        ZCOLL_CHECK(readPeer(comm, p, addr[p] + at, buf, k * es));
        piece = buf;
      }
      ZCOLL_CHECK(p == 0 ? ex.toAcc(acc, piece, dtype, k)
                         : ex.accumulate(acc, piece, false, dtype, op, k));
    }
    ZCOLL_CHECK(ex.fromAcc(out + done * es, acc, dtype, op, w, k));
  }
  return zcollSuccess;
}

void countPeerReads(zcollComm* comm, size_t bytes) {
  for (int p = 0; p < comm->nranks; ++p) {
    if (p == comm->rank) continue;
    countTransfer(comm, p, bytes, false);
    countTransfer(comm, p, bytes, true);
  }
}

}  // namespace zcoll
