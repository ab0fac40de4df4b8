// Ring reduce-scatter.
//   W-1 steps; at step s member i sends its partial of chunk (i - s - 1) to i+1, receives the
//   partial of chunk (i - s - 2) from i-1 and adds its own contribution. After the last step
//   member i holds chunk i reduced over all members, in the fixed order i+1, i+2, ..., i:
//   deterministic run to run. Partials travel in the data type (as NCCL: 16-bit types move 16
//   bits per element); each hop adds in fp32 and rounds the partial once, in place in the
//   receive buffer, so no hop copies data. reducescatter_direct.cc rounds only once in all.
#include <algorithm>

#include "coll/coll.h"
#include "coll/reduce_kernels.h"

namespace zcoll {

Result ringReduceScatterv(const Stage& st, const Group& g, const void* send, void* out,
                          const size_t* off, zcollDataType_t dtype, zcollRedOp_t op) {
  const int w = g.size();
  const size_t es = dtypeSize(dtype);
  const char* in = static_cast<const char*>(send);
  auto chunk = [&](int c) { return off[c + 1] - off[c]; };
  if (w == 1) {
    copyLocal(st.comm(), out, in + off[0] * es, chunk(0) * es);
    return zcollSuccess;
  }
  size_t maxChunk = 0;
  for (int c = 0; c < w; ++c) maxChunk = std::max(maxChunk, chunk(c));
  void* scratch = nullptr;
  ZCOLL_CHECK(scratchGet(st.comm(), 2 * maxChunk * es, &scratch));
  // Two partial buffers used in turn: step s receives into bufs[s % 2] while the partial it
  // reduced the step before (in bufs[(s + 1) % 2]) goes out.
  char* bufs[2] = {static_cast<char*>(scratch), static_cast<char*>(scratch) + maxChunk * es};

  const int right = g.at(g.me + 1);
  const int left = g.at(g.me - 1);
  const char* sendPtr = in + off[(g.me - 1 + w) % w] * es;  // first partial: own chunk me-1
  for (int s = 0; s < w - 1; ++s) {
    int sendC = (g.me - s - 1 + w) % w;
    int recvC = (g.me - s - 2 + w) % w;
    char* partial = bufs[s % 2];
    ZCOLL_CHECK(st.exchange(right, sendPtr, chunk(sendC) * es, left, partial, chunk(recvC) * es,
                            static_cast<uint32_t>(s)));
    // partial op= own chunk; the last hop writes the result (Avg: divided by W) into `out`.
    const bool last = s == w - 2;
    combineInto(last ? out : partial, partial, in + off[recvC] * es, dtype, op, last ? w : 0,
                chunk(recvC));
    sendPtr = partial;
  }
  return zcollSuccess;
}

Result reduceScatterRing(zcollComm* comm, const CollArgs& a) {
  std::vector<size_t> off(comm->nranks + 1);
  for (int i = 0; i <= comm->nranks; ++i) off[i] = i * a.count;
  Stage st(comm);
  return ringReduceScatterv(st, worldGroup(comm), a.send, a.recv, off.data(), a.dtype, a.op);
}

}  // namespace zcoll
