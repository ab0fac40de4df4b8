// Public C API: errors, version, communicator lifecycle and queries.
#include <type_traits>
#include <cstddef>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "api/guard.h"
#include "base/hash.h"
#include "base/params.h"
#include "base/tags.h"
#include "bootstrap/rendezvous.h"
#include "bootstrap/root_address.h"
#include "core/flight_recorder.h"
#include "core/init.h"
#include "core/progress.h"
#include "exec/device_component.h"

using namespace zcoll;

namespace {

Result validateRanks(int nranks, int rank) {
  if (nranks < 1 || nranks >= kMaxRanks)
    return fail(zcollInvalidArgument, "nranks %d must be in [1, %d)", nranks, kMaxRanks);
  if (rank < 0 || rank >= nranks)
    return fail(zcollInvalidArgument, "rank %d must be in [0, %d)", rank, nranks);
  return zcollSuccess;
}

Result initRank(zcollComm_t* comm, int nranks, const zcollUniqueId& id, int rank,
                const zcollConfig_t* config) {
  if (comm == nullptr) return fail(zcollInvalidArgument, "comm output pointer is NULL");
  *comm = nullptr;
  ZCOLL_CHECK(validateRanks(nranks, rank));
  LogRankScope logRankScope(rank);
  ZCOLL_CHECK(checkParamValues());
  InitSettings s = defaultSettings();
  ZCOLL_CHECK(readConfig(config, &s));
  RendezvousId rid = idFromUnique(id);
  return createComm(s, nranks, rank, &rid, comm);
}

// A query on a live comm with a non-NULL output; the comm is pinned while `body` runs.
template <typename F>
zcollResult_t query(const zcollComm* comm, void* out, const char* fn, F&& body) {
  zcollComm* c = const_cast<zcollComm*>(comm);
  Pin pin = pinComm(c);
  if (pin != Pin::kPinned) return guarded(nullptr, [&] { return notPinned(pin, comm, fn); });
  zcollResult_t r = guarded(c, [&]() -> Result {
    if (out == nullptr) return fail(zcollInvalidArgument, "%s: output pointer is NULL", fn);
    if constexpr (std::is_void_v<decltype(body())>) {
      body();
      return zcollSuccess;
    } else {
      return body();
    }
  });
  unpinComm(c);
  return r;
}

// ---- Environment-based rendezvous ---------------------------------------------------------

struct EnvRanks {
  int rank = -1;
  int size = -1;
  const char* source = nullptr;
};

bool readIntEnv(const char* name, int* out) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return false;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0') return false;
  *out = static_cast<int>(x);
  return true;
}

