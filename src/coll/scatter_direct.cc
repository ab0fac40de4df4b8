// Direct scatter: the root posts one send per rank at once and copies its own block; every
//   other rank receives its block. One step; the root's link carries (W-1)/W of the input.
#include "base/dtype.h"
#include "coll/coll.h"

namespace zcoll {

Result scatterDirect(zcollComm* comm, const CollArgs& a) {
  const int w = comm->nranks;
  const size_t bytes = a.count * dtypeSize(a.dtype);
  Stage st(comm, *a.exec);
  if (comm->rank != a.root) {
    RequestList reqs(1);
    ZCOLL_CHECK(st.recv(a.root, a.recv, bytes, 0, reqs.next()));
    return st.wait(reqs);
  }
  const char* send = static_cast<const char*>(a.send);
  RequestList reqs(w);
  for (int p = 0; p < w; ++p)
    if (p != a.root) ZCOLL_CHECK(st.send(p, send + p * bytes, bytes, 0, reqs.next()));
  ZCOLL_CHECK(st.copy(a.recv, send + a.root * bytes, bytes));  // nothing to do in place
  return st.wait(reqs);
}

}  // namespace zcoll
