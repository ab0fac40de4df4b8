// Recursive-doubling all-reduce (small messages).
//   With P the largest power of two <= W and R = W - P: the first 2R ranks pair up, even ones
//   hand their data to the odd ones and sit out. The P remaining ranks exchange full buffers
//   with partner (id XOR mask) for mask = 1, 2, ..., P/2, combining each time; then the odd
//   ranks hand the result back. log2(P) + 2 steps. Each combine is commutative, so both
//   partners compute identical bits and every rank ends with the same result.
#include "coll/coll.h"
#include "exec/reduce_kernels.h"

namespace zcoll {

namespace {

struct Shape {
  int p;  // power-of-two core size
  int r;  // ranks folded in
};

Shape shapeOf(int w) {
  int p = 1;
  while (p * 2 <= w) p *= 2;
  return Shape{p, w - p};
}

// Core id of a rank, -1 if it sits out.
int coreId(int rank, Shape s) {
  if (rank < 2 * s.r) return rank % 2 == 1 ? rank / 2 : -1;
  return rank - s.r;
}

int rankOfCore(int id, Shape s) { return id < s.r ? 2 * id + 1 : id + s.r; }

}  // namespace

Result allReduceRecursiveDoubling(zcollComm* comm, const CollArgs& a) {
  const int w = comm->nranks;
  const int me = comm->rank;
  const size_t n = a.count;
  const size_t bytes = n * accSize(a.dtype);
  void* scratch = nullptr;
  ZCOLL_CHECK(scratchGet(comm, *a.exec, 2 * bytes, &scratch));
  char* acc = static_cast<char*>(scratch);
  char* other = acc + bytes;
  const Shape s = shapeOf(w);
  const int id = coreId(me, s);
  Stage st(comm, *a.exec);
  Executor& ex = st.exec();
  ZCOLL_CHECK(ex.toAcc(acc, a.send, a.dtype, n));
  uint32_t step = 0;
  if (me < 2 * s.r) {  // fold: even -> odd
    if (id < 0) {
      RequestList reqs(1);
      ZCOLL_CHECK(st.send(me + 1, acc, bytes, step, reqs.next()));
      ZCOLL_CHECK(st.wait(reqs));
    } else {
      RequestList reqs(1);
      ZCOLL_CHECK(st.recv(me - 1, other, bytes, step, reqs.next()));
      ZCOLL_CHECK(st.wait(reqs));
      ZCOLL_CHECK(ex.accumulate(acc, other, true, a.dtype, a.op, n));
    }
  }
  ++step;
  if (id >= 0) {
    for (int mask = 1; mask < s.p; mask <<= 1, ++step) {
      int partner = rankOfCore(id ^ mask, s);
      ZCOLL_CHECK(st.exchange(partner, acc, bytes, partner, other, bytes, step));
      ZCOLL_CHECK(ex.accumulate(acc, other, true, a.dtype, a.op, n));
    }
  }
  step = 100;  // unfold: odd -> even (a step number no core round uses: P <= 2^24 rounds < 100)
  if (me < 2 * s.r) {
    RequestList reqs(1);
    if (id < 0) ZCOLL_CHECK(st.recv(me + 1, acc, bytes, step, reqs.next()));
    else ZCOLL_CHECK(st.send(me - 1, acc, bytes, step, reqs.next()));
    ZCOLL_CHECK(st.wait(reqs));
  }
  return ex.fromAcc(a.recv, acc, a.dtype, a.op, w, n);
}

}  // namespace zcoll
