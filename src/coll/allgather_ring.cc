// Ring all-gather.
//   W-1 steps; at step s member i sends block (i - s) to i+1 and receives block (i - s - 1)
//   from i-1. Each block crosses each link once: bandwidth-optimal, latency W-1 hops.
#include "coll/coll.h"
#include "core/dtype.h"

namespace zcoll {

Result ringAllGatherv(const Stage& st, const Group& g, void* recv, const size_t* off) {
  const int w = g.size();
  char* base = static_cast<char*>(recv);
  const int right = g.at(g.me + 1);
  const int left = g.at(g.me - 1);
  for (int s = 0; s < w - 1; ++s) {
    int sendIdx = (g.me - s + w) % w;
    int recvIdx = (g.me - s - 1 + w) % w;
    ZCOLL_CHECK(st.exchange(right, base + off[sendIdx], off[sendIdx + 1] - off[sendIdx], left,
                            base + off[recvIdx], off[recvIdx + 1] - off[recvIdx],
                            static_cast<uint32_t>(s)));
  }
  return zcollSuccess;
}

Result allGatherRing(zcollComm* comm, const CollArgs& a) {
  std::vector<size_t> off = prepareWorldAllGather(comm, a);
  Stage st(comm);
  return ringAllGatherv(st, worldGroup(comm), a.recv, off.data());
}

}  // namespace zcoll
