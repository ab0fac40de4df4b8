// Communicator creation: ncclGetUniqueId, ncclCommInitRank, ncclCommInitRankConfig (blocking,
// or non-blocking with config.blocking = 0: ncclInProgress, then ncclCommGetAsyncError polls
// to the result), ncclCommInitRankScalable, ncclCommInitAll.
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "comm.h"
#include "errors.h"
#include "fallback.h"
#include "groups.h"
#include "log.h"
#include "quantize_policy.h"

namespace zcoll_nccl {
namespace {

std::mutex gLiveMutex;
std::set<ncclComm_t>& liveSet() {
  static auto* s = new std::set<ncclComm_t>();  // never destroyed: usable at exit
  return *s;
}

// Retired handles (retireComm), kept reachable for the life of the process.
std::vector<ncclComm_t>& retired() {
  static auto* r = new std::vector<ncclComm_t>();
  return *r;
}

// Logged once per process: what this library is.
void sayWhatWeAre() {
  static std::once_flag once;
  std::call_once(once, [] {
    int zv = 0;
    zcollGetVersion(&zv);
    logInfo("libzcoll_nccl.so: NCCL %d.%d.%d's API served by zcoll %d.%d.%d (ncclGetVersion "
            "reports %d)", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, zv / 10000, (zv / 100) % 100,
            zv % 100, NCCL_VERSION_CODE);
  });
}

ncclResult_t checkInitArgs(ncclComm_t* comm, int nranks, int rank, const char* call) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "%s: comm is NULL", call);
  *comm = nullptr;
  if (nranks < 1) return fail(ncclInvalidArgument, "%s: nranks %d is below 1", call, nranks);
  if (rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, "%s: rank %d is outside [0, %d)", call, rank, nranks);
  return ncclSuccess;
}

// Whether config asks for non-blocking init; ncclInvalidArgument for a config not made with
// NCCL_CONFIG_INITIALIZER.
ncclResult_t readConfig(const ncclConfig_t* config, const char* call, bool* blocking,
                        const char** name) {
  *blocking = true;
  *name = nullptr;
  if (config == nullptr) return ncclSuccess;
  if (config->magic != 0xcafebeef || config->size < offsetof(ncclConfig_t, blocking) + sizeof(int))
    return fail(ncclInvalidArgument,
                "%s: config was not initialized with NCCL_CONFIG_INITIALIZER (size %zu, magic "
                "0x%x)", call, config->size, config->magic);
  if (config->blocking != NCCL_CONFIG_UNDEF_INT && config->blocking != 0 && config->blocking != 1)
    return fail(ncclInvalidArgument, "%s: config.blocking is %d; it takes 0 or 1", call,
                config->blocking);
  *blocking = config->blocking != 0;
  if (config->size >= offsetof(ncclConfig_t, commName) + sizeof(const char*))
    *name = config->commName;
  return ncclSuccess;
}

ncclResult_t startInit(ncclComm_t* out, int nranks, ncclUniqueId id, int rank,
                       const ncclConfig_t* config, const char* call) {
  sayWhatWeAre();
  ncclResult_t r = checkInitArgs(out, nranks, rank, call);
  if (r != ncclSuccess) return r;
  bool blocking;
  const char* name;
  if ((r = readConfig(config, call, &blocking, &name)) != ncclSuccess) return r;
  if ((r = checkQuantizePolicy()) != ncclSuccess) return r;
  ncclComm_t comm = new ncclComm();
  comm->nranks = nranks;
  comm->rank = rank;
  std::string commName = name ? name : "";
  addLiveComm(comm);
  const bool deferred = !blocking || groupDepth() > 0;
  if (!deferred) {
    r = initComm(comm, nranks, id, rank, name);
    comm->initState = r;
    if (r != ncclSuccess) {
      removeLiveComm(comm);
      freeComm(comm);
      return r;
    }
    *out = comm;
    return ncclSuccess;
  }
  comm->initThread = std::thread([comm, nranks, id, rank, commName] {
    ncclResult_t ir = initComm(comm, nranks, id, rank, commName.empty() ? nullptr : commName.c_str());
    if (ir != ncclSuccess) comm->initError = lastError();
    comm->initState = ir;
  });
  *out = comm;
  if (groupDepth() > 0) deferToGroupEnd(comm);
  return blocking ? ncclSuccess : ncclInProgress;
}

}  // namespace

void addLiveComm(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(gLiveMutex);
  liveSet().insert(comm);
}

void removeLiveComm(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(gLiveMutex);
  liveSet().erase(comm);
}

bool liveComm(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(gLiveMutex);
  return comm != nullptr && liveSet().count(comm) != 0;
}

