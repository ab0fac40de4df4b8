#include "trigger/reduce_order.h"

#include <cstring>

#include "base/dtype.h"
#include "coll/in_place.h"
#include "core/comm.h"
#include "transport/peer_memory.h"

namespace zcoll {

bool hostReduceOrder(const zcollComm* comm, CollKind kind, size_t bytesPerRank,
                     zcollDataType_t dtype, ReduceOrder* out) {
  const Algorithm* algo = nullptr;
  if (selectAlgorithm(comm, kind, bytesPerRank, MemKind::kDevice, &algo) != zcollSuccess)
    return false;
  const char* name = algo->name;
  *out = ReduceOrder{};
  if (std::strcmp(name, "direct") == 0) return true;
  if (std::strcmp(name, "shm_read") == 0) {
    // Rank order when every rank's buffers are mapped (registered windows: known only once the
    // ranks traded their ranges), else the ring it falls back to (coll/*_shm_read.cc).
    const PeerMemory* pm = peerMemoryOf(comm, worldGroup(comm), MemKind::kDevice);
    if (pm != nullptr && pm->exposesCallerBuffers()) return false;
    name = "ring";
  }
  if (std::strcmp(name, "ring") == 0) {
    out->kind = ReduceOrder::Kind::kRing;
    // As coll/reducescatter_ring.cc: fp32 partials for 16-bit floats unless asked otherwise;
    // other types travel in their own.
    out->partialsInDtype = !isHalfType(dtype) || comm->partialsInDtype;
    return true;
  }
  if (kind == CollKind::kAllReduce && std::strcmp(name, "recursive_doubling") == 0) {
    out->kind = ReduceOrder::Kind::kTree;
    return true;
  }
  return false;
}

int accBuffersFor(const ReduceOrder& order, int n) {
  if (order.kind != ReduceOrder::Kind::kTree) return 1;
  int levels = 1;
  for (int p = 2; p <= n; p *= 2) ++levels;
  return levels;
}

}  // namespace zcoll
