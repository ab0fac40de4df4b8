// Reduce-scatter by reading the peers' inputs in place (every peer on this node, through its peer
// memory: coll/in_place.h).
//   Every member publishes its input to the others (one small message each), then builds its
//   output chunk piece by piece: for each piece it reads the matching piece of every member's
//   input straight from that member's memory (process_vm_readv into a cache-sized buffer, or,
//   for an input in zcollMemAllocHost memory or on a device, the mapped input itself) and
//   accumulates it in source order 0..W-1 (the direct algorithm's order: the same
//   bits, fp32 accumulation for 16-bit floats). Last, the members trade a done-token, so no one
//   returns (and reuses its input) while a peer may still read it. Per rank, each input byte of
//   its chunk is read once and the output written once: no received copy is written to memory
//   and read back, which is what the ring and the direct algorithm pay. Without peer memory to
//   every peer (or an input that cannot be reached) it runs the ring.
#include "base/dtype.h"
#include "coll/in_place.h"

namespace zcoll {

Result reduceScatterShmRead(zcollComm* comm, const CollArgs& a) {
  const Group world = worldGroup(comm);
  if (!readsCallerBuffersInPlace(comm, world, *a.exec)) return reduceScatterRing(comm, a);
  const size_t es = dtypeSize(a.dtype);
  const size_t chunk = a.count * es;
  const char* in = static_cast<const char*>(a.send);
  Stage st(comm, *a.exec);
  PeerBuffers inputs;
  ZCOLL_CHECK(inputs.publish(st, world, in, chunk * comm->nranks));
  if (!inputs.readable()) return reduceScatterRing(comm, a);
  ZCOLL_CHECK(readAndReduce(comm, st.exec(), inputs, comm->rank * chunk, a.count, a.dtype, a.op,
                            static_cast<char*>(a.recv)));
  countPeerReads(comm, world, chunk);
  return inputs.release(st, 1);
}

}  // namespace zcoll