ncclResult_t readyComm(ncclComm_t comm, const char* call) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "%s: comm is NULL", call);
  if (!liveComm(comm))
    return fail(ncclInvalidArgument, "%s: comm %p is not a live communicator (destroyed?)", call,
                static_cast<void*>(comm));
  {
    std::lock_guard<std::mutex> lock(comm->initMutex);
    if (comm->initThread.joinable()) comm->initThread.join();
  }
  const int state = comm->initState.load();
  if (state != ncclSuccess)
    return fail(static_cast<ncclResult_t>(state), "%s: the communicator's init failed: %s", call,
                comm->initError.c_str());
  return ncclSuccess;
}

ncclResult_t initComm(ncclComm_t comm, int nranks, const ncclUniqueId& id, int rank,
                      const char* commName) {
  static_assert(sizeof(ncclUniqueId) == sizeof(zcollUniqueId), "unique ids differ in size");
  zcollUniqueId zid;
  std::memcpy(&zid, &id, sizeof(zid));
  zcollConfig_t config = ZCOLL_CONFIG_INITIALIZER;
  config.commName = commName;
  zcollResult_t zr = zcollCommInitRankConfig(&comm->z, nranks, zid, rank, &config);
  if (zr != zcollSuccess) return fromZcoll(zr, nullptr);
  makeFallbackComm(comm);
  return ncclSuccess;
}

ncclComm_t adoptComm(zcollComm_t z) {
  if (z == nullptr) return nullptr;
  ncclComm_t comm = new ncclComm();
  comm->z = z;
  zcollCommCount(z, &comm->nranks);
  zcollCommUserRank(z, &comm->rank);
  comm->initState = ncclSuccess;
  addLiveComm(comm);
  return comm;
}

void freeComm(ncclComm_t comm) {
  {
    std::lock_guard<std::mutex> lock(comm->initMutex);
    if (comm->initThread.joinable()) comm->initThread.join();
  }
  comm->magic = 0;
  delete comm;
}

void retireComm(ncclComm_t comm) {
  {
    std::lock_guard<std::mutex> lock(comm->initMutex);
    if (comm->initThread.joinable()) comm->initThread.join();
  }
  {
    std::lock_guard<std::mutex> lock(gLiveMutex);
    retired().push_back(comm);
  }
  std::lock_guard<std::mutex> lock(comm->mutex);
  comm->magic = 0;
  comm->secondaries.clear();
  comm->preMulOps.clear();
  comm->windowBuffers.clear();
}

}  // namespace zcoll_nccl

using namespace zcoll_nccl;

extern "C" {

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  sayWhatWeAre();
  if (uniqueId == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  zcollUniqueId zid;
  zcollResult_t r = zcollGetUniqueId(&zid);
  if (r != zcollSuccess) return fromZcoll(r, nullptr);
  std::memcpy(uniqueId, &zid, sizeof(zid));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return startInit(comm, nranks, commId, rank, nullptr, "ncclCommInitRank");
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  return startInit(comm, nranks, commId, rank, config, "ncclCommInitRankConfig");
}

// zcoll's rendezvous has one root: the first id serves (every rank passes the same list).
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config) {
  if (nId < 1 || commIds == nullptr)
    return fail(ncclInvalidArgument, "ncclCommInitRankScalable: nId %d with commIds %p: give at "
                "least one id", nId, static_cast<void*>(commIds));
  return startInit(newcomm, nranks, commIds[0], myrank, config, "ncclCommInitRankScalable");
}

// One process, ndev ranks: each rank's init on a thread of its own (zcoll's ranks are not tied
// to devices; devlist is checked but only names them).
ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr) return fail(ncclInvalidArgument, "ncclCommInitAll: comm is NULL");
  if (ndev < 1) return fail(ncclInvalidArgument, "ncclCommInitAll: ndev %d is below 1", ndev);
  if (devlist != nullptr)
    for (int i = 0; i < ndev; ++i)
      if (devlist[i] < 0)
        return fail(ncclInvalidArgument, "ncclCommInitAll: devlist[%d] is %d", i, devlist[i]);
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return r;
  std::vector<ncclResult_t> results(ndev, ncclSuccess);
  std::vector<std::string> errors(ndev);
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; ++i)
    threads.emplace_back([&, i] {
      results[i] = ncclCommInitRank(&comms[i], ndev, id, i);
      if (results[i] != ncclSuccess) errors[i] = lastError();
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < ndev; ++i)
    if (results[i] != ncclSuccess) {
      for (int j = 0; j < ndev; ++j)
        if (results[j] == ncclSuccess) ncclCommDestroy(comms[j]);
      for (int j = 0; j < ndev; ++j) comms[j] = nullptr;
      return fail(results[i], "ncclCommInitAll: rank %d: %s", i, errors[i].c_str());
    }
  return ncclSuccess;
}

}  // extern "C"
