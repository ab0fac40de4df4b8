// qgZ inside one node, triggered: coll/qgz_reducescatter.cc's bits with one node (chunk t of
// rank s quantized once at the intra-node bits, stochastic-rounding index qgzFirstIndex(W, count,
// s, t) + k; rank t sums the W dequantized chunks in fp32 in rank order, which is local-index
// order on one node, scales (Avg: 1/W) and rounds once), in quantized reduce steps of whole
// blocks: per step a piece of every chunk. With a.firstResidual (the quantized all-reduce's error
// feedback), each chunk's quantization keeps its residual, as the host's does.
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
  const bool feedback = a.firstResidual != nullptr;
  const size_t piece = quantizedPieceElems(ring, p, n, feedback);
  if (piece == 0)
    return fail(zcollInternalError, "qgZ on the trigger ring: %d blocks of %d elements at %d "
                "bits do not fit a %zu-byte window slot%s", n, p.blockSize, p.bits,
                ring.slotBytes(), feedback ? " (or one block in fp32 its accumulator)" : "");
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  const float scale = qgzOutScale(a.op, n);
  for (size_t at = 0; at < a.count; at += piece) {
    const size_t len = std::min(piece, a.count - at);
    std::vector<const char*> toRank(n);
    std::vector<quant::QuantParams> params(n, p);
    std::vector<float*> residuals(feedback ? n : 0);
    for (int t = 0; t < n; ++t) {
      toRank[t] = send + (t * a.count + at) * es;
      params[t].elementOffset = qgzFirstIndex(n, a.count, me, t) + at;
      if (feedback) residuals[t] = a.firstResidual + t * a.count + at;  // in sendbuff's order
    }
    ZCOLL_CHECK(quantizedReduceStep(ring, ex, a.dtype, len, toRank, params, scale,
                                    recv + at * es, residuals));
  }
  return zcollSuccess;
}

}  // namespace zcoll
