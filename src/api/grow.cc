// Public C API: zcollCommGetUniqueId and zcollCommGrow (core/grow.h has the exchange).
#include <chrono>
#include <cstring>

#include "api/guard.h"
#include "api/validate.h"
#include "base/params.h"
#include "base/tags.h"
#include "core/grow.h"

using namespace zcoll;

namespace {

using Clock = std::chrono::steady_clock;

// A member's arguments: it keeps its rank (-1), asks for more ranks than it has, and passes
// either NULL or the id this comm handed out (*isCoordinator then).
Result validateMember(const zcollComm* comm, int nRanks, const zcollUniqueId* uniqueId, int rank,
                      bool* isCoordinator) {
  if (rank != -1)
    return fail(zcollInvalidArgument, "zcollCommGrow: rank %d on a member (comm set): a member "
                "keeps its rank, pass -1 (only new ranks, comm NULL, pass theirs)", rank);
  if (nRanks <= comm->nranks || nRanks >= kMaxRanks)
    return fail(zcollInvalidArgument, "zcollCommGrow: nRanks %d must be more than the %d ranks "
                "of the communicator (and below %d)", nRanks, comm->nranks, kMaxRanks);
  *isCoordinator = uniqueId != nullptr;
  if (uniqueId == nullptr) return zcollSuccess;
  const bool handedOut = comm->growIdActive && Clock::now() < comm->growIdExpires &&
                         std::memcmp(uniqueId, &comm->growId, sizeof(zcollUniqueId)) == 0;
  if (!handedOut)
    return fail(zcollInvalidArgument, "zcollCommGrow: uniqueId is not the id "
                "zcollCommGetUniqueId handed out on this communicator, or that id was used or "
                "has expired (after %d s): only the member that made it passes it, the others "
                "pass NULL", comm->timeoutSec);
  return zcollSuccess;
}

// A new rank's arguments: an id from zcollCommGetUniqueId (*id), a rank from its parent's size.
Result validateJoiner(int nRanks, const zcollUniqueId* uniqueId, int rank, GrowId* id) {
  if (uniqueId == nullptr)
    return fail(zcollInvalidArgument, "zcollCommGrow: a new rank (comm NULL) needs the uniqueId "
                "from zcollCommGetUniqueId");
  ZCOLL_CHECK(readGrowId(*uniqueId, id));
  if (nRanks <= id->parentRanks || nRanks >= kMaxRanks)
    return fail(zcollInvalidArgument, "zcollCommGrow: nRanks %d must be more than the %d ranks "
                "of the communicator that grows (and below %d)", nRanks, id->parentRanks,
                kMaxRanks);
  if (rank < id->parentRanks || rank >= nRanks)
    return fail(zcollInvalidArgument, "zcollCommGrow: rank %d of a new rank must be in [%d, %d): "
                "new ranks are numbered from the size of the communicator that grows",
                rank, id->parentRanks, nRanks);
  return zcollSuccess;
}

Result joinAsNewRank(int nRanks, const zcollUniqueId* uniqueId, int rank, zcollConfig_t* config,
                     zcollComm_t* made) {
  GrowId id{};
  ZCOLL_CHECK(validateJoiner(nRanks, uniqueId, rank, &id));
  LogRankScope logRankScope(rank);
  ZCOLL_CHECK(checkParamValues());
  InitSettings s = defaultSettings();
  ZCOLL_CHECK(readConfig(config, &s));
  const bool ownName = config != nullptr && config->commName != nullptr;
  return joinComm(id, nRanks, rank, s, ownName, made);
}

}  // namespace

extern "C" {

zcollResult_t zcollCommGetUniqueId(zcollComm_t comm, zcollUniqueId* uniqueId) {
  const char* fn = "zcollCommGetUniqueId";
  return pinnedCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkCommUsable(comm, fn));
    if (uniqueId == nullptr) return fail(zcollInvalidArgument, "%s: uniqueId is NULL", fn);
    if (comm->growIdActive && Clock::now() < comm->growIdExpires)
      return fail(zcollInvalidUsage, "%s: this communicator's last id has not been used by a "
                  "zcollCommGrow yet (one id at a time; it expires %d s after it was made)", fn,
                  comm->timeoutSec);
    GrowId id{};
    ZCOLL_CHECK(makeGrowId(comm, &id));
    comm->growId = toUniqueId(id);
    comm->growIdActive = true;
    comm->growIdExpires = Clock::now() + std::chrono::seconds(comm->timeoutSec);
    *uniqueId = comm->growId;
    return zcollSuccess;
  });
}

zcollResult_t zcollCommGrow(zcollComm_t comm, int nRanks, const zcollUniqueId* uniqueId, int rank,
                            zcollComm_t* newcomm, zcollConfig_t* config) {
  if (newcomm == nullptr)
    return guarded(nullptr, [] {
      return fail(zcollInvalidArgument, "zcollCommGrow: newcomm pointer is NULL");
    });
  *newcomm = nullptr;
  zcollComm_t made = nullptr;
  if (comm == nullptr) {
    zcollResult_t r =
        guarded(nullptr, [&] { return joinAsNewRank(nRanks, uniqueId, rank, config, &made); });
    *newcomm = made;
    return r;
  }
  zcollResult_t r = pinnedCall(comm, "zcollCommGrow", [&]() -> Result {
    ZCOLL_CHECK(refuseInGroup("zcollCommGrow"));
    bool coordinator = false;
    ZCOLL_CHECK(validateMember(comm, nRanks, uniqueId, rank, &coordinator));
    InitSettings s = inheritedSettings(comm, ".grow");
    ZCOLL_CHECK(readConfig(config, &s));
    GrowId id{};
    if (coordinator) {
      ZCOLL_CHECK(readGrowId(*uniqueId, &id));
      comm->growIdActive = false;  // used: whatever comes of it, the service serves this grow
    }
    return comm->engine.runInOrder([&] {
      Result turn = guarded(comm, [&]() -> Result {
        if (comm->asyncError.load() != zcollSuccess) {
          if (coordinator) cancelRendezvousRoot(id.rendezvous);  // the new ranks learn at once
          return fail(zcollInvalidUsage, "zcollCommGrow: communicator %s is %s; shrink it first "
                      "(zcollCommShrink with ZCOLL_SHRINK_ABORT), then grow the new one",
                      comm->name.c_str(), comm->revoked.load() ? "revoked" : "in the error state");
        }
        return growComm(comm, nRanks, coordinator ? &id : nullptr, s, &made);
      });
      if (turn != zcollSuccess) settleCancelledTransfers(comm);
      return turn;
    });
  });
  if (r != zcollSuccess && made != nullptr) {
    // Built, but an abort of the parent interrupted the call (abortedDuringCall): not handed out.
    if (unregisterIfIdle(made) == 0) destroyComm(made, 0);
    made = nullptr;
  }
  *newcomm = made;
  return r;
}

}  // extern "C"
