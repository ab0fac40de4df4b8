// Pairwise all-to-all with per-peer counts (all-to-all-v).
//   W-1 steps of perfect matchings as allToAllPairwise: at step s rank i sends its block for
//   (i + s) and receives the block of (i - s). Every pair exchanges a message, empty ones
//   included, so a count one side gives and the other does not expect fails as a size mismatch
//   on the receiver instead of waiting for a message that never comes.
#include "base/dtype.h"
#include "coll/coll.h"

namespace zcoll {

Result allToAllvPairwise(zcollComm* comm, const CollArgs& a) {
  const int w = comm->nranks;
  const int me = comm->rank;
  const size_t es = dtypeSize(a.dtype);
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  Stage st(comm, *a.exec);
  ZCOLL_CHECK(st.copy(recv + a.recvDispls[me] * es, send + a.sendDispls[me] * es,
                      a.sendCounts[me] * es));
  for (int s = 1; s < w; ++s) {
    int dst = (me + s) % w;
    int src = (me - s + w) % w;
    ZCOLL_CHECK(st.exchange(dst, send + a.sendDispls[dst] * es, a.sendCounts[dst] * es, src,
                            recv + a.recvDispls[src] * es, a.recvCounts[src] * es,
                            static_cast<uint32_t>(s)));
  }
  return zcollSuccess;
}

}  // namespace zcoll
