#include "coll/windows.h"

#include <string>
#include <vector>

#include "base/stream_holds.h"
#include "coll/in_place.h"

namespace zcoll {

namespace {

// This rank's peer memory for device memory that registers caller memory (cuda_ipc), or null
// (no device, or no peer reached that way: the rank still takes part in the rounds).
PeerMemory* registeringPeerMemory(zcollComm* comm) {
  for (Transport* t : comm->transports()) {
    if ((t->memKinds() & kDeviceMemory) == 0) continue;
    PeerMemory* pm = t->peerMemory();
    if (pm != nullptr && pm->registersCallerMemory()) return pm;
  }
  return nullptr;
}

int waitMs(const zcollComm* comm) { return comm->timeoutSec * 1000; }

// Round 1: this rank's registration (its outcome travels in `reserved`).
Result registerOwn(zcollComm* comm, PeerMemory* pm, uint32_t id, void* buff, size_t bytes,
                   ExposedRange* mine, std::string* why) {
  *mine = ExposedRange{};
  if (pm == nullptr) return zcollSuccess;
  Result r = streams::whenNoneHeld(waitMs(comm), "zcollCommWindowRegister", [&] {
    return pm->registerOwn(id, buff, bytes, mine);
  });
  if (r != zcollSuccess) *why = zcollGetLastError(nullptr);
  mine->reserved = static_cast<uint32_t>(r);
  return r;
}

// Round 2: this rank maps the peers' registrations it can reach.
Result mapPeers(zcollComm* comm, PeerMemory* pm, uint32_t id,
                const std::vector<ExposedRange>& ranges, std::string* why) {
  if (pm == nullptr) return zcollSuccess;
  Result r = streams::whenNoneHeld(waitMs(comm), "zcollCommWindowRegister", [&]() -> Result {
    for (int p = 0; p < comm->nranks; ++p)
      if (p != comm->rank) ZCOLL_CHECK(pm->registerPeer(p, id, ranges[p]));
    return zcollSuccess;
  });
  if (r != zcollSuccess) *why = zcollGetLastError(nullptr);
  return r;
}

// Drops registration `id` on this rank (closing its mappings) while no stream is held.
Result forget(zcollComm* comm, PeerMemory* pm, uint32_t id) {
  if (pm == nullptr) return zcollSuccess;
  return streams::whenNoneHeld(waitMs(comm), "zcollCommWindowDeregister",
                               [&] { return pm->deregister(id); });
}

// The first rank whose outcome (`code` of each) failed, or -1.
int firstFailed(const std::vector<uint32_t>& code) {
  for (size_t r = 0; r < code.size(); ++r)
    if (code[r] != zcollSuccess) return static_cast<int>(r);
  return -1;
}

Result failedOn(zcollComm* comm, int rank, Result code, const std::string& why,
                const char* step) {
  if (rank == comm->rank)
    return fail(code, "zcollCommWindowRegister: %s: %s", step, why.c_str());
  return fail(code == zcollUnsupported ? zcollUnsupported : zcollInvalidUsage,
              "zcollCommWindowRegister: rank %d could not %s (its result: %d, %s; its own "
              "zcollGetLastError says why): no rank keeps the window", rank, step,
              static_cast<int>(code), zcollGetErrorString(code));
}

}  // namespace

Result registerWindow(zcollComm* comm, uint32_t id, void* buff, size_t bytes) {
  PeerMemory* pm = registeringPeerMemory(comm);
  const Group world = worldGroup(comm);
  Stage st(comm, hostExecutor());
  std::vector<ExposedRange> ranges(comm->nranks);
  std::string why;
  (void)registerOwn(comm, pm, id, buff, bytes, &ranges[comm->rank], &why);
  ZCOLL_CHECK(tradeItems(st, world, 0, ranges.data(), sizeof(ExposedRange),
                         sizeof(ExposedRange)));
  std::vector<uint32_t> code(comm->nranks);
  for (int r = 0; r < comm->nranks; ++r) code[r] = ranges[r].reserved;
  if (int bad = firstFailed(code); bad >= 0) {
    if (code[comm->rank] == zcollSuccess) (void)forget(comm, pm, id);
    return failedOn(comm, bad, static_cast<Result>(code[bad]), why, "register its buffer");
  }
  code[comm->rank] = static_cast<uint32_t>(mapPeers(comm, pm, id, ranges, &why));
  ZCOLL_CHECK(tradeItems(st, world, 1, code.data(), sizeof(uint32_t), sizeof(uint32_t)));
  if (int bad = firstFailed(code); bad >= 0) {
    (void)forget(comm, pm, id);
    return failedOn(comm, bad, static_cast<Result>(code[bad]), why, "map its peers' buffers");
  }
  return zcollSuccess;
}

Result deregisterWindow(zcollComm* comm, uint32_t id) {
  ZCOLL_CHECK(forget(comm, registeringPeerMemory(comm), id));
  Stage st(comm, hostExecutor());
  return tradeTokens(st, worldGroup(comm), 0);
}

}  // namespace zcoll
