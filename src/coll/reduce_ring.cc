// Reduce = ring reduce-scatter + gather of the reduced chunks at the root.
//   The same balanced chunks, order and accumulator as allReduceRing, so the root gets exactly
//   the bits zcollAllReduce's ring gives every rank. Each link carries (W-1)/W of the data in
//   the ring, then every rank sends its reduced chunk (1/W) to the root.
#include <memory>

#include "base/dtype.h"
#include "coll/coll.h"

namespace zcoll {

Result reduceRing(zcollComm* comm, const CollArgs& a) {
  const int w = comm->nranks;
  const BalancedChunks c = balancedChunks(a.count, w, dtypeSize(a.dtype));
  const std::vector<size_t>& byteOff = c.byte;
  const Group g = worldGroup(comm);
  const bool isRoot = comm->rank == a.root;
  char* recv = static_cast<char*>(a.recv);
  const size_t myBytes = byteOff[g.me + 1] - byteOff[g.me];
  // The root reduces its chunk in place in recvbuff; other ranks into a buffer of their own
  // (the comm's scratch belongs to the ring).
  std::unique_ptr<char[]> own(isRoot ? nullptr : new char[myBytes]);
  char* mine = isRoot ? recv + byteOff[g.me] : own.get();
  {
    Stage st(comm, *a.exec);
    ZCOLL_CHECK(ringReduceScatterv(st, g, a.send, mine, c.elem.data(), a.dtype, a.op));
  }
  Stage st(comm, *a.exec);
  if (!isRoot) {
    if (myBytes == 0) return zcollSuccess;
    RequestList reqs(1);
    ZCOLL_CHECK(st.send(a.root, mine, myBytes, 0, reqs.next()));
    return st.wait(reqs);
  }
  RequestList reqs(w);
  for (int p = 0; p < w; ++p) {
    const size_t bytes = byteOff[p + 1] - byteOff[p];
    if (p != a.root && bytes > 0) ZCOLL_CHECK(st.recv(p, recv + byteOff[p], bytes, 0, reqs.next()));
  }
  return st.wait(reqs);
}

}  // namespace zcoll
