// Reduce-scatter by reading the peers' inputs in place (every peer on this node, over shm).
//   Every member sends the address of its input to the others (one small message each), then
//   builds its output chunk piece by piece: for each piece it reads the matching piece of every
//   member's input straight from that member's memory (process_vm_readv into a cache-sized
//   buffer) and accumulates it in source order 0..W-1 (the direct algorithm's order: the same
//   bits, fp32 accumulation for 16-bit floats). Last, the members trade a done-token, so no one
//   returns (and reuses its input) while a peer may still read it. Per rank, each input byte of
//   its chunk is read once and the output written once: no received copy is written to memory
//   and read back, which is what the ring and the direct algorithm pay. Without shm to every
//   peer (or for device buffers) it runs the ring.
#include <algorithm>
#include <cstdint>

#include "coll/coll.h"
#include "coll/reduce_kernels.h"
#include "core/dtype.h"
#include "core/peer_notice.h"

namespace zcoll {

namespace {

constexpr size_t kPieceBytes = 128 * 1024;  // a piece and its accumulator stay in L2

// Every member's input address, by rank.
Result tradeAddresses(const Stage& st, zcollComm* comm, const void* in,
                      std::vector<uint64_t>* addr) {
  const int w = comm->nranks, me = comm->rank;
  addr->assign(w, 0);
  (*addr)[me] = reinterpret_cast<uintptr_t>(in);
  RequestList reqs(2 * static_cast<size_t>(w));
  for (int k = 1; k < w; ++k) {
    int p = (me + k) % w;
    ZCOLL_CHECK(st.recv(p, &(*addr)[p], sizeof(uint64_t), 0, reqs.next()));
    ZCOLL_CHECK(st.send(p, &(*addr)[me], sizeof(uint64_t), 0, reqs.next()));
  }
  return st.wait(reqs);
}

// A token to and from every peer: after it, no peer reads this rank's input any more.
Result tradeDone(const Stage& st, zcollComm* comm) {
  const int w = comm->nranks, me = comm->rank;
  std::vector<uint8_t> tokens(w, 1);
  RequestList reqs(2 * static_cast<size_t>(w));
  for (int k = 1; k < w; ++k) {
    int p = (me + k) % w;
    ZCOLL_CHECK(st.recv(p, &tokens[p], 1, 1, reqs.next()));
    ZCOLL_CHECK(st.send(p, &tokens[me], 1, 1, reqs.next()));
  }
  return st.wait(reqs);
}

// A read failed (a peer died under it): break the comm and tell the peers, which wait for this
// rank's done-token.
Result readFailed(zcollComm* comm, Result r) {
  breakComm(comm, r);
  sendPeerNotices(comm, Notice::kFailed, kNoticeWaitMs);
  return r;
}

}  // namespace

bool everyPeerOnShm(const zcollComm* comm) {
  if (!comm->shm) return false;
  for (int p = 0; p < comm->nranks; ++p)
    if (p != comm->rank && comm->route[p] != comm->shm.get()) return false;
  return true;
}

Result reduceScatterShmRead(zcollComm* comm, const CollArgs& a) {
  if (!everyPeerOnShm(comm) || a.exec != &hostExecutor()) return reduceScatterRing(comm, a);
  const int w = comm->nranks, me = comm->rank;
  const size_t es = dtypeSize(a.dtype);
  const size_t n = a.count;
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  Stage st(comm, *a.exec);
  std::vector<uint64_t> addr;
  ZCOLL_CHECK(tradeAddresses(st, comm, in, &addr));

  const size_t pieceElems = std::max<size_t>(1, kPieceBytes / es);
  const size_t accOffset = (pieceElems * es + 63) / 64 * 64;
  void* scratch = nullptr;
  ZCOLL_CHECK(scratchGet(comm, accOffset + pieceElems * accSize(a.dtype), &scratch));
  char* buf = static_cast<char*>(scratch);
  char* acc = buf + accOffset;
  Executor& ex = st.exec();
  for (size_t off = 0; off < n; off += pieceElems) {
    const size_t m = std::min(pieceElems, n - off);
    const size_t at = (static_cast<size_t>(me) * n + off) * es;  // this piece in any input
    for (int p = 0; p < w; ++p) {
      const void* piece = in + at;
      if (p != me) {
        Result r = comm->shm->read(p, addr[p] + at, buf, m * es);
        if (r != zcollSuccess) return readFailed(comm, r);
        piece = buf;
      }
      ZCOLL_CHECK(p == 0 ? ex.toAcc(acc, piece, a.dtype, m)
                         : ex.accumulate(acc, piece, false, a.dtype, a.op, m));
    }
    ZCOLL_CHECK(ex.fromAcc(out + off * es, acc, a.dtype, a.op, w, m));
  }
  for (int p = 0; p < w; ++p) {
    if (p == me) continue;
    countTransfer(comm, p, n * es, false);  // read from p
    countTransfer(comm, p, n * es, true);   // p read as much from this rank
  }
  return tradeDone(st, comm);
}

}  // namespace zcoll
