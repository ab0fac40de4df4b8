#include "core/api_guard.h"

#include <mutex>
#include <unordered_set>

namespace zcoll {

void recordError(zcollComm* comm) {
  std::lock_guard<std::mutex> lock(comm->lastErrorMu);
  comm->lastError = threadLastError();
}

namespace {

std::mutex gLiveMu;
std::unordered_set<const zcollComm*>& liveComms() {
  static auto* live = new std::unordered_set<const zcollComm*>();  // never destroyed: usable at exit
  return *live;
}

}  // namespace

void registerComm(zcollComm* comm) {
  std::lock_guard<std::mutex> lock(gLiveMu);
  liveComms().insert(comm);
}

bool isRegistered(const zcollComm* comm) {
  std::lock_guard<std::mutex> lock(gLiveMu);
  return comm != nullptr && liveComms().count(comm) != 0;
}

Pin pinComm(const zcollComm* comm) {
  std::lock_guard<std::mutex> lock(gLiveMu);
  if (comm == nullptr || liveComms().count(comm) == 0) return Pin::kNotLive;
  if (comm->aborting.load()) return Pin::kAborting;
  const_cast<zcollComm*>(comm)->activeCalls.fetch_add(1);
  return Pin::kPinned;
}

bool pinForAbort(zcollComm* comm) {
  std::lock_guard<std::mutex> lock(gLiveMu);
  if (comm == nullptr || liveComms().count(comm) == 0) return false;
  comm->aborting.store(true);
  comm->activeCalls.fetch_add(1);
  return true;
}

void unpinComm(zcollComm* comm) { comm->activeCalls.fetch_sub(1); }

void settleCancelledTransfers(zcollComm* comm) {
  constexpr int kSettleMs = 100;
  for (Transport* t : comm->transports()) t->settleCancelled(kSettleMs);
}

int unregisterIfIdle(zcollComm* comm) {
  std::lock_guard<std::mutex> lock(gLiveMu);
  if (comm == nullptr || liveComms().count(comm) == 0) return -1;
  int active = comm->activeCalls.load();
  if (active == 0) liveComms().erase(comm);
  return active;
}

Result notPinned(Pin why, const zcollComm* comm, const char* fn) {
  if (why == Pin::kAborting)
    return fail(zcollInvalidUsage, "%s: the communicator is being aborted", fn);
  if (comm == nullptr) return fail(zcollInvalidArgument, "%s: comm is NULL", fn);
  return fail(zcollInvalidArgument, "%s: comm is not a live communicator (destroyed?)", fn);
}

Result notRunQueued(const zcollComm* comm, const char* fn) {
  int err = comm->asyncError.load();
  return fail(err != zcollSuccess ? static_cast<Result>(err) : zcollRemoteError,
              "%s: not run: communicator %s was aborted or destroyed before its turn", fn,
              comm->name.c_str());
}

Result checkCommUsable(zcollComm* comm, const char* fn) {
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
