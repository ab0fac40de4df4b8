// A communicator's life after init: finalize, destroy, abort, split, shrink, revoke, the
// asynchronous error, and the queries (count, device, rank).
#include <string>

#include "comm.h"
#include "errors.h"
#include "fallback.h"
#include "groups.h"

using namespace zcoll_nccl;

namespace {

// Whether `comm` may be destroyed or aborted: a live handle (its init may have failed).
ncclResult_t checkHandle(ncclComm_t comm, const char* call) {
  if (!liveComm(comm))
    return fail(ncclInvalidArgument, "%s: comm %p is not a live communicator", call,
                static_cast<void*>(comm));
  return ncclSuccess;
}

ncclResult_t release(ncclComm_t comm, bool abort, const char* call) {
  if (comm == nullptr) return ncclSuccess;
  ncclResult_t r = checkHandle(comm, call);
  if (r != ncclSuccess) return r;
  removeLiveComm(comm);
  {
    std::lock_guard<std::mutex> lock(comm->initMutex);
    if (comm->initThread.joinable()) comm->initThread.join();
  }
  destroyFallbackComm(comm, abort);
  zcollResult_t zr = zcollSuccess;
  // comm->z stays as it was: a call still running on another thread may read it, and zcoll
  // recognises a freed handle without reading it.
  if (comm->z != nullptr) zr = abort ? zcollCommAbort(comm->z) : zcollCommDestroy(comm->z);
  retireComm(comm);
  return zr == zcollSuccess ? ncclSuccess : fromZcoll(zr, nullptr);
}

ncclResult_t childConfig(const ncclConfig_t* config, const char* call, zcollConfig_t* out) {
  *out = ZCOLL_CONFIG_INITIALIZER;
  if (config == nullptr) return ncclSuccess;
  if (config->magic != 0xcafebeef || config->size < offsetof(ncclConfig_t, blocking) + sizeof(int))
    return fail(ncclInvalidArgument, "%s: config was not initialized with NCCL_CONFIG_INITIALIZER",
                call);
  if (config->size >= offsetof(ncclConfig_t, commName) + sizeof(const char*))
    out->commName = config->commName;
  return ncclSuccess;
}

}  // namespace

extern "C" {

// zcoll has nothing to flush that destroy does not: every call has returned or is queued on its
// stream, and ncclCommDestroy runs queued device calls first. Finalize checks the handle.
ncclResult_t ncclCommFinalize(ncclComm_t comm) { return readyComm(comm, "ncclCommFinalize"); }

ncclResult_t ncclCommDestroy(ncclComm_t comm) { return release(comm, false, "ncclCommDestroy"); }

ncclResult_t ncclCommAbort(ncclComm_t comm) { return release(comm, true, "ncclCommAbort"); }

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  ncclResult_t r = readyComm(comm, "ncclCommSplit");
  if (r != ncclSuccess) return r;
  if (newcomm == nullptr) return fail(ncclInvalidArgument, "ncclCommSplit: newcomm is NULL");
  zcollConfig_t zc;
  if ((r = childConfig(config, "ncclCommSplit", &zc)) != ncclSuccess) return r;
  zcollComm_t child = nullptr;
  zcollResult_t zr = zcollCommSplit(comm->z, color, key, &child, config ? &zc : nullptr);
  *newcomm = nullptr;
  if (zr != zcollSuccess) return fromZcoll(zr, comm->z);
  *newcomm = adoptComm(child);
  makeChildFallbackComm(*newcomm);
  return ncclSuccess;
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  ncclResult_t r = readyComm(comm, "ncclCommShrink");
  if (r != ncclSuccess) return r;
  if (newcomm == nullptr) return fail(ncclInvalidArgument, "ncclCommShrink: newcomm is NULL");
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
    return fail(ncclInvalidArgument, "ncclCommShrink: shrinkFlags 0x%x: it takes "
                "NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT", shrinkFlags);
  zcollConfig_t zc;
  if ((r = childConfig(config, "ncclCommShrink", &zc)) != ncclSuccess) return r;
  const int flags = shrinkFlags == NCCL_SHRINK_ABORT ? ZCOLL_SHRINK_ABORT : ZCOLL_SHRINK_DEFAULT;
  zcollComm_t child = nullptr;
  zcollResult_t zr = zcollCommShrink(comm->z, excludeRanksList, excludeRanksCount, &child,
                                     config ? &zc : nullptr, flags);
  *newcomm = nullptr;
  if (zr != zcollSuccess) return fromZcoll(zr, comm->z);
  *newcomm = adoptComm(child);
  makeChildFallbackComm(*newcomm);
  return ncclSuccess;
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  ncclResult_t r = readyComm(comm, "ncclCommRevoke");
  if (r != ncclSuccess) return r;
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return fail(ncclInvalidArgument, "ncclCommRevoke: revokeFlags 0x%x must be "
                "NCCL_REVOKE_DEFAULT", revokeFlags);
  return fromZcoll(zcollCommRevoke(comm->z), comm->z);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (asyncError == nullptr)
    return fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
  if (!liveComm(comm))
    return fail(ncclInvalidArgument, "ncclCommGetAsyncError: comm %p is not a live communicator",
                static_cast<void*>(comm));
  const int state = comm->initState.load();
  if (state != ncclSuccess) {
    *asyncError = static_cast<ncclResult_t>(state);
    if (state != ncclInProgress) fail(*asyncError, "%s", comm->initError.c_str());
    return ncclSuccess;
  }
  {
    std::lock_guard<std::mutex> lock(comm->initMutex);
    if (comm->initThread.joinable()) comm->initThread.join();
  }
  zcollResult_t async = zcollSuccess;
  zcollResult_t zr = zcollCommGetAsyncError(comm->z, &async);
  if (zr != zcollSuccess) return fromZcoll(zr, comm->z);
  *asyncError = async == zcollSuccess ? ncclSuccess : fromZcoll(async, comm->z);
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  ncclResult_t r = readyComm(comm, "ncclCommCount");
  if (r != ncclSuccess) return r;
  if (count == nullptr) return fail(ncclInvalidArgument, "ncclCommCount: count is NULL");
  return fromZcoll(zcollCommCount(comm->z, count), comm->z);
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  ncclResult_t r = readyComm(comm, "ncclCommUserRank");
  if (r != ncclSuccess) return r;
  if (rank == nullptr) return fail(ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
  return fromZcoll(zcollCommUserRank(comm->z, rank), comm->z);
}

// The device the comm works on (zcollCommDevice: the current device at init, as NCCL); 0 for a
// rank without one (host buffers only: there is no device to name, and 0 is what programs that
// call cudaSetDevice with it can use).
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  ncclResult_t r = readyComm(comm, "ncclCommCuDevice");
  if (r != ncclSuccess) return r;
  if (device == nullptr) return fail(ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
  int ordinal = -1;
  if ((r = fromZcoll(zcollCommDevice(comm->z, &ordinal), comm->z)) != ncclSuccess) return r;
  *device = ordinal < 0 ? 0 : ordinal;
  return ncclSuccess;
}

}  // extern "C"
