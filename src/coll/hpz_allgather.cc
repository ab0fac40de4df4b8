// hpZ: hierarchical all-gather with a secondary shard (ZeRO++ weights, forward and backward).
//   N nodes, L ranks each; rail(r) = {members[m][local(r)] : m}, node(r) = members[node(r)].
//   stage A (inter-node, over rail(r)):  sec[m] = x_{members[m][l]}      (dequant(quant(.)) when
//            quantized, via the qwZ ring; exact otherwise)                 -> the secondary shard
//   stage B (intra-node, over node(r)):  recv[members[m][l'] * C] = sec_{l'}[m]  for all m, l'
//   Forward = A then B; backward (FromSecondary) = B alone: zero inter-node bytes, same bits.
//   Quantized with B by messages, the forward overlaps them shard by shard: each shard goes on
//   inside the node as soon as A has dequantized it into the secondary, the own one while A's
//   first step is still on the wire (whole shards, not slices: a quantized shard travels in the
//   wire format's one layout, so the byte counts stay (N-1) * Q(C)).
//   Inter-node bytes per rank: (N-1) * quantizedBytes(C) (or (N-1)*C*es exact), all in A.
//   Stage B read in place (the *_shm_read algorithms, every node peer reached through peer
//   memory: coll/in_place.h): the members publish their secondary shards, each copies every
//   member's N shards straight into its output (host: process_vm_readv or a mapped copy;
//   device: a copy from the mapped shard), and a token releases the shards.
#include <vector>

#include "base/dtype.h"
#include "coll/in_place.h"
#include "coll/zeropp_allgather.h"
#include "coll/zeropp_config.h"

