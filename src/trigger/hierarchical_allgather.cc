// hpZ inside one node, triggered: coll/hpz_allgather.cc with one node (N = 1). The rail stage
// has one member, so this rank's secondary shard is its own shard, exact or, quantized, as qwZ
// gives it (dequant(quant(.)) with qwZ's element offsets); the node stage gathers every member's
// secondary. So the forward call is the gather of the shards (qwZ's steps when quantized, every
// copy dequantized from the codes) and the secondary a copy of this rank's part of the output;
// the backward call (FromSecondary) gathers the secondaries. Both give the host path's bits.
#include "base/dtype.h"
#include "coll/zeropp_config.h"
#include "trigger/collectives.h"

namespace zcoll {

Result triggeredAllGatherHier(TriggerRing& ring, Executor& ex, const CollArgs& a) {
  const size_t bytes = a.count * dtypeSize(a.dtype);
  char* recv = static_cast<char*>(a.recv);
  if (a.quant == nullptr) {
    ZCOLL_CHECK(triggeredAllGather(ring, ex, a));
  } else {
    ZCOLL_CHECK(triggeredQuantizedGather(ring, ex, static_cast<const char*>(a.send), a.count,
                                         a.dtype, a.quant->inter, 0, recv, nullptr));
  }
  if (a.secondary != nullptr)  // NULL: the caller keeps none (scratch on the host path)
    ZCOLL_CHECK(ex.copy(a.secondary, recv + ring.me() * bytes, bytes));
  return zcollSuccess;
}

}  // namespace zcoll
