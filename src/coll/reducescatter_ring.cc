// Ring reduce-scatter.
//   W-1 steps; at step s member i sends its partial of chunk (i - s - 1) to i+1, receives the
//   partial of chunk (i - s - 2) from i-1 and adds its own contribution. After the last step
//   member i holds chunk i reduced over all members, in the fixed order i+1, i+2, ..., i:
//   deterministic run to run. Each hop reduces in place in the receive buffer (no copies).
//   Partials of fp16/bf16 travel in fp32 (comm->partialsInDtype false, the default): the first
//   hop sends the input itself (exact in 16 bits), later hops fp32 partials, and the last hop
//   rounds once, so the result is the fp32 sum rounded once, as with reducescatter_direct.cc.
//   With ZCOLL_REDUCE_PARTIALS=dtype they travel in the data type (NCCL's choice: half the bytes
//   from the second hop on; the partial is rounded at every hop). Other types: in the data type.
#include <algorithm>

#include "coll/coll.h"
#include "exec/reduce_kernels.h"

namespace zcoll {

namespace {

struct RingChunks {
  const size_t* off;
  size_t chunk(int c) const { return off[c + 1] - off[c]; }
  size_t maxChunk(int w) const {
    size_t m = 0;
    for (int c = 0; c < w; ++c) m = std::max(m, chunk(c));
    return m;
  }
};

// Partials in the data type: out = op(partial, own), rounded to dtype at every hop.
Result ringPartialsInDtype(const Stage& st, const Group& g, const char* in, void* out,
                           const RingChunks& rc, zcollDataType_t dtype, zcollRedOp_t op) {
  const int w = g.size();
  const size_t es = dtypeSize(dtype);
  void* scratch = nullptr;
  ZCOLL_CHECK(scratchGet(st.comm(), st.exec(), 2 * rc.maxChunk(w) * es, &scratch));
  // Two partial buffers used in turn: step s receives into bufs[s % 2] while the partial it
  // reduced the step before (in bufs[(s + 1) % 2]) goes out.
  char* bufs[2] = {static_cast<char*>(scratch), static_cast<char*>(scratch) + rc.maxChunk(w) * es};
  const int right = g.at(g.me + 1), left = g.at(g.me - 1);
  const char* sendPtr = in + rc.off[(g.me - 1 + w) % w] * es;  // first partial: own chunk me-1
  for (int s = 0; s < w - 1; ++s) {
    int sendC = (g.me - s - 1 + w) % w, recvC = (g.me - s - 2 + w) % w;
    char* partial = bufs[s % 2];
    ZCOLL_CHECK(st.exchange(right, sendPtr, rc.chunk(sendC) * es, left, partial,
                            rc.chunk(recvC) * es, static_cast<uint32_t>(s)));
    // partial op= own chunk; the last hop writes the result (Avg: divided by W) into `out`.
    const bool last = s == w - 2;
    ZCOLL_CHECK(st.exec().combine(last ? out : partial, partial, in + rc.off[recvC] * es, dtype,
                                  op, last ? w : 0, rc.chunk(recvC)));
    sendPtr = partial;
  }
  return zcollSuccess;
}

// fp16/bf16 with fp32 partials: hop 0 carries the input in the data type (exact), hops 1.. fp32
// partials; one rounding, at the end.
Result ringPartialsInFp32(const Stage& st, const Group& g, const char* in, void* out,
                          const RingChunks& rc, zcollDataType_t dtype, zcollRedOp_t op) {
  const int w = g.size();
  const size_t es = dtypeSize(dtype), as = accSize(dtype);
  const size_t slot = rc.maxChunk(w) * as;
  void* scratch = nullptr;
  ZCOLL_CHECK(scratchGet(st.comm(), st.exec(), 2 * slot, &scratch));
  // Hop 0 receives the neighbour's input into bufs[1] and reduces into bufs[0]; from then on
  // step s receives an fp32 partial into bufs[s % 2] and reduces it in place while the other
  // buffer's partial (step s-1) goes out.
  char* bufs[2] = {static_cast<char*>(scratch), static_cast<char*>(scratch) + slot};
  const int right = g.at(g.me + 1), left = g.at(g.me - 1);
  const char* sendPtr = in + rc.off[(g.me - 1 + w) % w] * es;
  for (int s = 0; s < w - 1; ++s) {
    int sendC = (g.me - s - 1 + w) % w, recvC = (g.me - s - 2 + w) % w;
    const size_t n = rc.chunk(recvC), wire = s == 0 ? es : as;
    char* recvBuf = bufs[s == 0 ? 1 : s % 2];
    ZCOLL_CHECK(st.exchange(right, sendPtr, rc.chunk(sendC) * wire, left, recvBuf, n * wire,
                            static_cast<uint32_t>(s)));
    const char* own = in + rc.off[recvC] * es;
    const bool last = s == w - 2;
    Executor& ex = st.exec();
    if (s == 0 && last) {  // two ranks: one combination, rounded once
      ZCOLL_CHECK(ex.combine(out, recvBuf, own, dtype, op, w, n));
    } else if (s == 0) {
      ZCOLL_CHECK(ex.toAcc(bufs[0], recvBuf, dtype, n));
      ZCOLL_CHECK(ex.accumulate(bufs[0], own, false, dtype, op, n));
      sendPtr = bufs[0];
    } else {
      ZCOLL_CHECK(ex.accumulate(recvBuf, own, false, dtype, op, n));
      if (last) ZCOLL_CHECK(ex.fromAcc(out, recvBuf, dtype, op, w, n));
      sendPtr = recvBuf;
    }
  }
  return zcollSuccess;
}

}  // namespace

Result ringReduceScatterv(const Stage& st, const Group& g, const void* send, void* out,
                          const size_t* off, zcollDataType_t dtype, zcollRedOp_t op) {
  const char* in = static_cast<const char*>(send);
  RingChunks rc{off};
  if (g.size() == 1) {
    ZCOLL_CHECK(st.copy(out, in + off[0] * dtypeSize(dtype), rc.chunk(0) * dtypeSize(dtype)));
    return zcollSuccess;
  }
  if (isHalfType(dtype) && !st.comm()->partialsInDtype)
    return ringPartialsInFp32(st, g, in, out, rc, dtype, op);
  return ringPartialsInDtype(st, g, in, out, rc, dtype, op);
}

Result reduceScatterRing(zcollComm* comm, const CollArgs& a) {
  std::vector<size_t> off(comm->nranks + 1);
  for (int i = 0; i <= comm->nranks; ++i) off[i] = i * a.count;
  Stage st(comm, *a.exec);
  return ringReduceScatterv(st, worldGroup(comm), a.send, a.recv, off.data(), a.dtype, a.op);
}

}  // namespace zcoll
