// Ring reduce-scatter.
//   W-1 steps; at step s member i sends its partial of chunk (i - s - 1) to i+1, receives the
//   partial of chunk (i - s - 2) from i-1 and adds its own contribution. After the last step
//   member i holds chunk i reduced over all members, in the fixed order i+1, i+2, ..., i:
//   deterministic run to run. Partials travel in the accumulator type (fp32 for 16-bit floats),
//   so 16-bit results are rounded once.
#include <algorithm>
#include <utility>

#include "coll/coll.h"
#include "coll/reduce_kernels.h"

namespace zcoll {

Result ringReduceScatterv(const Stage& st, const Group& g, const void* send, void* out,
                          const size_t* off, zcollDataType_t dtype, zcollRedOp_t op) {
  const int w = g.size();
  const size_t es = dtypeSize(dtype);
  const size_t as = accSize(dtype);
  const char* in = static_cast<const char*>(send);
  auto chunk = [&](int c) { return off[c + 1] - off[c]; };
  if (w == 1) {
    copyLocal(st.comm(), out, in + off[0] * es, chunk(0) * es);
    return zcollSuccess;
  }
  size_t maxChunk = 0;
  for (int c = 0; c < w; ++c) maxChunk = std::max(maxChunk, chunk(c));
  void* scratch = nullptr;
  ZCOLL_CHECK(scratchGet(st.comm(), 2 * maxChunk * as, &scratch));
  char* partial = static_cast<char*>(scratch);
  char* incoming = partial + maxChunk * as;

  // The first partial is this member's own chunk (me - 1); send it straight from the input
  // when no conversion is needed.
  int c0 = (g.me - 1 + w) % w;
  const void* outgoing = in + off[c0] * es;
  if (isHalfType(dtype)) {
    toAcc(partial, outgoing, dtype, chunk(c0));
    outgoing = partial;
  }
  const int right = g.at(g.me + 1);
  const int left = g.at(g.me - 1);
  for (int s = 0; s < w - 1; ++s) {
    int sendC = (g.me - s - 1 + w) % w;
    int recvC = (g.me - s - 2 + w) % w;
    ZCOLL_CHECK(st.exchange(right, outgoing, chunk(sendC) * as, left, incoming,
                            chunk(recvC) * as, static_cast<uint32_t>(s)));
    accumulate(incoming, in + off[recvC] * es, false, dtype, op, chunk(recvC));
    outgoing = incoming;
    std::swap(partial, incoming);
  }
  fromAcc(out, outgoing, dtype, op, w, chunk(g.me));
  return zcollSuccess;
}

Result reduceScatterRing(zcollComm* comm, const CollArgs& a) {
  std::vector<size_t> off(comm->nranks + 1);
  for (int i = 0; i <= comm->nranks; ++i) off[i] = i * a.count;
  Stage st(comm);
  return ringReduceScatterv(st, worldGroup(comm), a.send, a.recv, off.data(), a.dtype, a.op);
}

}  // namespace zcoll
