// Dissemination barrier.
//   ceil(log2 W) rounds; in round k rank i signals i + 2^k and waits for i - 2^k. After the
//   last round every rank has (transitively) heard from every other.
#include "coll/coll.h"

namespace zcoll {

Result barrierDissemination(zcollComm* comm) {
  const int w = comm->nranks;
  char token = 0, sink = 0;
  Stage st(comm, hostExecutor());  // no data work
  uint32_t round = 0;
  for (int dist = 1; dist < w; dist <<= 1, ++round) {
    ZCOLL_CHECK(st.exchange((comm->rank + dist) % w, &token, 0, (comm->rank - dist + w) % w, &sink,
                            0, round));
  }
  return zcollSuccess;
}

}  // namespace zcoll
