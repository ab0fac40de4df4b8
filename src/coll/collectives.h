// The one table of collectives that run through the algorithm registry, and their default
// algorithms as data. Everything that lists collectives reads it: the entry points' names in
// call-check messages, the ZCOLL_ALGO_<KIND> parameter rows (registered with the parameter
// table, so `zcoll_info --params` prints them), `zcoll_info --algorithms`, and the tests that
// force every algorithm. Adding a collective: its CollKind, one row in kCollectives, its default
// rows, its algorithms in registry.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/comm.h"
#include "exec/device_component.h"

namespace zcoll {

enum class CollKind {
  kAllGather,
  kReduceScatter,
  kAllReduce,
  kAllToAll,
  kBroadcast,
  kReduce,
  kGather,
  kScatter,
  kAllToAllv,
  kQuantizedAllGather,      // qwZ
  kAllGatherHier,           // hpZ, forward
  kAllGatherFromSecondary,  // hpZ, backward
  kQuantizedReduceScatter,  // qgZ
  kQuantizedAllReduce,      // qgZ then qwZ
  kNumKinds
};

struct Collective {
  CollKind kind;
  const char* apiName;        // the entry point: "zcollAllGather"
  const char* shortName;      // logs and zcoll_info: "allgather"
  const char* overrideParam;  // forces an algorithm: "ZCOLL_ALGO_ALLGATHER"
  uint32_t callCheckId;       // exchanged by ZCOLL_CHECK_CALLS (wire protocol: never renumber)
  const char* what;           // in words, for the parameter's description: "all-gather"
};

const std::vector<Collective>& allCollectives();
const Collective& collective(CollKind kind);
// The collective whose call-check id is `id`; NULL when none is.
const Collective* collectiveByCallCheckId(uint32_t id);
// The call-check id of zcollBarrier, which runs no registry algorithm.
constexpr uint32_t kBarrierCallCheckId = 6;

// ---- Defaults as data -------------------------------------------------------------------------
// A collective's default algorithm is the first of its rules, in table order, whose size bound
// and condition hold for the call: `algorithm` from `fromBytes` bytes per rank on, when `when`
// holds. Every collective's last rule holds always (from 0 bytes), so one always applies.
enum class Condition {
  kAlways,
  kSeveralEqualNodes,   // more than one node, every node with the same number of ranks
  kUnevenNodes,         // nodes with different numbers of ranks
  // Every peer reads this rank's buffers in place (coll/in_place.h) for the call's memory kind:
  // host, every peer on shm; device, every peer on cuda_ipc exposing caller buffers (none yet).
  kEveryPeerSharesMemory,
  // Every peer of this rank's node maps its windows for the call's memory kind (shm; cuda_ipc).
  kEveryNodePeerSharesMemory,
  kChunksUnder64Bytes,  // bytes per rank < 64 x ranks: a ring's chunks would be tiny
};

struct DefaultRule {
  CollKind kind;
  size_t fromBytes;  // bytes per rank
  Condition when;
  const char* algorithm;  // a name ZCOLL_ALGO_<KIND> takes
};

const std::vector<DefaultRule>& defaultRules();
const char* conditionName(Condition c);
// Whether `c` holds for a call of `bytesPerRank` bytes per rank on buffers of `mem` on `comm`.
bool conditionHolds(const zcollComm* comm, Condition c, size_t bytesPerRank,
                    MemKind mem = MemKind::kHost);
// The default algorithm's name for such a call.
const char* defaultAlgorithm(const zcollComm* comm, CollKind kind, size_t bytesPerRank,
                             MemKind mem = MemKind::kHost);
// The rules of `kind` in words, in the syntax ZCOLL_ALGO_<KIND> takes:
// "hierarchical from 32769 B per rank if several_equal_nodes; ...; else direct".
std::string describeDefaults(CollKind kind);
// The names of `kind`'s algorithms, in registry order (tests force each one).
std::vector<std::string> algorithmNames(CollKind kind);

}  // namespace zcoll
