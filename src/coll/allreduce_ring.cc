// Ring all-reduce = ring reduce-scatter + ring all-gather.
//   The count is split into W balanced chunks (any count works); member i reduces chunk i
//   (fixed order, accumulator-type partials), then the reduced chunks are all-gathered in the
//   output type, so every rank ends with identical bits. 2(W-1)/W of the data per link.
#include "coll/coll.h"
#include "core/dtype.h"

namespace zcoll {

Result allReduceRing(zcollComm* comm, const CollArgs& a) {
  const int w = comm->nranks;
  const size_t es = dtypeSize(a.dtype);
  std::vector<size_t> elemOff(w + 1), byteOff(w + 1);
  for (int i = 0; i <= w; ++i) {
    elemOff[i] = a.count * i / w;
    byteOff[i] = elemOff[i] * es;
  }
  char* recv = static_cast<char*>(a.recv);
  const Group g = worldGroup(comm);
  {
    Stage st(comm);
    ZCOLL_CHECK(ringReduceScatterv(st, g, a.send, recv + byteOff[g.me], elemOff.data(), a.dtype,
                                   a.op));
  }
  Stage st(comm);
  return ringAllGatherv(st, g, recv, byteOff.data(), recv + byteOff[g.me]);
}

}  // namespace zcoll
