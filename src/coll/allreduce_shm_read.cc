// All-reduce by reading the peers in place (every peer on this node, through its peer memory:
// coll/in_place.h).
//   The count is split into W balanced chunks. Members publish their input and output (host:
//   by address, and by region too when in zcollMemAllocHost memory, read with plain loads;
//   device: mapped by the peers through cuda_ipc); member i reduces chunk i reading every member's input in place, piece by piece, in rank order (as
//   reducescatter_shm_read.cc), into its output. Then one of two ends:
//   - every output writable from every member (registered host memory, or device memory
//     mapped through cuda_ipc): each reduced piece is also stored, while in cache, into the
//     same place of every other member's output (mapped writable), and one token from every
//     member ends the call: nothing is read twice. In place is safe: member i
//     alone reads chunk i of any input, and it writes a piece of it only after reading it.
//   - otherwise (gather): after a token from every member (every chunk reduced, and no one
//     reads an input any more: an in-place call may now overwrite it), each member copies the
//     other reduced chunks straight from their owners' outputs (one process_vm_readv or memcpy
//     each), and a last token releases the outputs.
//   Every rank ends with identical bits either way (the same reduction, copied). Without peer
//   memory to every peer (or a buffer that cannot be reached) it runs the ring.
#include "base/dtype.h"
#include "coll/in_place.h"

namespace zcoll {

namespace {

// Copies every other member's reduced chunk from its output into this rank's output.
Result gatherChunks(zcollComm* comm, Executor& ex, const PeerBuffers& outputs,
                    const BalancedChunks& c, char* out) {
  for (int k = 1; k < comm->nranks; ++k) {
    int p = (comm->rank + k) % comm->nranks;
    size_t bytes = c.byte[p + 1] - c.byte[p];
    if (bytes == 0) continue;
    ZCOLL_CHECK(outputs.read(ex, p, c.byte[p], out + c.byte[p], bytes));
    countTransfer(comm, p, bytes, false);
    countTransfer(comm, p, c.byte[comm->rank + 1] - c.byte[comm->rank], true);
  }
  return zcollSuccess;
}

// Every member's output can be written from here (all of them registered).
bool everyOutputWritable(const PeerBuffers& outputs, int w) {
  for (int p = 0; p < w; ++p)
    if (outputs.writable(p) == nullptr) return false;
  return true;
}

// Reduces this rank's chunk into every member's output.
Result reduceIntoEveryOutput(zcollComm* comm, const Stage& st, const PeerBuffers& inputs,
                             const PeerBuffers& outputs, const CollArgs& a,
                             const BalancedChunks& c) {
  const int me = comm->rank;
  std::vector<char*> copies;
  for (int p = 0; p < comm->nranks; ++p)
    if (p != me) copies.push_back(outputs.writable(p) + c.byte[me]);
  ZCOLL_CHECK(readAndReduce(comm, st.exec(), inputs, c.byte[me], c.elem[me + 1] - c.elem[me],
                            a.dtype, a.op, outputs.writable(me) + c.byte[me], copies));
  for (int p = 0; p < comm->nranks; ++p) {
    if (p == me) continue;
    countTransfer(comm, p, c.byte[me + 1] - c.byte[me], true);
    countTransfer(comm, p, c.byte[p + 1] - c.byte[p], false);
  }
  return zcollSuccess;
}

}  // namespace

Result allReduceShmRead(zcollComm* comm, const CollArgs& a) {
  const Group world = worldGroup(comm);
  if (!readsCallerBuffersInPlace(comm, world, *a.exec)) return allReduceRing(comm, a);
  const int me = comm->rank;
  const BalancedChunks c = balancedChunks(a.count, comm->nranks, dtypeSize(a.dtype));
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  Stage st(comm, *a.exec);
  const size_t bytes = a.count * dtypeSize(a.dtype);
  PeerBuffers inputs, outputs;
  ZCOLL_CHECK(inputs.publish(st, world, in, bytes));
  ZCOLL_CHECK(outputs.publishWritable(st, world, out, bytes));
  if (!inputs.readable() || !outputs.readable()) return allReduceRing(comm, a);
  if (everyOutputWritable(outputs, comm->nranks)) {
    ZCOLL_CHECK(reduceIntoEveryOutput(comm, st, inputs, outputs, a, c));
    countPeerReads(comm, world, c.byte[me + 1] - c.byte[me]);
    return outputs.release(st, 1);
  }
  ZCOLL_CHECK(readAndReduce(comm, st.exec(), inputs, c.byte[me], c.elem[me + 1] - c.elem[me],
                            a.dtype, a.op, out + c.byte[me]));
  countPeerReads(comm, world, c.byte[me + 1] - c.byte[me]);
  ZCOLL_CHECK(inputs.release(st, 1));
  ZCOLL_CHECK(gatherChunks(comm, st.exec(), outputs, c, out));
  return outputs.release(st, 2);
}

}  // namespace zcoll
