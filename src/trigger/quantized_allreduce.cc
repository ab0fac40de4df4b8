// zcollQuantizedAllReduce triggered inside one node: coll/quantized_allreduce.cc's qgz_then_qwz
// bits (count = W * chunk + tail): qgZ's quantized reduce steps on the W chunks, rank r's reduced
// chunk to out[r * chunk, (r + 1) * chunk); the reduced chunks quantized once more by their
// owners (stochastic-rounding indices from qarGatherIndex) and gathered, every rank writing the
// dequantized codes; the tail all-reduced exactly. Error feedback as the host keeps it: the
// first quantization's residuals (a.firstResidual), the owner's (a.ownerResidual); one node has
// no two-hop requantization.
#include "base/dtype.h"
#include "base/result.h"
#include "coll/quantized_allreduce.h"
#include "coll/zeropp_config.h"
#include "trigger/collectives.h"

namespace zcoll {

Result triggeredQuantizedAllReduce(TriggerRing& ring, Executor& ex, const CollArgs& a,
                                   const ReduceOrder& tailOrder) {
  const int n = ring.nranks(), me = ring.me();
  const size_t es = dtypeSize(a.dtype);
  const size_t chunk = a.count / static_cast<size_t>(n), tail = a.count % static_cast<size_t>(n);
  char* recv = static_cast<char*>(a.recv);
  if (a.partialResidual != nullptr)
    return fail(zcollInternalError, "the quantized all-reduce on the trigger ring: a two-hop "
                "residual on one node");
  if (chunk > 0) {
    char* mine = recv + me * chunk * es;
    CollArgs reduce = a;
    reduce.recv = mine;
    reduce.count = chunk;
    ZCOLL_CHECK(triggeredQuantizedReduceScatter(ring, ex, reduce));
    ZCOLL_CHECK(triggeredQuantizedGather(ring, ex, mine, chunk, a.dtype, a.quant->inter,
                                         qarGatherIndex(n, chunk, 0), recv, a.ownerResidual));
  }
  if (tail > 0) {
    const size_t at = chunk * static_cast<size_t>(n) * es;
    CollArgs exact{static_cast<const char*>(a.send) + at, recv + at, tail, a.dtype, a.op, 0};
    ZCOLL_CHECK(triggeredAllReduce(ring, ex, exact, tailOrder));
  }
  return zcollSuccess;
}

}  // namespace zcoll
