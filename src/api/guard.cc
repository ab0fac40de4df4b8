#include "api/guard.h"

#include <mutex>

namespace zcoll {

void recordError(zcollComm* comm) {
  std::lock_guard<std::mutex> lock(comm->lastErrorMu);
  comm->lastError = threadLastError();
}

void settleCancelledTransfers(zcollComm* comm) {
  constexpr int kSettleMs = 100;
  for (Transport* t : comm->transports()) t->settleCancelled(kSettleMs);
}

Result notPinned(Pin why, const zcollComm* comm, const char* fn) {
  if (why == Pin::kAborting)
    return fail(zcollInvalidUsage, "%s: the communicator is being aborted", fn);
  if (comm == nullptr) return fail(zcollInvalidArgument, "%s: comm is NULL", fn);
  return fail(zcollInvalidArgument, "%s: comm is not a live communicator (destroyed?)", fn);
}

Result abortedDuringCall(const char* fn) {
  return fail(zcollRemoteError, "%s: the communicator was aborted (zcollCommAbort) while this "
              "call ran; its outputs are undefined and the handle is freed", fn);
}

Result notRunQueued(const zcollComm* comm, const char* fn) {
  int err = comm->asyncError.load();
  return fail(err != zcollSuccess ? static_cast<Result>(err) : zcollRemoteError,
              "%s: not run: communicator %s was aborted or destroyed before its turn", fn,
              comm->name.c_str());
}

Result checkCommUsable(zcollComm* comm, const char* fn) {
  if (comm->aborting.load())  // pinned before the abort marked it: a call it interrupts
    return fail(zcollRemoteError, "%s: communicator %s is being aborted (zcollCommAbort)", fn,
                comm->name.c_str());
  if (comm->revoked.load())
    return fail(zcollRemoteError, "%s: communicator %s was revoked (zcollCommRevoke); only "
                "zcollCommShrink with ZCOLL_SHRINK_ABORT, zcollCommDestroy or zcollCommAbort may "
                "be called on it", fn, comm->name.c_str());
  int err = comm->asyncError.load();
  if (err != zcollSuccess)
    return fail(static_cast<Result>(err),
                "%s: communicator %s is in the error state after an earlier %s; only "
                "zcollCommShrink with ZCOLL_SHRINK_ABORT, zcollCommDestroy or zcollCommAbort may "
                "be called on it",
                fn, comm->name.c_str(), resultName(static_cast<Result>(err)));
  return zcollSuccess;
}

}  // namespace zcoll
