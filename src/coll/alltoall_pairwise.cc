// Pairwise all-to-all.
//   W-1 steps; at step s rank i sends its block for (i + s) and receives the block from
//   (i - s). Each step is a perfect matching, so no rank is flooded; the own block is copied.
#include "base/dtype.h"
#include "coll/coll.h"

namespace zcoll {

Result allToAllPairwise(zcollComm* comm, const CollArgs& a) {
  const int w = comm->nranks;
  const int me = comm->rank;
  const size_t bytes = a.count * dtypeSize(a.dtype);
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  Stage st(comm, *a.exec);
  ZCOLL_CHECK(st.copy(recv + me * bytes, send + me * bytes, bytes));
  for (int s = 1; s < w; ++s) {
    int dst = (me + s) % w;
    int src = (me - s + w) % w;
    ZCOLL_CHECK(st.exchange(dst, send + dst * bytes, bytes, src, recv + src * bytes, bytes,
                            static_cast<uint32_t>(s)));
  }
  return zcollSuccess;
}

}  // namespace zcoll
