// Ring all-gather.
//   W-1 steps; at step s member i sends block (i - s) to i+1 and receives block (i - s - 1)
//   from i-1. Each block crosses each link once: bandwidth-optimal, latency W-1 hops.
#include "base/dtype.h"
#include "coll/coll.h"

namespace zcoll {

Result ringAllGatherv(const Stage& st, const Group& g, void* recv, const size_t* off,
                      const void* own) {
  const int w = g.size();
  char* base = static_cast<char*>(recv);
  char* mine = base + off[g.me];
  const size_t mineBytes = off[g.me + 1] - off[g.me];
  if (w == 1) {
    ZCOLL_CHECK(st.copy(mine, own, mineBytes));
    return zcollSuccess;
  }
  const int right = g.at(g.me + 1);
  const int left = g.at(g.me - 1);
  {  // Step 0 sends the own block from where it is and copies it into place meanwhile.
    int recvIdx = (g.me - 1 + w) % w;
    RequestList reqs(2);
    ZCOLL_CHECK(st.recv(left, base + off[recvIdx], off[recvIdx + 1] - off[recvIdx], 0, reqs.next()));
    ZCOLL_CHECK(st.send(right, own, mineBytes, 0, reqs.next()));
    ZCOLL_CHECK(st.copy(mine, own, mineBytes));
    ZCOLL_CHECK(st.wait(reqs));
  }
  for (int s = 1; s < w - 1; ++s) {
    int sendIdx = (g.me - s + w) % w;
    int recvIdx = (g.me - s - 1 + w) % w;
    ZCOLL_CHECK(st.exchange(right, base + off[sendIdx], off[sendIdx + 1] - off[sendIdx], left,
                            base + off[recvIdx], off[recvIdx + 1] - off[recvIdx],
                            static_cast<uint32_t>(s)));
  }
  return zcollSuccess;
}

Result allGatherRing(zcollComm* comm, const CollArgs& a) {
  std::vector<size_t> off = worldAllGatherOffsets(comm, a);
  Stage st(comm, *a.exec);
  return ringAllGatherv(st, worldGroup(comm), a.recv, off.data(), a.send);
}

}  // namespace zcoll
