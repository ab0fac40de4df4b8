// The algorithm registry: every algorithm by collective and name, the size-based defaults,
// and the ZCOLL_ALGO_<KIND> overrides tests use to force each one.
#include <cstring>

#include "coll/coll.h"
#include "core/params.h"

namespace zcoll {

namespace {

const std::vector<Algorithm> kAlgorithms = {
    {CollKind::kAllGather, "ring", allGatherRing},
    {CollKind::kAllGather, "direct", allGatherDirect},
    {CollKind::kAllGather, "hierarchical", allGatherHierarchical},
    {CollKind::kReduceScatter, "ring", reduceScatterRing},
    {CollKind::kReduceScatter, "direct", reduceScatterDirect},
    {CollKind::kAllReduce, "ring", allReduceRing},
    {CollKind::kAllReduce, "recursive_doubling", allReduceRecursiveDoubling},
    {CollKind::kAllToAll, "pairwise", allToAllPairwise},
    {CollKind::kBroadcast, "binomial", broadcastBinomial},
    {CollKind::kBroadcast, "pipelined_ring", broadcastPipelinedRing},
    {CollKind::kReduce, "ring", reduceRing},
    {CollKind::kGather, "direct", gatherDirect},
    {CollKind::kScatter, "direct", scatterDirect},
    {CollKind::kAllToAllv, "pairwise", allToAllvPairwise},
};

const char* kOverrideParam[] = {"ZCOLL_ALGO_ALLGATHER", "ZCOLL_ALGO_REDUCESCATTER",
                                "ZCOLL_ALGO_ALLREDUCE", "ZCOLL_ALGO_ALLTOALL",
                                "ZCOLL_ALGO_BROADCAST", "ZCOLL_ALGO_REDUCE",
                                "ZCOLL_ALGO_GATHER", "ZCOLL_ALGO_SCATTER",
                                "ZCOLL_ALGO_ALLTOALLV"};
static_assert(sizeof(kOverrideParam) / sizeof(kOverrideParam[0]) ==
                  static_cast<size_t>(CollKind::kNumKinds),
              "one override parameter per collective");

// Defaults: latency-bound sizes take the one-step algorithms, larger ones the
// bandwidth-optimal ones (on several equal nodes, the all-gather that crosses between nodes
// least). Thresholds from perf/RESULTS.md measurements.
const char* defaultAlgorithm(const zcollComm* comm, CollKind kind, size_t bytesPerRank) {
  const int nranks = comm->nranks;
  const bool severalEqualNodes = comm->layout.nodes > 1 && comm->layout.uniform();
  switch (kind) {
    case CollKind::kAllGather:
      if (bytesPerRank <= 32 * 1024) return "direct";
      return severalEqualNodes ? "hierarchical" : "ring";
    // (A two-stage reduce-scatter, inside the node then between nodes, measured slower than the
    // ring over a 1 Gbit/s emulated link: its stages run one after the other, where the ring
    // overlaps the reduction with the transfer; perf/RESULTS.md.)
    case CollKind::kReduceScatter: return bytesPerRank <= 32 * 1024 ? "direct" : "ring";
    case CollKind::kAllReduce:
      return bytesPerRank <= 64 * 1024 || bytesPerRank < static_cast<size_t>(nranks) * 64
                 ? "recursive_doubling"
                 : "ring";
    case CollKind::kAllToAll: return "pairwise";
    case CollKind::kBroadcast: return bytesPerRank <= 256 * 1024 ? "binomial" : "pipelined_ring";
    case CollKind::kReduce: return "ring";
    case CollKind::kGather: return "direct";
    case CollKind::kScatter: return "direct";
    case CollKind::kAllToAllv: return "pairwise";
    default: return "";
  }
}

const Algorithm* find(CollKind kind, const std::string& name) {
  for (const Algorithm& a : kAlgorithms)
    if (a.kind == kind && name == a.name) return &a;
  return nullptr;
}

}  // namespace

const std::vector<Algorithm>& allAlgorithms() { return kAlgorithms; }

const char* collKindName(CollKind kind) {
  static const char* kNames[] = {"allgather", "reducescatter", "allreduce", "alltoall",
                                 "broadcast", "reduce",        "gather",    "scatter",
                                 "alltoallv"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<size_t>(CollKind::kNumKinds),
                "one name per collective");
  return kNames[static_cast<int>(kind)];
}

std::vector<std::string> readAlgorithmOverrides() {
  std::vector<std::string> forced;
  for (const char* param : kOverrideParam) forced.push_back(paramString(param));
  return forced;
}

Result selectAlgorithm(const zcollComm* comm, CollKind kind, size_t bytesPerRank,
                       const Algorithm** out) {
  const int k = static_cast<int>(kind);
  const char* param = kOverrideParam[k];
  const std::string forced =
      k < static_cast<int>(comm->forcedAlgorithm.size()) ? comm->forcedAlgorithm[k] : "";
  if (!forced.empty()) {
    *out = find(kind, forced);
    if (*out == nullptr)
      return fail(zcollInvalidArgument, "%s=%s names no %s algorithm (see zcoll_info)", param,
                  forced.c_str(), collKindName(kind));
    return zcollSuccess;
  }
  *out = find(kind, defaultAlgorithm(comm, kind, bytesPerRank));
  return *out ? zcollSuccess : fail(zcollInternalError, "no default %s algorithm",
                                    collKindName(kind));
}

}  // namespace zcoll
