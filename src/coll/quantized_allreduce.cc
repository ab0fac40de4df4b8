// Quantized all-reduce (zcollQuantizedAllReduce, docs/ZEROPP.md "Quantized all-reduce"), from
// the ZeRO++ pieces, W ranks, count = W*C + T (coll/quantized_allreduce.h):
//   1. qgZ: the C-element chunks reduced (fp32 sums) and quantized in qgZ's two hops, by the
//      algorithm zcollQuantizedReduceScatter would pick (two_hop[_shm_read], or flat on unequal
//      nodes); rank r's reduced chunk lands in its own place of the output, out[r*C, (r+1)*C);
//   2. qwZ: the reduced chunks quantized once more (`bits`) by their owner and gathered round
//      the node-ordered ring; every rank, the owner included, writes the dequantized codes, so
//      every rank ends with the same bits;
//   3. the T < W tail elements: the exact all-reduce.
// With error feedback each quantization adds the residual it kept last time and keeps the new
// one (coll/feedback.h): step 1's first quantization and two-hop requantization (inside qgZ),
// step 2's owner quantization (here).
// The exact algorithm: zcollAllReduce's, chosen as zcollAllReduce chooses it (same bits).
#include "coll/quantized_allreduce.h"

#include <vector>

#include "base/dtype.h"
#include "coll/coll.h"
#include "coll/feedback.h"
#include "coll/zeropp_allgather.h"
#include "coll/zeropp_config.h"

namespace zcoll {

QarSplit qarSplit(const zcollComm* comm, size_t count) {
  QarSplit s;
  const size_t w = static_cast<size_t>(comm->nranks);
  s.chunk = count / w;
  s.tail = count - s.chunk * w;
  s.firstElems = w * s.chunk;
  const NodeLayout& lay = comm->layout;
  const bool twoHops = lay.uniform() && lay.nodes > 1 && lay.localSize(comm->rank) > 1;
  s.partialElems = twoHops ? static_cast<size_t>(lay.nodes) * s.chunk : 0;
  s.ownerElems = s.chunk;
  return s;
}

namespace {

// The exact all-reduce of `count` elements at send/recv, by zcollAllReduce's algorithm.
Result exactAllReduce(zcollComm* comm, const CollArgs& a, const void* send, void* recv,
                      size_t count) {
  const Algorithm* algo = nullptr;
  const size_t bytes = count * dtypeSize(a.dtype);
  ZCOLL_CHECK(selectAlgorithm(comm, CollKind::kAllReduce, bytes, a.exec->memKind(), &algo));
  CollArgs e{send, recv, count, a.dtype, a.op, 0};
  e.exec = a.exec;
  return algo->run(comm, e);
}

// Step 1: the chunks reduced by qgZ's algorithm into `mine`.
Result reduceChunks(zcollComm* comm, const CollArgs& a, const QarSplit& s, void* mine) {
  const Algorithm* algo = nullptr;
  ZCOLL_CHECK(selectAlgorithm(comm, CollKind::kQuantizedReduceScatter,
                              s.chunk * dtypeSize(a.dtype), a.exec->memKind(), &algo));
  CollArgs rs = a;
  rs.recv = mine;
  rs.count = s.chunk;
  return algo->run(comm, rs);
}

// Step 2: `mine` (this rank's reduced chunk, in the output) quantized and gathered into recv.
Result gatherChunks(zcollComm* comm, const CollArgs& a, const QarSplit& s, void* mine) {
  const Group g = nodeOrderedRing(comm);
  quant::QuantParams p = a.quant->inter;
  p.elementOffset = qarGatherIndex(comm->nranks, s.chunk, comm->rank);
  const size_t qb = quant::quantizedBytes(s.chunk, p);
  const bool feedback = a.ownerResidual != nullptr;
  void* base = nullptr;
  ZCOLL_CHECK(scratchGet(comm, *a.exec, qb * g.size() + (feedback ? s.chunk * sizeof(float) : 0),
                         &base));
  char* wire = static_cast<char*>(base);
  std::vector<size_t> outElem(g.size());
  for (int i = 0; i < g.size(); ++i) outElem[i] = static_cast<size_t>(g.ranks[i]) * s.chunk;
  const void* own = mine;
  if (feedback) {  // the owner's codes, made here with its residual; the ring sends them
    float* tmp = reinterpret_cast<float*>(wire + qb * g.size());  // qb: a multiple of 16
    ZCOLL_CHECK(quantizeWithFeedback(*a.exec, mine, a.dtype, s.chunk, p, a.ownerResidual, tmp,
                                     wire + g.me * qb));
    own = nullptr;
  }
  Stage st(comm, *a.exec);
  return quantizedRingAllGather(st, g, own, s.chunk, a.dtype, p, wire, a.recv, outElem.data());
}

}  // namespace

// Registry entries (registry.cc).
Result quantizedAllReduceQgzThenQwz(zcollComm* comm, const CollArgs& a) {
  const QarSplit s = qarSplit(comm, a.count);
  const size_t es = dtypeSize(a.dtype);
  if (s.chunk > 0) {
    char* mine = static_cast<char*>(a.recv) + comm->rank * s.chunk * es;
    ZCOLL_CHECK(reduceChunks(comm, a, s, mine));
    ZCOLL_CHECK(gatherChunks(comm, a, s, mine));
  }
  if (s.tail == 0) return zcollSuccess;
  const size_t at = s.firstElems * es;
  return exactAllReduce(comm, a, static_cast<const char*>(a.send) + at,
                        static_cast<char*>(a.recv) + at, s.tail);
}

Result quantizedAllReduceExact(zcollComm* comm, const CollArgs& a) {
  return exactAllReduce(comm, a, a.send, a.recv, a.count);
}

}  // namespace zcoll
