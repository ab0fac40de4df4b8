#include "fallback.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "errors.h"
#include "groups.h"
#include "log.h"

namespace zcoll_nccl {
namespace {

const char* fallbackPath() {
  const char* p = std::getenv("ZCOLL_NCCL_FALLBACK");
  return (p != nullptr && *p != '\0') ? p : nullptr;
}

// RTLD_DEEPBIND makes the fallback's own calls to nccl* resolve inside it, never to ours. The
// address and thread sanitizers refuse it (google/sanitizers#611), so their builds (tests only)
// load without it.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kDeepBind = 0;
#else
constexpr int kDeepBind = RTLD_DEEPBIND;
#endif

template <typename F>
void bind(void* lib, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
}

struct Loaded {
  FallbackApi api;
  bool ok = false;
  std::string why;
};

Loaded load() {
  Loaded l;
  const char* path = fallbackPath();
  if (path == nullptr) {
    l.why = "ZCOLL_NCCL_FALLBACK is not set";
    return l;
  }
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | kDeepBind);
  if (lib == nullptr) {
    const char* e = dlerror();
    l.why = std::string("ZCOLL_NCCL_FALLBACK=") + path + " did not load: " + (e ? e : "?");
    logWarn("%s", l.why.c_str());
    return l;
  }
  bind(lib, "ncclGetUniqueId", &l.api.getUniqueId);
  bind(lib, "ncclCommInitRank", &l.api.commInitRank);
  bind(lib, "ncclCommDestroy", &l.api.commDestroy);
  bind(lib, "ncclCommAbort", &l.api.commAbort);
  bind(lib, "ncclAllReduce", &l.api.allReduce);
  bind(lib, "ncclReduceScatter", &l.api.reduceScatter);
  bind(lib, "ncclReduce", &l.api.reduce);
  bind(lib, "ncclGetLastError", &l.api.getLastError);
  if (!l.api.getUniqueId || !l.api.commInitRank || !l.api.commDestroy) {
    l.why = std::string("ZCOLL_NCCL_FALLBACK=") + path +
            " lacks ncclGetUniqueId/ncclCommInitRank/ncclCommDestroy: not an NCCL";
    logWarn("%s", l.why.c_str());
    return l;
  }
  l.ok = true;
  logInfo("fallback NCCL loaded from %s (RTLD_LOCAL|RTLD_DEEPBIND): calls zcoll cannot serve "
          "go there", path);
  return l;
}

}  // namespace

const FallbackApi* fallback(std::string* why) {
  static Loaded loaded = load();
  if (why != nullptr) *why = loaded.why;
  return loaded.ok ? &loaded.api : nullptr;
}

void makeFallbackComm(ncclComm_t comm) {
  if (fallbackPath() == nullptr) return;
  std::string why;
  const FallbackApi* api = fallback(&why);
  // Rank 0 makes the fallback's id; one flag byte says whether it could. Every rank takes part
  // in the broadcast, loaded or not, so none is left waiting.
  unsigned char msg[1 + sizeof(ncclUniqueId)] = {0};
  if (comm->rank == 0 && api != nullptr) {
    ncclUniqueId id;
    ncclResult_t r = api->getUniqueId(&id);
    if (r == ncclSuccess) {
      msg[0] = 1;
      std::memcpy(msg + 1, &id, sizeof(id));
    } else {
      why = std::string("the fallback's ncclGetUniqueId failed (code ") + std::to_string(r) + ")";
    }
  }
  zcollResult_t zr = zcollBroadcast(msg, msg, sizeof(msg), zcollUint8, 0, comm->z, nullptr);
  if (zr != zcollSuccess) {
    comm->fallbackError = std::string("zcoll could not hand out the fallback's id: ") +
                          zcollGetLastError(comm->z);
  } else if (api == nullptr) {
    comm->fallbackError = why;
  } else if (msg[0] == 0) {
    comm->fallbackError = comm->rank == 0 ? why : "the fallback's ncclGetUniqueId failed on rank 0";
  } else {
    ncclUniqueId id;
    std::memcpy(&id, msg + 1, sizeof(id));
    ncclComm_t fc = nullptr;
    ncclResult_t r = api->commInitRank(&fc, comm->nranks, id, comm->rank);
    if (r == ncclSuccess) {
      comm->fallbackComm = fc;
      logInfo("rank %d: fallback NCCL communicator made", comm->rank);
      return;
    }
    comm->fallbackError = std::string("the fallback's ncclCommInitRank failed (code ") +
                          std::to_string(r) + "): " +
                          (api->getLastError ? api->getLastError(nullptr) : "");
  }
  logWarn("rank %d: no fallback NCCL communicator: %s", comm->rank, comm->fallbackError.c_str());
}

void makeChildFallbackComm(ncclComm_t child) {
  if (child == nullptr || fallbackPath() == nullptr) return;
  if (groupDepth() > 0) {
    deferFallbackToGroupEnd(child);
    return;
  }
  makeFallbackComm(child);
}

void destroyFallbackComm(ncclComm_t comm, bool abort) {
  if (comm->fallbackComm == nullptr) return;
  const FallbackApi* api = fallback(nullptr);
  ncclComm_t fc = static_cast<ncclComm_t>(comm->fallbackComm);
  if (abort && api->commAbort) api->commAbort(fc);
  else api->commDestroy(fc);
  comm->fallbackComm = nullptr;
}

ncclResult_t refuse(ncclComm_t comm, const char* what) {
  const char* path = fallbackPath();
  if (path == nullptr)
    return fail(ncclInvalidUsage,
                "%s is not served by zcoll; set ZCOLL_NCCL_FALLBACK=<path to libnccl.so.2> to "
                "forward it to NCCL (docs/NCCL.md)", what);
  std::string why;
  fallback(&why);
  const std::string& reason = (comm != nullptr && !comm->fallbackError.empty())
                                  ? comm->fallbackError : why;
  return fail(ncclInvalidUsage,
              "%s is not served by zcoll, and the fallback NCCL (ZCOLL_NCCL_FALLBACK=%s) has no "
              "communicator to take it: %s", what, path,
              reason.empty() ? "it was not made on this comm" : reason.c_str());
}

}  // namespace zcoll_nccl
