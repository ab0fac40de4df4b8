// NCCL 2.29-2.30 calls past 2.28's header (torch 2.15 imports them): growing a communicator
// (ncclCommGetUniqueId, ncclCommGrow over zcollCommGetUniqueId/zcollCommGrow, same arguments),
// and suspend/resume/memory statistics: zcoll keeps no device memory it could release while a
// communicator idles, so suspend and resume only change what ncclCommMemStats reports.
#include <nccl.h>

#include <cstdint>
#include <cstring>

#include "comm.h"
#include "errors.h"
#include "fallback.h"

using namespace zcoll_nccl;

namespace {
constexpr int kSuspendMem = 0x01;  // NCCL_SUSPEND_MEM
enum { kStatGpuMemSuspend = 0, kStatGpuMemSuspended = 1, kStatGpuMemPersist = 2, kStatGpuMemTotal = 3 };
}  // namespace

extern "C" {

ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  ncclResult_t r = readyComm(comm, "ncclCommGetUniqueId");
  if (r != ncclSuccess) return r;
  if (uniqueId == nullptr) return fail(ncclInvalidArgument, "ncclCommGetUniqueId: uniqueId is NULL");
  zcollUniqueId zid;
  zcollResult_t zr = zcollCommGetUniqueId(comm->z, &zid);
  if (zr != zcollSuccess) return fromZcoll(zr, comm->z);
  std::memcpy(uniqueId, &zid, sizeof(zid));
  return ncclSuccess;
}

// Members pass comm (the coordinator also the id, the others NULL) and rank -1; new ranks pass
// comm NULL, the id and their rank (zcoll.h, zcollCommGrow).
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config) {
  if (comm != nullptr) {
    ncclResult_t r = readyComm(comm, "ncclCommGrow");
    if (r != ncclSuccess) return r;
  }
  if (newcomm == nullptr) return fail(ncclInvalidArgument, "ncclCommGrow: newcomm is NULL");
  *newcomm = nullptr;
  zcollConfig_t zc = ZCOLL_CONFIG_INITIALIZER;
  if (config != nullptr && config->magic == 0xcafebeef &&
      config->size >= offsetof(ncclConfig_t, commName) + sizeof(const char*))
    zc.commName = config->commName;
  zcollUniqueId zid;
  if (uniqueId != nullptr) std::memcpy(&zid, uniqueId, sizeof(zid));
  zcollComm_t child = nullptr;
  zcollResult_t zr = zcollCommGrow(comm ? comm->z : nullptr, nRanks, uniqueId ? &zid : nullptr,
                                   rank, &child, config ? &zc : nullptr);
  if (zr != zcollSuccess) return fromZcoll(zr, comm ? comm->z : nullptr);
  ncclComm_t grown = adoptComm(child);
  makeChildFallbackComm(grown);
  *newcomm = grown;
  return ncclSuccess;
}

ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  ncclResult_t r = readyComm(comm, "ncclCommSuspend");
  if (r != ncclSuccess) return r;
  if ((flags & ~kSuspendMem) != 0)
    return fail(ncclInvalidArgument, "ncclCommSuspend: flags 0x%x: it takes NCCL_SUSPEND_MEM", flags);
  std::lock_guard<std::mutex> lock(comm->mutex);
  comm->suspended = true;
  return ncclSuccess;
}

ncclResult_t ncclCommResume(ncclComm_t comm) {
  ncclResult_t r = readyComm(comm, "ncclCommResume");
  if (r != ncclSuccess) return r;
  std::lock_guard<std::mutex> lock(comm->mutex);
  comm->suspended = false;
  return ncclSuccess;
}

// Suspendable memory 0 (zcoll has none to release), persistent and total 0 (zcoll does not
// account its device memory per communicator here), suspended 0 or 1.
ncclResult_t ncclCommMemStats(ncclComm_t comm, int stat, uint64_t* value) {
  ncclResult_t r = readyComm(comm, "ncclCommMemStats");
  if (r != ncclSuccess) return r;
  if (value == nullptr) return fail(ncclInvalidArgument, "ncclCommMemStats: value is NULL");
  if (stat < kStatGpuMemSuspend || stat > kStatGpuMemTotal)
    return fail(ncclInvalidArgument, "ncclCommMemStats: stat %d is not an ncclCommMemStat_t", stat);
  std::lock_guard<std::mutex> lock(comm->mutex);
  *value = stat == kStatGpuMemSuspended ? (comm->suspended ? 1 : 0) : 0;
  return ncclSuccess;
}

}  // extern "C"
