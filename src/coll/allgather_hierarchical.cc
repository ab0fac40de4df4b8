// Hierarchical all-gather (several nodes with the same number of ranks each):
//   hpZ's two stages without quantization. A ring over the rail (the ranks with this local
//   index, one per node) gathers the rail's N shards, then the ranks of each node exchange
//   their rails' shards inside the node. Every shard enters every other node exactly once: a
//   node's egress carries its L shards to each of the N-1 other nodes, where the flat ring's
//   link out of a node carries W-1 shards (1.5x more at 2 nodes x 2 ranks; with ranks placed
//   cyclically the flat ring even crosses between nodes at every hop).
//   One node, or nodes of different sizes: the flat ring.
#include "coll/zeropp_allgather.h"

namespace zcoll {

Result allGatherHierarchical(zcollComm* comm, const CollArgs& a) {
  if (comm->layout.nodes == 1 || !comm->layout.uniform()) return allGatherRing(comm, a);
  return hpzAllGatherHier(comm, *a.exec, a.send, a.recv, nullptr, a.count, a.dtype, nullptr,
                          false);
}

}  // namespace zcoll
