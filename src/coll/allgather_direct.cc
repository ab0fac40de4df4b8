// Direct all-gather.
//   Every member sends its block to every other member at once and receives theirs in place:
//   one step of latency, W-1 concurrent flows per rank. Best for small blocks.
#include "base/dtype.h"
#include "coll/coll.h"

namespace zcoll {

Result directAllGatherv(const Stage& st, const Group& g, void* recv, const size_t* off,
                        const void* own) {
  const int w = g.size();
  char* base = static_cast<char*>(recv);
  RequestList reqs(2 * static_cast<size_t>(w));
  for (int k = 1; k < w; ++k) {  // start with the next member so flows spread out
    int i = (g.me + k) % w;
    ZCOLL_CHECK(st.recv(g.at(i), base + off[i], off[i + 1] - off[i], 0, reqs.next()));
  }
  const size_t mine = off[g.me + 1] - off[g.me];
  for (int k = 1; k < w; ++k) ZCOLL_CHECK(st.send(g.at(g.me + k), own, mine, 0, reqs.next()));
  ZCOLL_CHECK(st.copy(base + off[g.me], own, mine));  // while the transfers run
  return st.wait(reqs);
}

Result allGatherDirect(zcollComm* comm, const CollArgs& a) {
  std::vector<size_t> off = worldAllGatherOffsets(comm, a);
  Stage st(comm, *a.exec);
  return directAllGatherv(st, worldGroup(comm), a.recv, off.data(), a.send);
}

}  // namespace zcoll
