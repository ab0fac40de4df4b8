#include "coll/collectives.h"

#include <cstdio>

#include "base/params.h"
#include "coll/coll.h"
#include "coll/in_place.h"

namespace zcoll {

namespace {

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * KiB;
constexpr size_t kQuantizedAllReduceMinBytes = 256 * KiB;

const std::vector<Collective> kCollectives = {
    {CollKind::kAllGather, "zcollAllGather", "allgather", "ZCOLL_ALGO_ALLGATHER", 1,
     "all-gather"},
    {CollKind::kReduceScatter, "zcollReduceScatter", "reducescatter", "ZCOLL_ALGO_REDUCESCATTER",
     2, "reduce-scatter"},
    {CollKind::kAllReduce, "zcollAllReduce", "allreduce", "ZCOLL_ALGO_ALLREDUCE", 3,
     "all-reduce"},
    {CollKind::kAllToAll, "zcollAllToAll", "alltoall", "ZCOLL_ALGO_ALLTOALL", 4, "all-to-all"},
    {CollKind::kBroadcast, "zcollBroadcast", "broadcast", "ZCOLL_ALGO_BROADCAST", 5,
     "broadcast"},
    {CollKind::kReduce, "zcollReduce", "reduce", "ZCOLL_ALGO_REDUCE", 11, "reduce"},
    {CollKind::kGather, "zcollGather", "gather", "ZCOLL_ALGO_GATHER", 12, "gather"},
    {CollKind::kScatter, "zcollScatter", "scatter", "ZCOLL_ALGO_SCATTER", 13, "scatter"},
    {CollKind::kAllToAllv, "zcollAllToAllv", "alltoallv", "ZCOLL_ALGO_ALLTOALLV", 14,
     "all-to-all-v"},
    {CollKind::kQuantizedAllGather, "zcollQuantizedAllGather", "quantized_allgather",
     "ZCOLL_ALGO_QUANTIZED_ALLGATHER", 7, "qwZ quantized all-gather"},
    {CollKind::kAllGatherHier, "zcollAllGatherHier", "allgather_hier",
     "ZCOLL_ALGO_ALLGATHER_HIER", 8, "hpZ hierarchical all-gather (forward)"},
    {CollKind::kAllGatherFromSecondary, "zcollAllGatherFromSecondary",
     "allgather_from_secondary", "ZCOLL_ALGO_ALLGATHER_FROM_SECONDARY", 9,
     "hpZ all-gather from the secondary shard (backward)"},
    {CollKind::kQuantizedReduceScatter, "zcollQuantizedReduceScatter", "quantized_reducescatter",
     "ZCOLL_ALGO_QUANTIZED_REDUCESCATTER", 10, "qgZ quantized reduce-scatter"},
    {CollKind::kQuantizedAllReduce, "zcollQuantizedAllReduce", "quantized_allreduce",
     "ZCOLL_ALGO_QUANTIZED_ALLREDUCE", 15, "quantized all-reduce (qgZ then qwZ)"},
};

// Thresholds from perf/LOG.md: latency-bound sizes take the one-step algorithms, larger ones
// the bandwidth-optimal ones; on several equal nodes, the all-gather that crosses between nodes
// least. shm_read reads every peer in place: all-gather from 1 MiB per rank (on par with the
// ring on ordinary buffers, 1.4-2x on zcollMemAllocHost memory), reduce-scatter from 4 MiB
// (1.1-1.6x the ring's bus bandwidth at 4 ranks, 1.0-1.3x at 2), all-reduce from 4 MiB
// (1.1-1.4x). The hierarchical reduce-scatter is an option, not a default: 1.3-1.4x the ring
// over a 1 Gbit/s link between 2 nodes x 2 ranks, on par at 10 Gbit/s, up to 2x slower where
// the link is faster than the extra local pass; zcoll cannot tell the link's speed. qgZ's intra
// hop read in place: 1.05-1.8x two_hop's exchange on one node.
const std::vector<DefaultRule> kDefaults = {
    {CollKind::kAllGather, 32 * KiB + 1, Condition::kSeveralEqualNodes, "hierarchical"},
    {CollKind::kAllGather, 1 * MiB, Condition::kEveryPeerSharesMemory, "shm_read"},
    {CollKind::kAllGather, 32 * KiB + 1, Condition::kAlways, "ring"},
    {CollKind::kAllGather, 0, Condition::kAlways, "direct"},
    {CollKind::kReduceScatter, 4 * MiB, Condition::kEveryPeerSharesMemory, "shm_read"},
    {CollKind::kReduceScatter, 32 * KiB + 1, Condition::kAlways, "ring"},
    {CollKind::kReduceScatter, 0, Condition::kAlways, "direct"},
    {CollKind::kAllReduce, 0, Condition::kChunksUnder64Bytes, "recursive_doubling"},
    {CollKind::kAllReduce, 4 * MiB, Condition::kEveryPeerSharesMemory, "shm_read"},
    {CollKind::kAllReduce, 64 * KiB + 1, Condition::kAlways, "ring"},
    {CollKind::kAllReduce, 0, Condition::kAlways, "recursive_doubling"},
    {CollKind::kAllToAll, 0, Condition::kAlways, "pairwise"},
    {CollKind::kBroadcast, 256 * KiB + 1, Condition::kAlways, "pipelined_ring"},
    {CollKind::kBroadcast, 0, Condition::kAlways, "binomial"},
    {CollKind::kReduce, 0, Condition::kAlways, "ring"},
    {CollKind::kGather, 0, Condition::kAlways, "direct"},
    {CollKind::kScatter, 0, Condition::kAlways, "direct"},
    {CollKind::kAllToAllv, 0, Condition::kAlways, "pairwise"},
    {CollKind::kQuantizedAllGather, 0, Condition::kAlways, "ring"},
    {CollKind::kAllGatherHier, 0, Condition::kAlways, "rail_then_node"},
    {CollKind::kAllGatherFromSecondary, 0, Condition::kAlways, "node"},
    {CollKind::kQuantizedReduceScatter, 0, Condition::kUnevenNodes, "flat"},
    {CollKind::kQuantizedReduceScatter, 0, Condition::kEveryNodePeerSharesMemory,
     "two_hop_shm_read"},
    {CollKind::kQuantizedReduceScatter, 0, Condition::kAlways, "two_hop"},
    // The quantized all-reduce runs exact below kQuantizedAllReduceMinBytes: where the quantized
    // one stopped being slower (docs/ZEROPP.md "Quantized all-reduce": all_reduce_perf --bits 8,
    // fp32, 4 ranks on 2 emulated nodes, two runs: 128 KiB 0.67/1.17 ms vs exact 0.70/0.77,
    // 256 KiB 0.93/1.22 ms vs 1.83/1.62).
    {CollKind::kQuantizedAllReduce, kQuantizedAllReduceMinBytes, Condition::kAlways,
     "qgz_then_qwz"},
    {CollKind::kQuantizedAllReduce, 0, Condition::kAlways, "exact"},
};

std::string sizeText(size_t bytes) {
  char buf[48];
  if (bytes % MiB == 0) std::snprintf(buf, sizeof(buf), "%zu MiB", bytes / MiB);
  else if (bytes % KiB == 0) std::snprintf(buf, sizeof(buf), "%zu KiB", bytes / KiB);
  else std::snprintf(buf, sizeof(buf), "%zu B", bytes);
  return buf;
}

// "from 1 MiB per rank", or "over 32 KiB per rank" for a bound one byte past a round size.
std::string boundText(size_t fromBytes) {
  if (fromBytes % KiB == 1) return "over " + sizeText(fromBytes - 1) + " per rank";
  return "from " + sizeText(fromBytes) + " per rank";
}

std::string overrideDescription(const Collective& c) {
  std::string names;
  for (const std::string& n : algorithmNames(c.kind)) names += (names.empty() ? "" : ", ") + n;
  return std::string("Force the ") + c.what + " algorithm: " + names +
         " (`zcoll_info --algorithms` says what each does). Empty: " + describeDefaults(c.kind) +
         ".";
}

// The ZCOLL_ALGO_<KIND> rows of the parameter table, made from kCollectives at the first
// parameter lookup (their descriptions state the algorithms and defaults above, so they cannot
// go stale).
std::vector<ParamDesc> overrideParams() {
  static std::vector<std::string> descriptions;  // owns the text the rows point to
  std::vector<ParamDesc> rows;
  descriptions.reserve(kCollectives.size());
  for (const Collective& c : kCollectives) {
    descriptions.push_back(overrideDescription(c));
    rows.push_back({c.overrideParam, ParamType::kString, "", descriptions.back().c_str()});
  }
  return rows;
}

// Registered when the library loads (this file is always linked: the registry calls it).
[[maybe_unused]] const bool kOverridesRegistered = (registerParamSource(overrideParams), true);

}  // namespace

const std::vector<Collective>& allCollectives() { return kCollectives; }

const Collective& collective(CollKind kind) {
  for (const Collective& c : kCollectives)
    if (c.kind == kind) return c;
  return kCollectives.front();  // unreachable: every CollKind has a row (unit_test checks)
}

const Collective* collectiveByCallCheckId(uint32_t id) {
  for (const Collective& c : kCollectives)
    if (c.callCheckId == id) return &c;
  return nullptr;
}

const std::vector<DefaultRule>& defaultRules() { return kDefaults; }

const char* conditionName(Condition c) {
  switch (c) {
    case Condition::kAlways: return "always";
    case Condition::kSeveralEqualNodes: return "several_equal_nodes";
    case Condition::kUnevenNodes: return "uneven_nodes";
    case Condition::kEveryPeerSharesMemory: return "every_peer_shares_memory";
    case Condition::kEveryNodePeerSharesMemory: return "every_node_peer_shares_memory";
    case Condition::kChunksUnder64Bytes: return "chunks_under_64_bytes";
  }
  return "unknown";
}

bool conditionHolds(const zcollComm* comm, Condition c, size_t bytesPerRank, MemKind mem) {
  switch (c) {
    case Condition::kAlways: return true;
    case Condition::kSeveralEqualNodes: return comm->layout.nodes > 1 && comm->layout.uniform();
    case Condition::kUnevenNodes: return !comm->layout.uniform();
    case Condition::kEveryPeerSharesMemory: {
      const PeerMemory* pm = peerMemoryOf(comm, worldGroup(comm), mem);
      return pm != nullptr && pm->exposesCallerBuffers();
    }
    case Condition::kEveryNodePeerSharesMemory:
      return peerMemoryOf(comm, makeGroup(comm, comm->layout.nodeGroup(comm->rank)), mem) !=
             nullptr;
    case Condition::kChunksUnder64Bytes:
      return bytesPerRank < static_cast<size_t>(comm->nranks) * 64;
  }
  return false;
}

const char* defaultAlgorithm(const zcollComm* comm, CollKind kind, size_t bytesPerRank,
                             MemKind mem) {
  for (const DefaultRule& r : kDefaults)
    if (r.kind == kind && bytesPerRank >= r.fromBytes &&
        conditionHolds(comm, r.when, bytesPerRank, mem))
      return r.algorithm;
  return "";
}

std::string describeDefaults(CollKind kind) {
  std::string out;
  for (const DefaultRule& r : kDefaults) {
    if (r.kind != kind) continue;
    if (!out.empty()) out += "; ";
    const bool last = r.fromBytes == 0 && r.when == Condition::kAlways;
    out += last && !out.empty() ? std::string("else ") + r.algorithm : r.algorithm;
    if (r.fromBytes > 0) out += " " + boundText(r.fromBytes);
    if (r.when != Condition::kAlways) out += std::string(" if ") + conditionName(r.when);
  }
  return out;
}

std::vector<std::string> algorithmNames(CollKind kind) {
  std::vector<std::string> names;
  for (const Algorithm& a : allAlgorithms())
    if (a.kind == kind) names.push_back(a.name);
  return names;
}

}  // namespace zcoll
