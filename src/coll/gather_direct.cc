// Direct gather: every rank sends its block to the root, which has all W-1 receives posted at
//   once and copies its own block meanwhile. One step; the root's link carries (W-1)/W of the
//   result, the least any gather can.
#include "base/dtype.h"
#include "coll/coll.h"

namespace zcoll {

Result gatherDirect(zcollComm* comm, const CollArgs& a) {
  const int w = comm->nranks;
  const size_t bytes = a.count * dtypeSize(a.dtype);
  Stage st(comm, *a.exec);
  if (comm->rank != a.root) {
    RequestList reqs(1);
    ZCOLL_CHECK(st.send(a.root, a.send, bytes, 0, reqs.next()));
    return st.wait(reqs);
  }
  char* recv = static_cast<char*>(a.recv);
  RequestList reqs(w);
  for (int p = 0; p < w; ++p)
    if (p != a.root) ZCOLL_CHECK(st.recv(p, recv + p * bytes, bytes, 0, reqs.next()));
  ZCOLL_CHECK(st.copy(recv + a.root * bytes, a.send, bytes));  // nothing to do in place
  return st.wait(reqs);
}

}  // namespace zcoll
