// The buddy copy (zcollBuddyCopy): every rank sends its block to its buddy on the next node
// (NodeLayout::buddyOf) and receives its wards' blocks, one slot each in wardsOf order. One
// message per rank out, one per ward in, all posted at once.
#include "coll/shard_rebuild.h"

namespace zcoll {

Result buddyCopy(zcollComm* comm, const void* send, void* copy, size_t bytes) {
  const std::vector<int> wards = comm->layout.wardsOf(comm->rank);
  Stage st(comm, hostExecutor());
  RequestList reqs(wards.size() + 1);
  for (size_t i = 0; i < wards.size(); ++i)
    ZCOLL_CHECK(st.recv(wards[i], static_cast<char*>(copy) + i * bytes, bytes, 0, reqs.next()));
  ZCOLL_CHECK(st.send(comm->layout.buddyOf(comm->rank), send, bytes, 0, reqs.next()));
  return st.wait(reqs);
}

}  // namespace zcoll
