// Direct reduce-scatter.
//   Every member sends chunk j of its input to member j, all at once, and reduces the W
//   chunks it receives in source order 0..W-1 (fp32 accumulation for 16-bit floats). One step
//   of latency; each input element is rounded once. Best for small chunks.
#include "coll/coll.h"
#include "exec/reduce_kernels.h"

namespace zcoll {

Result reduceScatterDirect(zcollComm* comm, const CollArgs& a) {
  const int w = comm->nranks;
  const int me = comm->rank;
  const size_t es = dtypeSize(a.dtype);
  const size_t n = a.count;
  const char* in = static_cast<const char*>(a.send);
  void* scratch = nullptr;
  // The accumulator follows the pieces, aligned for its type (w * n 16-bit pieces may end at an
  // odd multiple of 2 bytes).
  const size_t accOffset = (w * n * es + 63) / 64 * 64;
  ZCOLL_CHECK(scratchGet(comm, *a.exec, accOffset + n * accSize(a.dtype), &scratch));
  char* pieces = static_cast<char*>(scratch);  // piece from rank p at p * n * es
  char* acc = pieces + accOffset;

  Stage st(comm, *a.exec);
  RequestList reqs(2 * static_cast<size_t>(w));
  for (int k = 1; k < w; ++k) {
    int p = (me + k) % w;
    ZCOLL_CHECK(st.recv(p, pieces + p * n * es, n * es, 0, reqs.next()));
  }
  for (int k = 1; k < w; ++k) {
    int p = (me + k) % w;
    ZCOLL_CHECK(st.send(p, in + p * n * es, n * es, 0, reqs.next()));
  }
  ZCOLL_CHECK(st.wait(reqs));

  auto piece = [&](int p) -> const void* { return p == me ? in + me * n * es : pieces + p * n * es; };
  Executor& ex = st.exec();
  ZCOLL_CHECK(ex.toAcc(acc, piece(0), a.dtype, n));
  for (int p = 1; p < w; ++p) ZCOLL_CHECK(ex.accumulate(acc, piece(p), false, a.dtype, a.op, n));
  return ex.fromAcc(a.recv, acc, a.dtype, a.op, w, n);
}

}  // namespace zcoll
