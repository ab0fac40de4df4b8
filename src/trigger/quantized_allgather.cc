// qwZ triggered: coll/qwz_allgather.cc's bits (each shard quantized once with its global element
// offset, every copy of it, the owner's too, dequantized from those codes), in gather steps of
// whole blocks: a piece of every shard at the same offset per step.
#include <algorithm>
#include <vector>

#include "base/dtype.h"
#include "base/result.h"
#include "coll/zeropp_config.h"
#include "trigger/collectives.h"
#include "trigger/steps.h"

namespace zcoll {

Result triggeredQuantizedAllGather(TriggerRing& ring, Executor& ex, const CollArgs& a) {
  const int n = ring.nranks(), me = ring.me();
  const size_t es = dtypeSize(a.dtype);
  const quant::QuantParams& p = a.quant->inter;
  const size_t piece = quantizedPieceElems(ring, p);
  if (piece == 0)
    return fail(zcollInternalError, "qwZ on the trigger ring: a block of %d elements at %d bits "
                "does not fit a %zu-byte window slot", p.blockSize, p.bits, ring.slotBytes());
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  for (size_t at = 0; at < a.count; at += piece) {
    const size_t len = std::min(piece, a.count - at);
    quant::QuantParams mine = p;
    mine.elementOffset = static_cast<uint64_t>(me) * a.count + at;  // as the host's, per element
    std::vector<char*> out(n);
    for (int r = 0; r < n; ++r) out[r] = recv + (r * a.count + at) * es;
    ZCOLL_CHECK(quantizedGatherStep(ring, ex, send + at * es, a.dtype, len, mine, out));
  }
  return ring.noteStream(ex);
}

}  // namespace zcoll
