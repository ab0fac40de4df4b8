// Which ranks share a node, from host identities (never from rank arithmetic: ranks need not
// be numbered node-contiguously). Nodes are numbered by their lowest rank; within a node,
// ranks are ordered by rank.
#pragma once

#include <cstdint>
#include <vector>

namespace zcoll {

struct NodeLayout {
  int nodes = 0;
  std::vector<int> nodeOf;                // rank -> node index
  std::vector<int> localOf;               // rank -> index among its node's ranks
  std::vector<std::vector<int>> members;  // node -> its ranks, ascending

  int localSize(int rank) const { return static_cast<int>(members[nodeOf[rank]].size()); }
  // True when every node has the same number of ranks.
  bool uniform() const;
  // The ranks of `rank`'s node (NODE subgroup).
  const std::vector<int>& nodeGroup(int rank) const { return members[nodeOf[rank]]; }
  // One rank per node with `rank`'s local index, in node order (RAIL subgroup). On a
  // non-uniform layout, nodes lacking that local index are skipped.
  std::vector<int> railGroup(int rank) const;
  // Local index 0 of every node (NODE_LEADERS subgroup).
  std::vector<int> leaders() const;
  // The buddy of `rank` (zcollBuddyCopy), on another node whenever there are two: on the next
  // node (node index + 1, wrapping), the rank whose local index is `rank`'s modulo that node's
  // size. -1 with a single node.
  int buddyOf(int rank) const;
  // The ranks whose buddy `rank` is, by ascending rank: on an even layout exactly one.
  std::vector<int> wardsOf(int rank) const;
};

NodeLayout buildNodeLayout(const std::vector<uint64_t>& hostHashes);

}  // namespace zcoll
