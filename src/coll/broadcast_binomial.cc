// Binomial-tree broadcast (small messages).
//   Relative to the root, rank v receives from v - 2^k (its lowest set bit) and then sends to
//   v + 2^j for each 2^j below that bit. ceil(log2 W) steps.
#include "base/dtype.h"
#include "coll/coll.h"

namespace zcoll {

Result broadcastBinomial(zcollComm* comm, const CollArgs& a) {
  const int w = comm->nranks;
  const int vr = (comm->rank - a.root + w) % w;
  const size_t bytes = a.count * dtypeSize(a.dtype);
  Stage st(comm, *a.exec);
  if (vr == 0) ZCOLL_CHECK(st.copy(a.recv, a.send, bytes));
  auto real = [&](int v) { return (v + a.root) % w; };
  int mask = 1;
  for (; mask < w; mask <<= 1) {
    if (vr & mask) {
      RequestList reqs(1);
      ZCOLL_CHECK(st.recv(real(vr - mask), a.recv, bytes, 0, reqs.next()));
      ZCOLL_CHECK(st.wait(reqs));
      break;
    }
  }
  RequestList reqs(32);
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < w) ZCOLL_CHECK(st.send(real(vr + mask), a.recv, bytes, 0, reqs.next()));
  return st.wait(reqs);
}

}  // namespace zcoll
