// Hierarchical all-gather (several nodes with the same number of ranks each, N nodes of L):
//   rail: a ring over the rail (the ranks with this local index, one per node) passes every
//         node's shard of this local index around, straight into its place in the output;
//   node: every shard a rank has (its own, and each one the rail brings) goes on at once to the
//         other L-1 ranks of its node, into the same place in theirs.
//   Every shard enters every other node exactly once: a node's egress carries its L shards to
//   each of the N-1 other nodes, where the flat ring's link out of a node carries W-1 shards
//   (1.5x more at 2 nodes x 2 ranks; with ranks placed cyclically the flat ring even crosses
//   between nodes at every hop). Pipelined in slices of the shard (about 1 MiB, at most 16):
//   all of the rail's first step and the own shard's node sends are posted at once, and each
//   slice the rail brings is forwarded inside the node (and to the next rail hop) as soon as it
//   lands, so the node's copies run while the link is busy. (hpZ's quantized forward,
//   hpz_allgather.cc, overlaps the same two stages by whole shards.) One node, or nodes of
//   different sizes: the flat ring.
#include "base/dtype.h"
#include "coll/coll.h"

namespace zcoll {

namespace {

struct Shards {
  const NodeLayout& lay;
  char* recv;
  size_t bytes;  // of one shard
  Slices cut;    // of a shard, in bytes
  size_t slices() const { return cut.count; }

  // Shard of local member `j` of node `m`, in the output.
  char* at(int m, int j) const { return recv + static_cast<size_t>(lay.members[m][j]) * bytes; }
  size_t first(size_t k) const { return cut.first(k); }
  size_t len(size_t k) const { return cut.len(k); }
};

class HierarchicalAllGather {
 public:
  HierarchicalAllGather(zcollComm* comm, Executor& exec, const Shards& sh)
      : node_(makeGroup(comm, sh.lay.nodeGroup(comm->rank))),
        rail_(makeGroup(comm, sh.lay.railGroup(comm->rank))),
        sh_(sh),
        railSt_(comm, exec),
        nodeSt_(comm, exec),
        railRecv_(static_cast<size_t>(rail_.size() - 1) * sh.slices()),
        sends_((static_cast<size_t>(rail_.size() - 1) +
                static_cast<size_t>(node_.size() - 1) * rail_.size()) * sh.slices()),
        nodeRecv_(static_cast<size_t>(node_.size() - 1) * rail_.size() * sh.slices()) {}

  Result run(const void* own) {
    const int n = rail_.size();
    ZCOLL_CHECK(postNodeReceives());
    for (size_t k = 0; k < sh_.slices(); ++k)
      ZCOLL_CHECK(postRail(0, k, static_cast<const char*>(own) + sh_.first(k)));
    ZCOLL_CHECK(forward(rail_.me, static_cast<const char*>(own)));
    ZCOLL_CHECK(railSt_.copy(sh_.at(rail_.me, node_.me), own, sh_.bytes));
    // Each slice the rail brings: on to the node, and to the next hop of the rail.
    for (int s = 0; s < n - 1; ++s) {
      const int block = (rail_.me - s - 1 + n) % n;
      for (size_t k = 0; k < sh_.slices(); ++k) {
        ZCOLL_CHECK(railSt_.wait(railRecv_.data() + s * sh_.slices() + k, 1));
        const char* got = sh_.at(block, node_.me) + sh_.first(k);
        ZCOLL_CHECK(forwardSlice(block, k, got));
        if (s + 1 < n - 1) ZCOLL_CHECK(postRail(s + 1, k, got));
      }
    }
    ZCOLL_CHECK(nodeSt_.wait(nodeRecv_));
    return railSt_.wait(sends_);
  }

 private:
  // Rail hop s of slice k: receives block me-s-1 from the left, sends `from` (block me-s) right.
  Result postRail(int s, size_t k, const char* from) {
    const int n = rail_.size();
    const int block = (rail_.me - s - 1 + n) % n;
    const uint32_t step = static_cast<uint32_t>(s * sh_.slices() + k);
    ZCOLL_CHECK(railSt_.recv(rail_.at(rail_.me - 1), sh_.at(block, node_.me) + sh_.first(k),
                             sh_.len(k), step, railRecv_.at(s * sh_.slices() + k)));
    return railSt_.send(rail_.at(rail_.me + 1), from, sh_.len(k), step, sends_.next());
  }

  // Every node peer's shard of every node, slice by slice, into its place.
  Result postNodeReceives() {
    const int l = node_.size();
    for (int i = 1; i < l; ++i) {
      const int j = (node_.me + i) % l;
      for (int m = 0; m < rail_.size(); ++m)
        for (size_t k = 0; k < sh_.slices(); ++k)
          ZCOLL_CHECK(nodeSt_.recv(node_.ranks[j], sh_.at(m, j) + sh_.first(k), sh_.len(k),
                                   nodeStep(m, k), nodeRecv_.next()));
    }
    return zcollSuccess;
  }

  // Slice k of this rank's shard of node `block` (at `from`) to every other node member.
  Result forwardSlice(int block, size_t k, const char* from) {
    const int l = node_.size();
    for (int i = 1; i < l; ++i)
      ZCOLL_CHECK(nodeSt_.send(node_.at(node_.me + i), from, sh_.len(k), nodeStep(block, k),
                               sends_.next()));
    return zcollSuccess;
  }

  Result forward(int block, const char* shard) {
    for (size_t k = 0; k < sh_.slices(); ++k)
      ZCOLL_CHECK(forwardSlice(block, k, shard + sh_.first(k)));
    return zcollSuccess;
  }

  uint32_t nodeStep(int block, size_t k) const {
    return static_cast<uint32_t>(block * sh_.slices() + k);
  }

  const Group node_, rail_;
  const Shards& sh_;
  Stage railSt_, nodeSt_;
  RequestList railRecv_, sends_, nodeRecv_;
};

}  // namespace

Result allGatherHierarchical(zcollComm* comm, const CollArgs& a) {
  const NodeLayout& lay = comm->layout;
  if (lay.nodes == 1 || !lay.uniform()) return allGatherRing(comm, a);
  const size_t bytes = a.count * dtypeSize(a.dtype);
  // Node and rail step tags number block * slices + k (16 bits, 0xffff reserved).
  const Slices cut = makeSlices(bytes, 1, 0xfffe / static_cast<size_t>(lay.nodes));
  const Shards sh{lay, static_cast<char*>(a.recv), bytes, cut};
  HierarchicalAllGather ag(comm, *a.exec, sh);
  return ag.run(a.send);
}

}  // namespace zcoll
