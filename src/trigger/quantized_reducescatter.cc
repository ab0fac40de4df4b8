// qgZ inside one node, triggered: coll/qgz_reducescatter.cc's bits with one node (chunk t of
// rank s quantized once at the intra-node bits, stochastic-rounding index qgzFirstIndex(W, count,
// s, t) + k; rank t sums the W dequantized chunks in fp32 in rank order, which is local-index
// order on one node, scales (Avg: 1/W) and rounds once), in quantized reduce steps of whole
// blocks: per step a piece of every chunk.
#include <algorithm>
#include <vector>

#include "base/dtype.h"
#include "base/result.h"
#include "coll/qgz.h"
#include "coll/zeropp_config.h"
#include "trigger/collectives.h"
#include "trigger/steps.h"

namespace zcoll {

Result triggeredQuantizedReduceScatter(TriggerRing& ring, Executor& ex, const CollArgs& a) {
  const int n = ring.nranks(), me = ring.me();
  const size_t es = dtypeSize(a.dtype);
  const quant::QuantParams& p = a.quant->intra;
  const size_t piece = quantizedPieceElems(ring, p, n);
  if (piece == 0)
    return fail(zcollInternalError, "qgZ on the trigger ring: %d blocks of %d elements at %d "
                "bits do not fit a %zu-byte window slot", n, p.blockSize, p.bits,
                ring.slotBytes());
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  const float scale = qgzOutScale(a.op, n);
  for (size_t at = 0; at < a.count; at += piece) {
    const size_t len = std::min(piece, a.count - at);
    std::vector<const char*> toRank(n);
    std::vector<quant::QuantParams> params(n, p);
    for (int t = 0; t < n; ++t) {
      toRank[t] = send + (t * a.count + at) * es;
      params[t].elementOffset = qgzFirstIndex(n, a.count, me, t) + at;
    }
    ZCOLL_CHECK(quantizedReduceStep(ring, ex, a.dtype, len, toRank, params, scale,
                                    recv + at * es));
  }
  return ring.noteStream(ex);
}

}  // namespace zcoll
