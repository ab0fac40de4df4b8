#include <algorithm>
#include <vector>

#include "base/dtype.h"
#include "trigger/collectives.h"
#include "trigger/steps.h"

namespace zcoll {

Result triggeredReduceScatter(TriggerRing& ring, Executor& ex, const CollArgs& a,
                              const ReduceOrder& order) {
  const int n = ring.nranks();
  const size_t es = dtypeSize(a.dtype);
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  const size_t piece = reducePieceElems(ring, a.dtype, order);
  for (size_t at = 0; at < a.count; at += piece) {
    const size_t len = std::min(piece, a.count - at);
    std::vector<const char*> toRank(n);
    for (int d = 0; d < n; ++d) toRank[d] = send + (d * a.count + at) * es;
    ZCOLL_CHECK(reduceStep(ring, ex, a.dtype, a.op, order, toRank, std::vector<size_t>(n, len),
                           recv + at * es));
  }
  return zcollSuccess;
}

}  // namespace zcoll
