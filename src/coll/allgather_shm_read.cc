// All-gather by reading the peers' blocks in place (every peer on this node, over shm).
//   Every member publishes its block (one small message to each other member), copies it into
//   its own place in the output, then copies every other member's block straight out of that
//   member's memory into its place: one process_vm_readv per block, or, for a block in
//   zcollMemAllocHost memory, one memcpy from the mapped block (user-space speed, no kernel copy;
//   perf/RESULTS.md "registered buffers"). Members start at the next one so the reads spread over
//   the owners. Last, the members trade a done-token, so no one returns (and reuses its block)
//   while a peer may still read it. Without shm to every peer (or for device buffers) it runs
//   the ring.
#include "coll/shm_read.h"

namespace zcoll {

Result allGatherShmRead(zcollComm* comm, const CollArgs& a) {
  if (!everyPeerOnShm(comm) || a.exec != &hostExecutor()) return allGatherRing(comm, a);
  const std::vector<size_t> off = worldAllGatherOffsets(comm, a);
  const int w = comm->nranks, me = comm->rank;
  char* out = static_cast<char*>(a.recv);
  const size_t mine = off[me + 1] - off[me];
  const Group world = worldGroup(comm);
  Stage st(comm, *a.exec);
  PeerBuffers blocks;
  ZCOLL_CHECK(blocks.publish(st, world, a.send, mine));
  ZCOLL_CHECK(st.copy(out + off[me], a.send, mine));  // nothing to do in place
  for (int k = 1; k < w; ++k) {
    const int p = (me + k) % w;
    const size_t bytes = off[p + 1] - off[p];
    ZCOLL_CHECK(blocks.read(p, 0, out + off[p], bytes));
    countTransfer(comm, p, bytes, false);
  }
  for (int p = 0; p < w; ++p)
    if (p != me) countTransfer(comm, p, mine, true);
  return tradeTokens(st, world, 1);
}

}  // namespace zcoll
