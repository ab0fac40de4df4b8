// The algorithm registry: every algorithm by collective and name, and the choice for a call:
// the ZCOLL_ALGO_<KIND> override, else the default rules of collectives.h.
#include <cstring>

#include "base/dtype.h"
#include "base/log.h"
#include "base/params.h"
#include "coll/coll.h"
#include "coll/collectives.h"
#include "coll/zeropp_config.h"
#include "core/flight_recorder.h"

namespace zcoll {

namespace {

const std::vector<Algorithm> kAlgorithms = {
    {CollKind::kAllGather, "ring", allGatherRing,
     "W-1 steps around the ring, one block each: bandwidth-optimal"},
    {CollKind::kAllGather, "direct", allGatherDirect,
     "every block straight to every rank in one step: lowest latency"},
    {CollKind::kAllGather, "hierarchical", allGatherHierarchical,
     "a ring over each rail between nodes, then an exchange inside each node: each block enters every other node once"},
    {CollKind::kAllGather, "shm_read", allGatherShmRead,
     "every peer sharing memory (host: shm): each rank copies every peer's block straight out of the peer's memory (memcpy for zcollMemAllocHost or device memory; else the ring)"},
    {CollKind::kReduceScatter, "ring", reduceScatterRing,
     "W-1 steps around the ring, reducing as the partials pass: bandwidth-optimal"},
    {CollKind::kReduceScatter, "direct", reduceScatterDirect,
     "every chunk straight to its owner, which reduces them in rank order: lowest latency"},
    {CollKind::kReduceScatter, "shm_read", reduceScatterShmRead,
     "every peer sharing memory (host: shm): each rank reads its chunk from every peer's input in place, piece by piece, and reduces it in cache (else the ring)"},
    {CollKind::kReduceScatter, "hierarchical", reduceScatterHierarchical,
     "a direct reduce-scatter inside each node into the node's partials of its rail's chunks, then a ring over each rail between nodes: L*(N-1) chunks leave a node where the ring sends W-1"},
    {CollKind::kAllReduce, "ring", allReduceRing,
     "ring reduce-scatter, then ring all-gather: bandwidth-optimal"},
    {CollKind::kAllReduce, "shm_read", allReduceShmRead,
     "every peer sharing memory (host: shm): each rank reduces its chunk reading every peer's input in place, then copies the other chunks from their owners' outputs or, every output writable, writes its chunk into them (else the ring)"},
    {CollKind::kAllReduce, "recursive_doubling", allReduceRecursiveDoubling,
     "log2(P) exchanges of the whole buffer (P: power of two <= W, the rest folded in): lowest latency"},
    {CollKind::kAllToAll, "pairwise", allToAllPairwise,
     "W-1 steps; at step s each rank sends to rank+s and receives from rank-s"},
    {CollKind::kBroadcast, "binomial", broadcastBinomial,
     "a binomial tree from the root: log2(W) steps"},
    {CollKind::kBroadcast, "pipelined_ring", broadcastPipelinedRing,
     "slices passed down a chain from the root, each forwarded on arrival: bandwidth-optimal"},
    {CollKind::kReduce, "ring", reduceRing,
     "ring reduce-scatter, then every block to the root: the ring all-reduce's bits"},
    {CollKind::kGather, "direct", gatherDirect, "every block straight to the root"},
    {CollKind::kScatter, "direct", scatterDirect, "every block straight from the root"},
    {CollKind::kAllToAllv, "pairwise", allToAllvPairwise,
     "as all-to-all pairwise, with per-pair counts (empty messages included)"},
    {CollKind::kQuantizedAllGather, "ring", quantizedAllGatherRing,
     "qwZ: the shard quantized once, a node-ordered ring of quantized blocks, each dequantized "
     "as it arrives"},
    {CollKind::kAllGatherHier, "rail_then_node", allGatherHierRailThenNode,
     "hpZ forward: a rail all-gather (optionally quantized) fills the per-node secondary shard, "
     "and an all-gather inside the node passes each of its shards on (quantized: as it lands)"},
    {CollKind::kAllGatherHier, "rail_then_node_shm_read", allGatherHierRailThenNodeShmRead,
     "hpZ forward as rail_then_node, each rank reading its node peers' secondary shards in place "
     "(every node peer sharing memory; else rail_then_node)"},
    {CollKind::kAllGatherFromSecondary, "node", allGatherFromSecondaryNode,
     "hpZ backward: an all-gather inside the node from the secondary shard; no inter-node bytes"},
    {CollKind::kAllGatherFromSecondary, "node_shm_read", allGatherFromSecondaryNodeShmRead,
     "hpZ backward as node, each rank reading its node peers' secondary shards in place (every "
     "node peer sharing memory; else node)"},
    {CollKind::kQuantizedReduceScatter, "two_hop", quantizedReduceScatterTwoHop,
     "qgZ: quantized all-to-all inside the node, dequantize-reduce-requantize, quantized "
     "all-to-all between nodes, dequantize-sum; pipelined (equal nodes only)"},
    {CollKind::kQuantizedReduceScatter, "two_hop_shm_read", quantizedReduceScatterTwoHopShmRead,
     "qgZ two_hop whose intra-node hop reads the local peers' quantized pieces in place from "
     "their windows (host: shm memfds; device: cuda_ipc blocks; no copy inside the node; else "
     "two_hop's exchange)"},
    {CollKind::kQuantizedReduceScatter, "flat", quantizedReduceScatterFlat,
     "qgZ on any layout: one quantized all-to-all among all ranks, then dequantize-sum"},
    {CollKind::kQuantizedAllReduce, "qgz_then_qwz", quantizedAllReduceQgzThenQwz,
     "the W chunks reduced by qgZ (its algorithm for the layout), then quantized by their owner "
     "and gathered by qwZ's ring: every rank the same bits; the count mod W tail exact"},
    {CollKind::kQuantizedAllReduce, "exact", quantizedAllReduceExact,
     "zcollAllReduce's algorithm for the size (its bits exactly): the small-size fallback"},
};

}  // namespace

const Algorithm* findAlgorithm(CollKind kind, const std::string& name) {
  for (const Algorithm& a : kAlgorithms)
    if (a.kind == kind && name == a.name) return &a;
  return nullptr;
}

const std::vector<Algorithm>& allAlgorithms() { return kAlgorithms; }

const char* collKindName(CollKind kind) { return collective(kind).shortName; }

std::vector<std::string> readAlgorithmOverrides() {
  std::vector<std::string> forced;
  for (const Collective& c : allCollectives()) {
    const size_t k = static_cast<size_t>(c.kind);
    if (forced.size() <= k) forced.resize(k + 1);
    forced[k] = paramString(c.overrideParam);
  }
  return forced;
}

Result selectAlgorithm(const zcollComm* comm, CollKind kind, size_t bytesPerRank, MemKind mem,
                       const Algorithm** out) {
  const int k = static_cast<int>(kind);
  const char* param = collective(kind).overrideParam;
  const std::string forced =
      k < static_cast<int>(comm->forcedAlgorithm.size()) ? comm->forcedAlgorithm[k] : "";
  if (!forced.empty()) {
    *out = findAlgorithm(kind, forced);
    if (*out == nullptr)
      return fail(zcollInvalidArgument, "%s=%s names no %s algorithm (see zcoll_info)", param,
                  forced.c_str(), collKindName(kind));
    return zcollSuccess;
  }
  *out = findAlgorithm(kind, defaultAlgorithm(comm, kind, bytesPerRank, mem));
  return *out ? zcollSuccess : fail(zcollInternalError, "no default %s algorithm",
                                    collKindName(kind));
}

namespace {

// What the flight recorder keeps of a call (core/flight_recorder.h).
FlightEntry describeForRecorder(CollKind kind, const CollArgs& args, const Algorithm& algo) {
  FlightEntry e;
  e.op = collKindName(kind);
  e.algorithm = algo.name;
  e.count = args.count;
  e.dtype = args.dtype;
  const bool reduces = kind == CollKind::kReduceScatter || kind == CollKind::kAllReduce ||
                       kind == CollKind::kReduce || kind == CollKind::kQuantizedReduceScatter ||
                       kind == CollKind::kQuantizedAllReduce;
  const bool rooted = kind == CollKind::kBroadcast || kind == CollKind::kReduce ||
                      kind == CollKind::kGather || kind == CollKind::kScatter;
  e.redop = reduces ? args.op : -1;
  e.root = rooted ? args.root : -1;
  if (args.quant != nullptr) {
    e.quantBits = args.quant->inter.bits;
    e.quantBlock = args.quant->inter.blockSize;
  }
  return e;
}

}  // namespace

Result runAlgorithm(zcollComm* comm, CollKind kind, const CollArgs& args, size_t bytesPerRank) {
  const Algorithm* algo = nullptr;
  ZCOLL_CHECK(selectAlgorithm(comm, kind, bytesPerRank, args.exec->memKind(), &algo));
  ZCOLL_TRACE_LOG(LogSubsys::kColl, "%s rank %d: %s/%s count %zu %s", comm->name.c_str(),
                  comm->rank, collKindName(kind), algo->name, args.count, dtypeName(args.dtype));
  RecordedOp record(comm, describeForRecorder(kind, args, *algo));
  Result r = algo->run(comm, args);
  // Device calls complete before they return: the executor's work (on the caller's stream) is
  // waited for, also after a failure, so no copy still touches a buffer the caller may free.
  Result flushed = args.exec->flush();
  if (r == zcollSuccess) r = flushed;
  record.finish(r);
  // A failure of this rank alone mid-collective (memory, a system call, a one-sided read)
  // leaves its peers waiting for it: break the comm and tell them, as a failed transfer does
  // (zcoll.h: the error state). Usage errors are found alike on every rank before anything is
  // sent, and leave the comm usable.
  if (r != zcollSuccess && r != zcollInvalidArgument && r != zcollInvalidUsage)
    breakAndNotify(comm, r);
  ZCOLL_CHECK(r);
  comm->stats.ops.fetch_add(1, std::memory_order_relaxed);
  return zcollSuccess;
}

std::function<Result(Executor&)> algorithmWork(zcollComm* comm, CollKind kind,
                                               const CollArgs& args, size_t bytesPerRank) {
  if (args.count == 0 && kind != CollKind::kAllToAllv) return {};
  // What the arguments point to, owned by the work.
  std::shared_ptr<const QuantSettings> quant;
  if (args.quant != nullptr) quant = std::make_shared<QuantSettings>(*args.quant);
  std::shared_ptr<const std::vector<size_t>> v;
  if (kind == CollKind::kAllToAllv) {
    const size_t w = comm->nranks;
    auto arrays = std::make_shared<std::vector<size_t>>();
    for (const size_t* a : {args.sendCounts, args.sendDispls, args.recvCounts, args.recvDispls})
      arrays->insert(arrays->end(), a, a + w);
    v = arrays;
  }
  return [comm, kind, args, bytesPerRank, quant, v](Executor& exec) {
    CollArgs a = args;
    a.exec = &exec;
    a.quant = quant.get();
    if (v) {
      const size_t w = comm->nranks;
      a.sendCounts = v->data();
      a.sendDispls = v->data() + w;
      a.recvCounts = v->data() + 2 * w;
      a.recvDispls = v->data() + 3 * w;
    }
    return runAlgorithm(comm, kind, a, bytesPerRank);
  };
}

}  // namespace zcoll
