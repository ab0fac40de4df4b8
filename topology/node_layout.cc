#include "topology/node_layout.h"

#include <unordered_map>

namespace zcoll {

NodeLayout buildNodeLayout(const std::vector<uint64_t>& hostHashes) {
  NodeLayout l;
  const int n = static_cast<int>(hostHashes.size());
  l.nodeOf.resize(n);
  l.localOf.resize(n);
  std::unordered_map<uint64_t, int> nodeIndex;
  for (int r = 0; r < n; ++r) {
    auto it = nodeIndex.emplace(hostHashes[r], l.nodes);
    if (it.second) {
      ++l.nodes;
      l.members.emplace_back();
    }
    int node = it.first->second;
    l.nodeOf[r] = node;
    l.localOf[r] = static_cast<int>(l.members[node].size());
    l.members[node].push_back(r);
  }
  return l;
}

bool NodeLayout::uniform() const {
  for (const auto& m : members)
    if (m.size() != members[0].size()) return false;
  return true;
}

std::vector<int> NodeLayout::railGroup(int rank) const {
  std::vector<int> rail;
  int local = localOf[rank];
  for (const auto& m : members)
    if (local < static_cast<int>(m.size())) rail.push_back(m[local]);
  return rail;
}

std::vector<int> NodeLayout::leaders() const {
  std::vector<int> out;
  for (const auto& m : members) out.push_back(m[0]);
  return out;
}

int NodeLayout::buddyOf(int rank) const {
  if (nodes < 2) return -1;
  const std::vector<int>& next = members[(nodeOf[rank] + 1) % nodes];
  return next[localOf[rank] % next.size()];
}

std::vector<int> NodeLayout::wardsOf(int rank) const {
  std::vector<int> wards;
  if (nodes < 2) return wards;
  for (int r : members[(nodeOf[rank] + nodes - 1) % nodes])
    if (buddyOf(r) == rank) wards.push_back(r);
  return wards;
}

}  // namespace zcoll
