// What every C entry point does around its body: clear the thread's last error, turn any C++
// exception into a result (none crosses the C boundary), refuse a NULL, destroyed, aborted or
// broken communicator with a specific message, and record failures on the communicator for
// zcollGetLastError; the log lines of the call name the comm's rank.
#pragma once

#include <exception>
#include <new>

#include "core/comm.h"
#include "core/live_comms.h"

namespace zcoll {

void recordError(zcollComm* comm);

template <typename F>
zcollResult_t guarded(zcollComm* comm, F&& body) {
  clearThreadLastError();
  LogRankScope logRankScope(comm != nullptr ? comm->rank : logRank());  // log lines name it
  Result r;
  try {
    r = body();
  } catch (const std::bad_alloc&) {
    r = fail(zcollSystemError, "out of memory");
  } catch (const std::exception& e) {
    r = fail(zcollInternalError, "unexpected exception: %s", e.what());
  } catch (...) {
    r = fail(zcollInternalError, "unexpected exception");
  }
  if (r != zcollSuccess && comm != nullptr) recordError(comm);
  return r;
}

// Why a handle could not be pinned: not a live communicator (NULL, destroyed, garbage), or one
// being aborted.
Result notPinned(Pin why, const zcollComm* comm, const char* fn);
// Why a queued operation did not run: the comm's breaking error (zcollRemoteError for an
// abort), with the operation's name.
Result notRunQueued(const zcollComm* comm, const char* fn);
// Checks a pinned `comm` can be used (not aborting, not broken); returns the reason it cannot
// (zcollRemoteError when an abort began after the call was pinned: the call was running then).
Result checkCommUsable(zcollComm* comm, const char* fn);
// The result of a call that was still running (pinned) when zcollCommAbort marked its comm but
// had found no error: zcollRemoteError, as zcoll.h promises, even if its transfers had all
// completed (an abort leaves every output undefined). Records only the thread's message: the
// comm may be freed by then.
Result abortedDuringCall(const char* fn);

// After a failed call: waits (briefly) until no transfer it cancelled still touches the
// caller's buffers, closing connections where a transport cannot cancel.
void settleCancelledTransfers(zcollComm* comm);

// The body of a communicating call, in its turn of the comm's order: refused on a comm that is
// aborting or broken (with the error that broke it); a failed call returns only once its
// transfers are settled, so the caller may free or reuse its buffers at once, and the next
// operation starts on a settled transport.
template <typename F>
Result runInTurn(zcollComm* comm, const char* fn, F& body) {
  zcollResult_t r = guarded(comm, [&]() -> Result {
    ZCOLL_CHECK(checkCommUsable(comm, fn));
    return body();
  });
  if (r != zcollSuccess) settleCancelledTransfers(comm);
  return r;
}

// `body` (guarded) with `comm` pinned, counted as active, so zcollCommAbort can wait for it and
// nothing frees the comm under it; a handle that cannot be pinned is refused with the reason.
// The unpin is where an abort and the call are ordered (under the registry's lock): a call an
// abort marked before it unpinned never returns zcollSuccess (abortedDuringCall). The comm is
// not touched after the unpin. kAbortFails = false keeps a success (commEnqueue: its result
// says whether `done` will be called, and the queued operation reports the abort itself).
template <bool kAbortFails = true, typename F>
zcollResult_t pinnedCall(zcollComm* comm, const char* fn, F&& body) {
  Pin pin = pinComm(comm);
  if (pin != Pin::kPinned) return guarded(nullptr, [&] { return notPinned(pin, comm, fn); });
  zcollResult_t r = guarded(comm, body);
  if (unpinCallAborted(comm) && kAbortFails && r == zcollSuccess) r = abortedDuringCall(fn);
  return r;
}

// A call that communicates on `comm`, blocking: pinned, and run on the calling thread once every
// operation submitted before it on this comm has run (exec/engine.h).
template <typename F>
zcollResult_t commCall(zcollComm* comm, const char* fn, F&& body) {
  return pinnedCall(comm, fn, [&]() -> Result {
    return comm->engine.runInOrder([&] { return runInTurn(comm, fn, body); });
  });
}

// Inside zcollGroupStart/End: remembers the first failure of a call made in the group, so that
// zcollGroupEnd runs none of it and returns that error (api/p2p.cc). Outside a group: nothing.
void noteGroupFailure(Result r);

// A collective: pinned, checked usable, and `body` run on the calling thread outside the comm's
// order; it validates the arguments, then takes its turn through launchCall (api/launch.h),
// which runs it in order, queues it, or keeps it for zcollGroupEnd inside a group.
template <typename F>
zcollResult_t collCall(zcollComm* comm, const char* fn, F&& body) {
  zcollResult_t r = pinnedCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkCommUsable(comm, fn));
    return body();
  });
  if (r != zcollSuccess) noteGroupFailure(r);
  return r;
}

// The same call queued: returns once `body` is queued behind everything submitted before it;
// the comm's progress thread runs it in its turn (pinned while it runs) and gives its result to
// done(result) on that thread. Once the comm is broken, aborted or destroyed, what is still
// queued fails with the error that broke it (zcollRemoteError for an abort) without running.
// (The comm is still allocated while its progress thread runs: destroyComm joins it first; a
// thread that runs it through Engine::runIfNext pins the comm first.) *ticket (if given) names
// the operation in the comm's engine.
template <typename F>
zcollResult_t commEnqueue(zcollComm* comm, const char* fn, F body, Engine::Done done,
                          uint64_t* ticket = nullptr) {
  return pinnedCall<false>(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkCommUsable(comm, fn));
    return comm->engine.enqueue(
        [comm, fn, body = std::move(body)]() mutable -> Result {
          if (pinComm(comm) != Pin::kPinned)
            return guarded(nullptr, [&] { return notRunQueued(comm, fn); });
          Result res = runInTurn(comm, fn, body);
          if (unpinCallAborted(comm) && res == zcollSuccess) res = abortedDuringCall(fn);
          return res;
        },
        std::move(done), ticket);
  });
}

}  // namespace zcoll
