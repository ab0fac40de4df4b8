// The live communicators: which handles are communicators that exist right now, and how many
// calls are running on each. The API guard (api/guard.h) pins a comm through it on every entry;
// init registers a comm once it is built and destroy/abort unregister it. Kept in core, below the
// API, so that init never includes the API layer.
#pragma once

#include <cstdint>
#include <functional>

#include "core/comm.h"

namespace zcoll {

constexpr uint64_t kCommMagic = 0x7a636f6c6c636f6dULL;  // "zcollcom" (debugging aid)
constexpr uint64_t kCommDeadMagic = 0xdeadc0111dead;

// A comm is registered when its init succeeds and unregistered right before it is freed. Entry
// points pin a comm (count a call on it as active) only while it is registered, under the
// registry's lock, and destroy/abort unregister it only when no call is active, under the same
// lock: a comm cannot be freed between a caller's check and its count, and a stale or garbage
// handle is recognised without reading the memory it points to.
void registerComm(zcollComm* comm);
bool isRegistered(const zcollComm* comm);
// How many comms this process has registered so far (destroyed ones included).
uint64_t commsRegisteredSoFar();
// Counts a call on `comm` as active (undo with unpinComm) when it is registered and not being
// aborted: an abort then waits only for the calls already running, never for new ones.
enum class Pin { kPinned, kNotLive, kAborting };
Pin pinComm(const zcollComm* comm);
void unpinComm(zcollComm* comm);
// Unpins a call and says whether an abort marked `comm` before it left (under the registry's
// lock, the same one pinForAbort marks under): true means zcollCommAbort was called while the
// call was still running, so the call must not report success. After it returns, `comm` may be
// freed at any moment (an abort waits for this unpin): do not touch it again.
bool unpinCallAborted(zcollComm* comm);
// Marks a registered comm as being aborted and pins it for the aborting thread; false when
// `comm` is not registered.
bool pinForAbort(zcollComm* comm);
// Unregisters `comm` when no call is active on it (nothing can pin it afterwards). Returns 0 when
// it did, the number of active calls when it did not, -1 when `comm` was not registered.
int unregisterIfIdle(zcollComm* comm);
// Calls f on every registered comm, under the registry's lock: none can be freed meanwhile (f
// must be brief and must not pin, register or unregister).
void forEachLiveComm(const std::function<void(const zcollComm*)>& f);

}  // namespace zcoll
