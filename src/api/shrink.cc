// Public C API: zcollCommRevoke and zcollCommShrink (core/shrink.h has the exchange).
#include <algorithm>
#include <vector>

#include "api/guard.h"
#include "api/validate.h"
#include "core/init.h"
#include "core/peer_notice.h"
#include "core/progress.h"
#include "core/shrink.h"

using namespace zcoll;

namespace {

// The arguments, checked before any exchange; *excluded: sorted, *self: this rank is in it.
Result validateShrink(const zcollComm* comm, const int* excludeRanks, int excludeCount,
                      const zcollComm_t* newcomm, int flags, std::vector<int>* excluded,
                      bool* self) {
  if (newcomm == nullptr)
    return fail(zcollInvalidArgument, "zcollCommShrink: newcomm pointer is NULL");
  if (flags != ZCOLL_SHRINK_DEFAULT && flags != ZCOLL_SHRINK_ABORT)
    return fail(zcollInvalidArgument, "zcollCommShrink: shrinkFlags %d is neither "
                "ZCOLL_SHRINK_DEFAULT (0) nor ZCOLL_SHRINK_ABORT (1)", flags);
  if (excludeCount < 0 || (excludeCount > 0 && excludeRanks == nullptr))
    return fail(zcollInvalidArgument, "zcollCommShrink: excludeCount %d with excludeRanks %s",
                excludeCount, excludeRanks == nullptr ? "NULL" : "set");
  if (excludeCount > comm->nranks)  // before reading that many: excludeRanks may be shorter
    return fail(zcollInvalidArgument, "zcollCommShrink: excludeCount %d is more than the %d "
                "ranks", excludeCount, comm->nranks);
  excluded->assign(excludeRanks, excludeRanks + excludeCount);
  std::sort(excluded->begin(), excluded->end());
  for (size_t i = 0; i < excluded->size(); ++i) {
    const int r = (*excluded)[i];
    if (r < 0 || r >= comm->nranks)
      return fail(zcollInvalidArgument, "zcollCommShrink: excluded rank %d is not in [0, %d)", r,
                  comm->nranks);
    if (i > 0 && (*excluded)[i - 1] == r)
      return fail(zcollInvalidArgument, "zcollCommShrink: rank %d is excluded twice", r);
  }
  if (excludeCount == comm->nranks)
    return fail(zcollInvalidArgument, "zcollCommShrink: all %d ranks are excluded",
                comm->nranks);
  *self = std::binary_search(excluded->begin(), excluded->end(), comm->rank);
  return zcollSuccess;
}

// Puts `comm` in the error state on purpose (any thread): the waits of a running call notice
// `revoked` (core/progress.cc), queued calls and later ones are refused (api/guard.cc).
void revoke(zcollComm* comm) {
  comm->revoked.store(true);
  breakComm(comm, zcollRemoteError);
}

}  // namespace

zcollResult_t zcollCommRevoke(zcollComm_t comm) {
  return guarded(nullptr, [&]() -> Result {
    Pin pin = pinComm(comm);
    if (pin != Pin::kPinned) return notPinned(pin, comm, "zcollCommRevoke");
    revoke(comm);
    unpinComm(comm);
    return zcollSuccess;
  });
}

zcollResult_t zcollCommShrink(zcollComm_t comm, const int* excludeRanks, int excludeCount,
                              zcollComm_t* newcomm, zcollConfig_t* config, int shrinkFlags) {
  if (newcomm != nullptr) *newcomm = nullptr;
  zcollComm_t made = nullptr;
  zcollResult_t r = pinnedCall(comm, "zcollCommShrink", [&]() -> Result {
    // Every call on a live comm is an attempt, whatever it returns (taking no part, refused,
    // failed): the ranks that take part in a later call then agree on its number, its tags.
    const uint32_t attempt = comm->shrinkAttempts.fetch_add(1) + 1;
    std::vector<int> excluded;
    bool self = false;
    ZCOLL_CHECK(refuseInGroup("zcollCommShrink"));
    ZCOLL_CHECK(validateShrink(comm, excludeRanks, excludeCount, newcomm, shrinkFlags, &excluded,
                               &self));
    InitSettings s = inheritedSettings(comm, ".shrink");
    ZCOLL_CHECK(readConfig(config, &s));
    if (self) return zcollSuccess;  // excluded: takes no part
    if (shrinkFlags == ZCOLL_SHRINK_ABORT) revoke(comm);  // before the turn: queued calls fail
    return comm->engine.runInOrder([&] {
      Result turn = guarded(comm, [&]() -> Result {
        if (shrinkFlags == ZCOLL_SHRINK_ABORT) {
          breakAndNotify(comm, zcollRemoteError);  // peers blocked on this rank fail at once
        } else if (comm->asyncError.load() != zcollSuccess) {
          return fail(zcollInvalidUsage, "zcollCommShrink: communicator %s is %s; shrink it "
                      "with ZCOLL_SHRINK_ABORT", comm->name.c_str(),
                      comm->revoked.load() ? "revoked" : "in the error state");
        }
        return shrinkComm(comm, excluded, attempt, s, &made);
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
  if (newcomm != nullptr) *newcomm = made;
  return r;
}
