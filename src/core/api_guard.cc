#include "core/api_guard.h"

namespace zcoll {

void recordError(zcollComm* comm) {
  std::lock_guard<std::mutex> lock(comm->lastErrorMu);
  comm->lastError = threadLastError();
}

Result checkCommUsable(zcollComm* comm, const char* fn) {
  if (comm == nullptr) return fail(zcollInvalidArgument, "%s: comm is NULL", fn);
  if (comm->magic != kCommMagic)
    return fail(zcollInvalidArgument, "%s: comm is not a live communicator (destroyed?)", fn);
  if (comm->aborting.load())
    return fail(zcollInvalidUsage, "%s: communicator %s is being aborted", fn, comm->name.c_str());
  int err = comm->asyncError.load();
  if (err != zcollSuccess)
    return fail(static_cast<Result>(err),
                "%s: communicator %s is in the error state after an earlier %s; only "
                "zcollCommDestroy or zcollCommAbort may be called on it",
                fn, comm->name.c_str(), resultName(static_cast<Result>(err)));
  return zcollSuccess;
}

}  // namespace zcoll
