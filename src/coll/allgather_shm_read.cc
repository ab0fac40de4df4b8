// All-gather by reading the peers' blocks in place (every peer on this node, through its peer
// memory: coll/in_place.h).
//   Every member publishes its block (one small message to each other member), copies it into
//   its own place in the output, then copies every other member's block straight out of that
//   member's memory into its place: on the host one process_vm_readv per block, or, for a block
//   in zcollMemAllocHost memory, one memcpy from the mapped block (user-space speed, no kernel
//   copy; perf/LOG.md "registered buffers"); on a device one copy from the mapped block
//   (cuda_ipc). Members start at the next one so the reads spread over the owners. Last, the
//   members trade a done-token, so no one returns (and reuses its block) while a peer may still
//   read it. Without peer memory to every peer (or a block that cannot be reached) it runs the
//   ring.
#include "coll/in_place.h"

namespace zcoll {

Result allGatherShmRead(zcollComm* comm, const CollArgs& a) {
  const Group world = worldGroup(comm);
  if (!readsCallerBuffersInPlace(comm, world, *a.exec)) return allGatherRing(comm, a);
  const std::vector<size_t> off = worldAllGatherOffsets(comm, a);
  const int w = comm->nranks, me = comm->rank;
  char* out = static_cast<char*>(a.recv);
  const size_t mine = off[me + 1] - off[me];
  Stage st(comm, *a.exec);
  PeerBuffers blocks;
  ZCOLL_CHECK(blocks.publish(st, world, a.send, mine));
  if (!blocks.readable()) return allGatherRing(comm, a);
  ZCOLL_CHECK(st.copy(out + off[me], a.send, mine));  // nothing to do in place
  for (int k = 1; k < w; ++k) {
    const int p = (me + k) % w;
    const size_t bytes = off[p + 1] - off[p];
    ZCOLL_CHECK(blocks.read(st.exec(), p, 0, out + off[p], bytes));
    countTransfer(comm, p, bytes, false);
  }
  for (int p = 0; p < w; ++p)
    if (p != me) countTransfer(comm, p, mine, true);
  return blocks.release(st, 1);
}

}  // namespace zcoll
