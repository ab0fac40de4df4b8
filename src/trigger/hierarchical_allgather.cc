// hpZ triggered: coll/hpz_allgather.cc's bits. The forward call gathers the shards (qwZ's steps
// when quantized, every copy dequantized from the codes; across equal nodes by rail, then node,
// which is hpZ's own route: rail stage, node stage) and this rank's secondary shard, the shards
// of its rail in node order (exact, or as qwZ gives them), is copied out of the output: on one
// node just its own shard. The backward call (FromSecondary) gathers inside each node: every
// rank places its secondary's N shards in its slot and its node peers read them; nothing
// crosses nodes. Both give the host path's bits.
#include <algorithm>
#include <vector>

#include "base/dtype.h"
#include "coll/zeropp_config.h"
#include "trigger/collectives.h"
#include "trigger/steps.h"

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
  if (a.secondary == nullptr) return zcollSuccess;  // the caller keeps none
  char* secondary = static_cast<char*>(a.secondary);
  const int myLocal = ring.myLocalIndex();
  for (int k = 0; k < ring.nodes(); ++k)
    ZCOLL_CHECK(ex.copy(secondary + k * bytes, recv + ring.rankAt(k, myLocal) * bytes, bytes));
  return zcollSuccess;
}

Result triggeredAllGatherFromSecondary(TriggerRing& ring, Executor& ex, const CollArgs& a) {
  if (!ring.spansNodes()) return triggeredAllGather(ring, ex, a);  // the secondary: the shard
  const int n = ring.nranks();
  const size_t bytes = a.count * dtypeSize(a.dtype);
  const char* secondary = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  const size_t piece = railPartBytes(ring);
  for (size_t at = 0; at < bytes; at += piece) {
    const size_t len = std::min(piece, bytes - at);
    ZCOLL_CHECK(nodeGatherStep(
        ring, ex, piece, std::vector<size_t>(n, len),
        [&](int k, char* part) { return ex.copy(part, secondary + k * bytes + at, len); },
        [&](int r, const char* from) { return ex.copy(recv + r * bytes + at, from, len); }));
  }
  return zcollSuccess;
}

}  // namespace zcoll
