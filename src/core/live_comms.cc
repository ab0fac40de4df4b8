#include "core/live_comms.h"

#include <atomic>
#include <mutex>
#include <unordered_set>

#include "core/status_service.h"

namespace zcoll {

namespace {

std::mutex gLiveMu;
// Atomic, not under gLiveMu: a dump inside forEachLiveComm reads it.
std::atomic<uint64_t> gRegisteredSoFar{0};
std::unordered_set<const zcollComm*>& liveComms() {
  static auto* live = new std::unordered_set<const zcollComm*>();  // never destroyed: usable at exit
  return *live;
}

}  // namespace

void registerComm(zcollComm* comm) {
  {
    std::lock_guard<std::mutex> lock(gLiveMu);
    liveComms().insert(comm);
    ++gRegisteredSoFar;
  }
  startStatusService();  // once per process: zcoll_info --status can ask about this comm now
}

bool isRegistered(const zcollComm* comm) {
  std::lock_guard<std::mutex> lock(gLiveMu);
  return comm != nullptr && liveComms().count(comm) != 0;
}

uint64_t commsRegisteredSoFar() { return gRegisteredSoFar.load(); }

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

bool unpinCallAborted(zcollComm* comm) {
  std::lock_guard<std::mutex> lock(gLiveMu);
  bool aborted = comm->aborting.load();
  comm->activeCalls.fetch_sub(1);
  return aborted;
}

int unregisterIfIdle(zcollComm* comm) {
  std::lock_guard<std::mutex> lock(gLiveMu);
  if (comm == nullptr || liveComms().count(comm) == 0) return -1;
  int active = comm->activeCalls.load();
  if (active == 0) liveComms().erase(comm);
  return active;
}

void forEachLiveComm(const std::function<void(const zcollComm*)>& f) {
  std::lock_guard<std::mutex> lock(gLiveMu);
  for (const zcollComm* c : liveComms()) f(c);
}

}  // namespace zcoll