Result rankFromEnv(EnvRanks* e) {
  static const char* kPairs[][2] = {{"RANK", "WORLD_SIZE"},
                                    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                    {"PMI_RANK", "PMI_SIZE"},
                                    {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (const auto& p : kPairs) {
    if (readIntEnv(p[0], &e->rank) && readIntEnv(p[1], &e->size)) {
      e->source = p[0];
      return zcollSuccess;
    }
  }
  return fail(zcollInvalidUsage, "zcollCommInitFromEnv: no rank/size in the environment (set "
              "RANK/WORLD_SIZE, or run under zcollrun, torchrun, mpirun or srun)");
}

// ZCOLL_COMM_ID=host:port, else MASTER_ADDR with MASTER_PORT+1 (torchrun's own store owns
// MASTER_PORT itself).
Result rendezvousAddressFromEnv(std::string* text) {
  std::string id = paramString("ZCOLL_COMM_ID");
  if (!id.empty()) {
    *text = id;
    return zcollSuccess;
  }
  const char* addr = std::getenv("MASTER_ADDR");
  int port = 0;
  if (addr != nullptr && *addr != '\0' && readIntEnv("MASTER_PORT", &port)) {
    *text = std::string(addr) + ":" + std::to_string(port + 1);
    return zcollSuccess;
  }
  return fail(zcollInvalidUsage, "zcollCommInitFromEnv: no rendezvous address (set "
              "ZCOLL_COMM_ID=host:port, or MASTER_ADDR and MASTER_PORT)");
}

// A failure to serve the rendezvous at `address` (rank 0: a port in use, an address not of this
// machine), with the variable that chose the address: the user's fix is there.
Result namingTheAddress(Result r, const std::string& address) {
  if (r == zcollSuccess) return r;
  const bool commId = !paramString("ZCOLL_COMM_ID").empty();
  const std::string context =
      "zcollCommInitFromEnv: rank 0 cannot serve the rendezvous at " + address +
      (commId ? " (set by ZCOLL_COMM_ID; if another program uses that port, choose another "
                "port in ZCOLL_COMM_ID)"
              : " (set by MASTER_ADDR and MASTER_PORT + 1; if another program uses that port, "
                "choose another MASTER_PORT)");
  return failWithContext(r, context.c_str());
}

// The magic every rank of an environment-initialized job derives alike: from ZCOLL_AUTH_TOKEN, a
// secret the launcher gives every rank (zcollrun does), so no other process can join or disturb
// the rendezvous; without it, from the address alone (anyone who can reach the address can
// present it: the job is then protected only by who can reach that address; README.md).
uint64_t envMagic(const std::string& address, const std::string& token) {
  uint64_t h = fnv1a64("zcoll-env|" + address + "|" + token);
  return h == 0 ? 1 : h;
}

Result initFromEnv(zcollComm_t* comm, const zcollConfig_t* config) {
  if (comm == nullptr) return fail(zcollInvalidArgument, "comm output pointer is NULL");
  *comm = nullptr;
  EnvRanks e;
  ZCOLL_CHECK(rankFromEnv(&e));
  ZCOLL_CHECK(validateRanks(e.size, e.rank));
  LogRankScope logRankScope(e.rank);
  ZCOLL_CHECK(checkParamValues());
  InitSettings s = defaultSettings();
  ZCOLL_CHECK(readConfig(config, &s));
  // One rank (torchrun or zcollrun with one process) has nobody to meet: no rendezvous at all.
  if (e.size == 1) {
    ZCOLL_INFO(LogSubsys::kInit, "init from env (%s): a single rank, no rendezvous", e.source);
    return createComm(s, 1, 0, nullptr, comm);
  }
  std::string text;
  ZCOLL_CHECK(rendezvousAddressFromEnv(&text));
  const std::string token = paramString("ZCOLL_AUTH_TOKEN");
  RendezvousId id{envMagic(text, token), {}};
  ZCOLL_CHECK(parseHostPort(text, &id.root));
  ZCOLL_INFO(LogSubsys::kInit, "init from env (%s): rank %d of %d, rendezvous %s (%s)", e.source,
             e.rank, e.size, text.c_str(), token.empty() ? "no ZCOLL_AUTH_TOKEN" : "token");
  // The root knows the size: a hello claiming another is refused without affecting the ranks.
  // Its port is the job's convention, free again for the next init: no lingering.
  if (e.rank == 0)
    ZCOLL_CHECK(namingTheAddress(
        startRendezvousRoot(id.root, id.magic, e.size, s.timeoutSec, false, &id), text));
  return createComm(s, e.size, e.rank, &id, comm);
}

}  // namespace

extern "C" {

const char* zcollGetErrorString(zcollResult_t r) {
  switch (r) {
    case zcollSuccess: return "no error";
    case zcollSystemError: return "system error (socket, memory, thread): see zcollGetLastError, run with ZCOLL_DEBUG=INFO";
    case zcollInternalError: return "internal error in zcoll or a library it uses: please report with ZCOLL_DEBUG=TRACE output";
    case zcollInvalidArgument: return "invalid argument: see zcollGetLastError for which one";
    case zcollInvalidUsage: return "invalid usage (call order, mismatched ranks or ids): see zcollGetLastError";
    case zcollRemoteError: return "a remote rank failed, disconnected or the communicator was aborted: check the other ranks' logs";
    case zcollInProgress: return "operation in progress";
    case zcollTimeout: return "timed out waiting for other ranks: check that all ranks call the same collectives, or raise ZCOLL_TIMEOUT";
    case zcollUnsupported: return "unsupported in this build or version: see zcollGetLastError";
    case zcollCudaError: return "CUDA error: see zcollGetLastError, run with ZCOLL_DEBUG=INFO";
    default: return "unknown result code";
  }
}

const char* zcollGetLastError(zcollComm_t comm) {
  // Pinned while read, so an abort in another thread cannot free it under us; a comm being
  // aborted has its message in the failed call's thread (abortedDuringCall).
  if (pinComm(comm) != Pin::kPinned) return threadLastError().c_str();
  const char* msg;
  {
    std::lock_guard<std::mutex> lock(comm->lastErrorMu);
    msg = comm->lastError.c_str();
  }
  unpinComm(comm);
  return msg;
}

zcollResult_t zcollGetVersion(int* version) {
  return guarded(nullptr, [&]() -> Result {
    if (version == nullptr) return fail(zcollInvalidArgument, "version pointer is NULL");
    *version = ZCOLL_VERSION_CODE;
    return zcollSuccess;
  });
}

zcollResult_t zcollGetDeviceSupport(int* supported) {
  return guarded(nullptr, [&]() -> Result {
    if (supported == nullptr) return fail(zcollInvalidArgument, "supported pointer is NULL");
    *supported = deviceComponent() != nullptr ? 1 : 0;
    return zcollSuccess;
  });
}

zcollResult_t zcollGetUniqueId(zcollUniqueId* uniqueId) {
  return guarded(nullptr, [&]() -> Result {
    if (uniqueId == nullptr) return fail(zcollInvalidArgument, "uniqueId pointer is NULL");
    ZCOLL_CHECK(checkParamValues());
    SockAddr addr{};
    std::string from;
    ZCOLL_CHECK(pickRootAddress(&addr, &from));
    ZCOLL_INFO(LogSubsys::kBootstrap, "bootstrap address from %s", from.c_str());
    RendezvousId id{};
    ZCOLL_CHECK(startRendezvousRoot(addr, randomMagic(), 0,
                                    static_cast<int>(paramInt("ZCOLL_TIMEOUT")), true, &id));
    *uniqueId = uniqueFromId(id);
    return zcollSuccess;
  });
}

zcollResult_t zcollCommInitRank(zcollComm_t* comm, int nranks, zcollUniqueId id, int rank) {
  return guarded(nullptr, [&] { return initRank(comm, nranks, id, rank, nullptr); });
}

zcollResult_t zcollCommInitRankConfig(zcollComm_t* comm, int nranks, zcollUniqueId id, int rank,
                                      zcollConfig_t* config) {
  return guarded(nullptr, [&] { return initRank(comm, nranks, id, rank, config); });
}

zcollResult_t zcollCommInitFromEnv(zcollComm_t* comm, zcollConfig_t* config) {
  return guarded(nullptr, [&] { return initFromEnv(comm, config); });
}

zcollResult_t zcollCommSplit(zcollComm_t comm, int color, int key, zcollComm_t* newcomm,
                             zcollConfig_t* config) {
  if (newcomm != nullptr) *newcomm = nullptr;
  zcollComm_t made = nullptr;
  zcollResult_t r = commCall(comm, "zcollCommSplit", [&]() -> Result {
    // Every negative color is ZCOLL_SPLIT_NOCOLOR. An argument error here still takes part in
    // the split's exchange (splitComm), so no rank is left waiting and the parent stays usable.
    Result argError = zcollSuccess;
    if (newcomm == nullptr)
      argError = fail(zcollInvalidArgument, "zcollCommSplit: newcomm pointer is NULL");
    InitSettings s = inheritedSettings(comm, ".split");
    if (argError == zcollSuccess) {
      argError = readConfig(config, &s);
      if (argError != zcollSuccess) argError = failWithContext(argError, "zcollCommSplit");
    }
    return splitComm(comm, color, key, s, &made, argError);
  });
  if (r != zcollSuccess && made != nullptr) {
    // Built, but an abort of the parent interrupted the call (abortedDuringCall): not handed out.
    if (unregisterIfIdle(made) == 0) destroyComm(made, 0);  // nobody else has seen it
    made = nullptr;
  }
  if (newcomm != nullptr) *newcomm = made;
  return r;
}

zcollResult_t zcollCommDestroy(zcollComm_t comm) {
  return guarded(nullptr, [&]() -> Result {
    if (comm == nullptr) return zcollSuccess;
    if (pinComm(comm) == Pin::kPinned) {  // pinned: an abort in another thread waits for us
      comm->engine.drain();  // queued operations run first (each is bounded by the timeout)
      unpinComm(comm);
    }
    int active = unregisterIfIdle(comm);
    if (active < 0) return fail(zcollInvalidArgument, "zcollCommDestroy: not a live communicator");
    if (active > 0)
      return fail(zcollInvalidUsage, "zcollCommDestroy: a call is still running on this "
                  "communicator in another thread (use zcollCommAbort)");
    bool healthy = comm->asyncError.load() == zcollSuccess;
    destroyComm(comm, healthy ? 2000 : 0);
    return zcollSuccess;
  });
}

zcollResult_t zcollCommAbort(zcollComm_t comm) {
  return guarded(nullptr, [&]() -> Result {
    if (comm == nullptr) return zcollSuccess;
    if (!pinForAbort(comm))
      return fail(zcollInvalidArgument, "zcollCommAbort: not a live communicator");
    breakComm(comm, zcollRemoteError);
    dumpFlightRecord(comm, "abort");  // ZCOLL_DEBUG_DUMP, if set: what it was doing, its error
    unpinComm(comm);
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(paramInt("ZCOLL_ABORT_WAIT_MS"));
    int active;
    while ((active = unregisterIfIdle(comm)) > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (active < 0) return zcollSuccess;  // another zcollCommAbort freed it meanwhile
    if (active > 0) {
      // Freeing memory another thread still uses would crash it; leaking is the safe choice.
      return fail(zcollInternalError, "zcollCommAbort: a call did not leave within "
                  "ZCOLL_ABORT_WAIT_MS; the communicator is left allocated");
    }
    destroyComm(comm, 0);
    return zcollSuccess;
  });
}

zcollResult_t zcollCommGetAsyncError(zcollComm_t comm, zcollResult_t* asyncError) {
  return query(comm, asyncError, "zcollCommGetAsyncError",
               [&] { *asyncError = static_cast<zcollResult_t>(comm->asyncError.load()); });
}

zcollResult_t zcollCommCount(const zcollComm_t comm, int* count) {
  return query(comm, count, "zcollCommCount", [&] { *count = comm->nranks; });
}

zcollResult_t zcollCommUserRank(const zcollComm_t comm, int* rank) {
  return query(comm, rank, "zcollCommUserRank", [&] { *rank = comm->rank; });
}

zcollResult_t zcollCommNodeCount(const zcollComm_t comm, int* nodes) {
  return query(comm, nodes, "zcollCommNodeCount", [&] { *nodes = comm->layout.nodes; });
}

zcollResult_t zcollCommNodeRank(const zcollComm_t comm, int* node) {
  return query(comm, node, "zcollCommNodeRank", [&] { *node = comm->node(); });
}

zcollResult_t zcollCommLocalRank(const zcollComm_t comm, int* localRank) {
  return query(comm, localRank, "zcollCommLocalRank",
               [&] { *localRank = comm->layout.localOf[comm->rank]; });
}

zcollResult_t zcollCommLocalSize(const zcollComm_t comm, int* localSize) {
  return query(comm, localSize, "zcollCommLocalSize",
               [&] { *localSize = comm->layout.localSize(comm->rank); });
}

zcollResult_t zcollCommDevice(const zcollComm_t comm, int* device) {
  return query(comm, device, "zcollCommDevice", [&] {
    const DeviceIdentity& mine = comm->peers[comm->rank].device;
    *device = mine.present ? mine.ordinal : -1;
  });
}

zcollResult_t zcollCommGetStats(const zcollComm_t comm, zcollStats_t* stats) {
  return query(comm, stats, "zcollCommGetStats", [&]() -> Result {
    // Growable: a caller compiled against an older (smaller) struct gets the fields it has.
    const size_t minSize = offsetof(zcollStats_t, bytesSent) + sizeof(stats->bytesSent);
    if (stats->size < minSize)
      return fail(zcollInvalidArgument, "zcollCommGetStats: set stats->size = "
                  "sizeof(zcollStats_t) (got %zu, at least %zu)", stats->size, minSize);
    auto fits = [&](size_t offset, size_t bytes) { return stats->size >= offset + bytes; };
    for (int p = 0; p < zcollNumPaths; ++p) stats->bytesSent[p] = comm->stats.sent[p].load();
    if (fits(offsetof(zcollStats_t, bytesRecv), sizeof(stats->bytesRecv))) {
      for (int p = 0; p < zcollNumPaths; ++p) stats->bytesRecv[p] = comm->stats.recv[p].load();
    }
    if (fits(offsetof(zcollStats_t, opCount), sizeof(stats->opCount)))
      stats->opCount = comm->stats.ops.load();
    return zcollSuccess;
  });
}

zcollResult_t zcollCommResetStats(zcollComm_t comm) {
  return query(comm, comm, "zcollCommResetStats", [&] { comm->stats.reset(); });
}

}  // extern "C"