namespace zcoll {

namespace {

constexpr size_t kAlign = 64;

size_t alignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Stage A: the rail all-gather into `sec` (N shards in node order). Quantized, `landed(m)` runs
// as soon as shard m is in `sec`.
Result railStage(const Stage& st, zcollComm* comm, const void* send, char* sec, size_t count,
                 zcollDataType_t dtype, const quant::QuantParams* p, void* wire,
                 const SlotLanded& landed = {}) {
  const Group rail = makeGroup(comm, comm->layout.railGroup(comm->rank));
  const size_t bytes = count * dtypeSize(dtype);
  std::vector<size_t> off(rail.size() + 1);
  for (int m = 0; m <= rail.size(); ++m) off[m] = static_cast<size_t>(m) * (p ? count : bytes);
  if (p == nullptr) return ringAllGatherv(st, rail, sec, off.data(), send);
  quant::QuantParams mine = *p;
  mine.elementOffset = static_cast<uint64_t>(comm->rank) * count;  // same bits as qwZ
  return quantizedRingAllGather(st, rail, send, count, dtype, mine, wire, sec, off.data(), landed);
}

// Where stage B puts shard m of local member `local`: recv[members[m][local] * count].
struct Placement {
  const NodeLayout& lay;
  char* recv;
  size_t bytes;  // of one shard
  char* at(int m, int local) const {
    return recv + static_cast<size_t>(lay.members[m][local]) * bytes;
  }
};

// Stage B read in place: this rank's N shards into their places, then every other member's N
// shards, straight from its published secondary.
Result readShards(const Stage& st, zcollComm* comm, const Group& node, const char* sec,
                  const PeerBuffers& secondaries, const Placement& out) {
  const int n = comm->layout.nodes;
  for (int m = 0; m < n; ++m)
    ZCOLL_CHECK(st.copy(out.at(m, node.me), sec + m * out.bytes, out.bytes));
  for (int k = 1; k < node.size(); ++k) {
    int peer = (node.me + k) % node.size();
    for (int m = 0; m < n; ++m)
      ZCOLL_CHECK(secondaries.read(st.exec(), peer, m * out.bytes, out.at(m, peer), out.bytes));
  }
  countPeerReads(comm, node, n * out.bytes);
  return secondaries.release(st, 1);
}

// Stage B by messages, the receives: every other member's N shards, into their places.
Result postShardReceives(const Stage& st, const Group& node, int n, const Placement& out,
                         RequestList& reqs) {
  for (int k = 1; k < node.size(); ++k) {
    const int peer = (node.me + k) % node.size();
    for (int m = 0; m < n; ++m)
      ZCOLL_CHECK(st.recv(node.at(peer), out.at(m, peer), out.bytes, static_cast<uint32_t>(m),
                          reqs.next()));
  }
  return zcollSuccess;
}

// Stage B by messages, this rank's shard m (at `shard`, in its secondary): into its own place
// in recv, and to every other member.
Result passShardOn(const Stage& st, const Group& node, int m, const char* shard,
                   const Placement& out, RequestList& reqs) {
  ZCOLL_CHECK(st.copy(out.at(m, node.me), shard, out.bytes));
  for (int k = 1; k < node.size(); ++k)
    ZCOLL_CHECK(st.send(node.at(node.me + k), shard, out.bytes, static_cast<uint32_t>(m),
                        reqs.next()));
  return zcollSuccess;
}

size_t shardMessages(const Group& node, int n) {
  return 2 * static_cast<size_t>(node.size() - 1) * n;
}

// Whether stage B reads the peers' secondaries in place: when asked (shmRead) and every node
// peer's secondary can be read in place for the call's memory kind (coll/in_place.h); otherwise
// it goes by messages.
bool readsInPlace(zcollComm* comm, const Executor& exec, bool shmRead) {
  return shmRead &&
         readsCallerBuffersInPlace(comm, makeGroup(comm, comm->layout.nodeGroup(comm->rank)), exec);
}

// Stage B by messages, on a stage of its own.
Result exchangeShards(zcollComm* comm, Executor& exec, const Group& node, const char* sec,
                      const Placement& out) {
  Stage st(comm, exec);
  const int n = comm->layout.nodes;
  RequestList reqs(shardMessages(node, n));
  ZCOLL_CHECK(postShardReceives(st, node, n, out, reqs));
  for (int m = 0; m < n; ++m) ZCOLL_CHECK(passShardOn(st, node, m, sec + m * out.bytes, out, reqs));
  return st.wait(reqs);
}

// Stage B: every local member's N secondary shards reach every other local member; shard m of
// member l lands at recv[members[m][l] * count]. Placement from the layout only. Read in place
// when readsInPlace and every member's secondary turns out reachable, else by messages.
Result nodeStage(zcollComm* comm, Executor& exec, const void* secondary, void* recv, size_t count,
                 zcollDataType_t dtype, bool shmRead) {
  const NodeLayout& lay = comm->layout;
  const Group node = makeGroup(comm, lay.nodeGroup(comm->rank));
  const Placement out{lay, static_cast<char*>(recv), count * dtypeSize(dtype)};
  const char* sec = static_cast<const char*>(secondary);
  if (readsInPlace(comm, exec, shmRead)) {
    Stage st(comm, exec);
    PeerBuffers secondaries;
    ZCOLL_CHECK(secondaries.publish(st, node, sec, lay.nodes * out.bytes));
    if (secondaries.readable()) return readShards(st, comm, node, sec, secondaries, out);
  }
  return exchangeShards(comm, exec, node, sec, out);
}

// Stages A and B together (quantized forward, stage B by messages): each shard goes on to the
// node peers, and into its place in recv, as soon as the rail has put it in the secondary; the
// own shard while the rail's first step is still in flight. Same messages and tags as A then B.
Result railAndNodeOverlapped(zcollComm* comm, Executor& exec, const void* send, char* sec,
                             void* recv, size_t count, zcollDataType_t dtype,
                             const quant::QuantParams& p, void* wire) {
  const NodeLayout& lay = comm->layout;
  const Group node = makeGroup(comm, lay.nodeGroup(comm->rank));
  const Placement out{lay, static_cast<char*>(recv), count * dtypeSize(dtype)};
  Stage railSt(comm, exec), nodeSt(comm, exec);
  RequestList reqs(shardMessages(node, lay.nodes));
  ZCOLL_CHECK(postShardReceives(nodeSt, node, lay.nodes, out, reqs));
  auto passOn = [&](int m) {
    return passShardOn(nodeSt, node, m, sec + m * out.bytes, out, reqs);
  };
  ZCOLL_CHECK(railStage(railSt, comm, send, sec, count, dtype, &p, wire, passOn));
  return nodeSt.wait(reqs);
}

// hpZ forward: stage A over the rail (quantized when p != nullptr) into the secondary shard
// (`secondary`, or scratch when nullptr), then stage B, read in place from the peers'
// secondaries when readsInPlace. Quantized and by messages, B runs as A's shards land.
// Requires a uniform layout.
Result hpzAllGatherHier(zcollComm* comm, Executor& exec, const void* send, void* recv,
                        void* secondary, size_t count, zcollDataType_t dtype,
                        const quant::QuantParams* p, bool shmRead) {
  const int n = comm->layout.nodes;
  const size_t secBytes = secondary ? 0 : alignUp(n * count * dtypeSize(dtype));
  const size_t wireBytes = p ? quant::quantizedBytes(count, *p) * n : 0;
  void* scratch = nullptr;
  ZCOLL_CHECK(scratchGet(comm, exec, secBytes + wireBytes, &scratch));  // [secondary?][wire?]
  char* sec = secondary ? static_cast<char*>(secondary) : static_cast<char*>(scratch);
  void* wire = static_cast<char*>(scratch) + secBytes;
  if (p != nullptr && !readsInPlace(comm, exec, shmRead))
    return railAndNodeOverlapped(comm, exec, send, sec, recv, count, dtype, *p, wire);
  {
    Stage st(comm, exec);
    ZCOLL_CHECK(railStage(st, comm, send, sec, count, dtype, p, wire));
  }
  return nodeStage(comm, exec, sec, recv, count, dtype, shmRead);
}

}  // namespace

Result hpzAllGatherFromSecondary(zcollComm* comm, Executor& exec, const void* secondary,
                                 void* recv, size_t count, zcollDataType_t dtype, bool shmRead) {
  return nodeStage(comm, exec, secondary, recv, count, dtype, shmRead);
}

// Registry entries (registry.cc).
Result allGatherHierRailThenNode(zcollComm* comm, const CollArgs& a) {
  return hpzAllGatherHier(comm, *a.exec, a.send, a.recv, a.secondary, a.count, a.dtype,
                          a.quant != nullptr ? &a.quant->inter : nullptr, false);
}

Result allGatherHierRailThenNodeShmRead(zcollComm* comm, const CollArgs& a) {
  return hpzAllGatherHier(comm, *a.exec, a.send, a.recv, a.secondary, a.count, a.dtype,
                          a.quant != nullptr ? &a.quant->inter : nullptr, true);
}

Result allGatherFromSecondaryNode(zcollComm* comm, const CollArgs& a) {
  return hpzAllGatherFromSecondary(comm, *a.exec, a.send, a.recv, a.count, a.dtype, false);
}

Result allGatherFromSecondaryNodeShmRead(zcollComm* comm, const CollArgs& a) {
  return hpzAllGatherFromSecondary(comm, *a.exec, a.send, a.recv, a.count, a.dtype, true);
}

}  // namespace zcoll
