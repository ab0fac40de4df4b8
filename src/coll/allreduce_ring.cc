// Ring all-reduce = ring reduce-scatter + ring all-gather.
//   The count is split into W balanced chunks (any count works); member i reduces chunk i
//   (fixed order, accumulator-type partials), then the reduced chunks are all-gathered in the
//   output type, so every rank ends with identical bits. 2(W-1)/W of the data per link.
#include "base/dtype.h"
#include "coll/coll.h"

namespace zcoll {

Result allReduceRing(zcollComm* comm, const CollArgs& a) {
  const BalancedChunks c = balancedChunks(a.count, comm->nranks, dtypeSize(a.dtype));
  char* recv = static_cast<char*>(a.recv);
  const Group g = worldGroup(comm);
  {
    Stage st(comm, *a.exec);
    ZCOLL_CHECK(ringReduceScatterv(st, g, a.send, recv + c.byte[g.me], c.elem.data(), a.dtype,
                                   a.op));
  }
  Stage st(comm, *a.exec);
  return ringAllGatherv(st, g, recv, c.byte.data(), recv + c.byte[g.me]);
}

}  // namespace zcoll
