#include "api/launch.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <memory>
#include <utility>
#include <vector>

#include "api/guard.h"
#include "core/progress.h"

namespace zcoll {

namespace {

// A collective kept in a group until zcollGroupEnd.
struct GroupedCall {
  zcollComm* comm;
  const char* fn;
  std::unique_ptr<Executor> owned;
  Executor* exec;
  CallDescriptor d;
  CallWork work;
};
thread_local std::vector<GroupedCall> tGrouped;

Result checkAndRun(zcollComm* comm, const char* fn, const CallDescriptor& d, const CallWork& work,
                   Executor& exec) {
  ZCOLL_CHECK(checkCallMatches(comm, d, exec, fn));
  return work ? work(exec) : zcollSuccess;
}

// On the caller's thread, in its turn.
Result runNow(zcollComm* comm, const char* fn, const CallExecutor& ce, const CallDescriptor& d,
              const CallWork& work) {
  return comm->engine.runInOrder([&] {
    auto body = [&] { return checkAndRun(comm, fn, d, work, *ce.exec); };
    return runInTurn(comm, fn, body);
  });
}

}  // namespace

namespace {

// The waits of one communicator's queued calls (enqueueOnStreams): a ring of host-mapped words,
// one per call in flight. Call `seq` waits on words[seq % kMaxDeviceCallsInFlight] >= seq and
// the progress thread stores seq there when the call is over. Kept per comm address for the
// life of the process (a stream may still wait on a word after the comm is gone; a comm made
// later at the same address goes on with the same, still increasing, sequence).
struct CallWaits {
  std::mutex mu;
  std::condition_variable changed;
  uint32_t* words = nullptr;
  uint32_t seq = 0;
  int inFlight = 0;
};

CallWaits& waitsOf(const zcollComm* comm) {
  static std::mutex mu;
  static auto* all = new std::map<const zcollComm*, std::unique_ptr<CallWaits>>;  // never freed
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<CallWaits>& w = (*all)[comm];
  if (!w) w = std::make_unique<CallWaits>();
  return *w;
}

// Streams with queued calls in flight, process-wide: which comm, how many calls.
struct StreamUse {
  const zcollComm* comm;
  int calls;
};
std::mutex gStreamsMu;
std::map<uintptr_t, StreamUse>& streamsInUse() {
  static auto* m = new std::map<uintptr_t, StreamUse>;  // never freed (used at exit)
  return *m;
}

Result claimStreams(const zcollComm* comm, const char* fn, const std::vector<uintptr_t>& keys) {
  std::lock_guard<std::mutex> lock(gStreamsMu);
  for (uintptr_t k : keys) {
    auto it = streamsInUse().find(k);
    if (it != streamsInUse().end() && it->second.comm != comm)
      return fail(zcollInvalidUsage, "%s: the stream %s has calls of another communicator of "
                  "this process in flight (%s): ranks of one process must each use their own "
                  "stream (NULL included), as with NCCL; one rank's call would hold the stream "
                  "its peer's call needs", fn, k == 0 ? "(NULL, the legacy default stream)" : "",
                  it->second.comm->name.c_str());
  }
  for (uintptr_t k : keys) {
    StreamUse& u = streamsInUse()[k];
    u.comm = comm;
    ++u.calls;
  }
  return zcollSuccess;
}

void releaseStreams(const std::vector<uintptr_t>& keys) {
  std::lock_guard<std::mutex> lock(gStreamsMu);
  for (uintptr_t k : keys) {
    auto it = streamsInUse().find(k);
    if (it != streamsInUse().end() && --it->second.calls == 0) streamsInUse().erase(it);
  }
}

}  // namespace

Result enqueueOnStreams(zcollComm* comm, const char* fn, const std::vector<Executor*>& callers,
                        SideWork work) {
  std::vector<uintptr_t> keys;
  for (Executor* caller : callers) {
    uintptr_t k = 0;
    if (caller->sharedStreamKey(&k) && std::find(keys.begin(), keys.end(), k) == keys.end())
      keys.push_back(k);
  }
  ZCOLL_CHECK(claimStreams(comm, fn, keys));
  // A place among the comm's calls in flight (bounded: the caller waits, up to the comm's
  // timeout, for the oldest to finish) and its wait word.
  CallWaits& w = waitsOf(comm);
  uint32_t seq = 0;
  uint32_t* word = nullptr;
  {
    std::unique_lock<std::mutex> lock(w.mu);
    Result r = zcollSuccess;
    if (w.words == nullptr) r = callers[0]->allocWaitWords(kMaxDeviceCallsInFlight, &w.words);
    if (r == zcollSuccess &&
        !w.changed.wait_for(lock, std::chrono::seconds(comm->timeoutSec),
                            [&] { return w.inFlight < kMaxDeviceCallsInFlight; }))
      r = fail(zcollTimeout, "%s: %d device calls of this communicator are in flight (the "
               "most it queues) and none finished within the timeout (%d s, ZCOLL_TIMEOUT)", fn,
               kMaxDeviceCallsInFlight, comm->timeoutSec);
    if (r != zcollSuccess) {
      releaseStreams(keys);
      return r;
    }
    ++w.inFlight;
    seq = ++w.seq;
    word = &w.words[seq % kMaxDeviceCallsInFlight];
  }
  // Releases the callers' streams (a store the device sees: the progress thread only flips a
  // word) and the call's place; once, whatever happens to the call.
  auto done = std::make_shared<std::atomic<bool>>(false);
  auto release = [done, word, seq, &w, keys] {
    if (done->exchange(true)) return;
    __atomic_store_n(word, seq, __ATOMIC_RELEASE);
    {
      std::lock_guard<std::mutex> lock(w.mu);
      --w.inFlight;
    }
    w.changed.notify_all();
    releaseStreams(keys);
  };
  // Every side executor before any wait: callers may share a stream, and a side stream made
  // after a wait would start after the call it belongs to.
  std::vector<std::shared_ptr<Executor>> sides;
  for (Executor* caller : callers) {
    std::unique_ptr<Executor> side;
    Result r = caller->makeSideExecutor(&side);
    if (r != zcollSuccess) {
      release();
      return r;
    }
    sides.push_back(std::move(side));
  }
  for (Executor* caller : callers) {
    Result r = caller->waitValue(word, seq);
    if (r != zcollSuccess) {
      release();  // a stream that waits must never wait for nothing
      return r;
    }
  }
  auto op = [comm, work = std::move(work), sides]() -> Result {
    Result r = sides[0]->bindThread();
    if (r == zcollSuccess) r = work(sides);
    // Nobody waits for this result: a failure, usage errors included, breaks the comm so the
    // caller learns it from zcollCommGetAsyncError and from its next call. Peers are told of
    // other failures already (runAlgorithm); a usage error (the call check) every rank finds.
    if (r != zcollSuccess) breakComm(comm, r);
    return r;
  };
  // The engine calls the callback in every case (run: after the work, which ends flushed, so
  // the side streams are done; failed; dropped after an abort or destroy).
  Result queued = commEnqueue(comm, fn, std::move(op), [release](Result) { release(); });
  if (queued != zcollSuccess) release();
  return queued;
}

Result checkDeviceRoutes(const zcollComm* comm, const char* fn) {
  if (comm->deviceRouted(comm->rank)) return zcollSuccess;  // all peers or none have one
  return fail(zcollUnsupported, "%s: device buffers, but this communicator has no way to move "
              "them: %s (initialize the device, e.g. cudaSetDevice, before creating the "
              "communicator, as NCCL binds a communicator to it)", fn,
              comm->deviceRouteWhy.empty() ? "" : comm->deviceRouteWhy[comm->rank].c_str());
}

Result launchCall(zcollComm* comm, const char* fn, CallExecutor& ce, const CallDescriptor& d,
                  CallWork work) {
  if (ce.exec->memKind() != MemKind::kHost) ZCOLL_CHECK(checkDeviceRoutes(comm, fn));
  if (inGroup()) {
    tGrouped.push_back({comm, fn, std::move(ce.owned), ce.exec, d, std::move(work)});
    return zcollSuccess;
  }
  if (ce.exec->memKind() == MemKind::kHost || !comm->deviceCallsAsync)
    return runNow(comm, fn, ce, d, work);
  if (!work && !comm->checkCalls) return zcollSuccess;  // nothing to move, nothing to check
  return enqueueOnStreams(comm, fn, {ce.exec}, [comm, fn, d, work = std::move(work)](
                                                   const std::vector<std::shared_ptr<Executor>>& s) {
    return checkAndRun(comm, fn, d, work, *s[0]);
  });
}

Result runGroupedCalls() {
  std::vector<GroupedCall> calls;
  calls.swap(tGrouped);
  for (size_t i = 0; i < calls.size(); ++i) {
    GroupedCall& c = calls[i];
    CallExecutor ce;
    ce.exec = c.exec;
    ce.owned = std::move(c.owned);
    Result r = pinnedCall(c.comm, c.fn, [&]() -> Result {
      ZCOLL_CHECK(checkCommUsable(c.comm, c.fn));
      return launchCall(c.comm, c.fn, ce, c.d, std::move(c.work));
    });
    if (r != zcollSuccess) {
      char context[160];
      std::snprintf(context, sizeof(context),
                    "zcollGroupEnd: collective %zu of %zu in the group (%s) failed; the %zu after "
                    "it were not run", i + 1, calls.size(), c.fn, calls.size() - i - 1);
      return failWithContext(r, context);
    }
  }
  return zcollSuccess;
}

void dropGroupedCalls() { tGrouped.clear(); }

Result takeGroupedHostCalls(zcollComm** comm, std::function<Result()>* run) {
  auto calls = std::make_shared<std::vector<GroupedCall>>();
  calls->swap(tGrouped);
  *comm = calls->empty() ? nullptr : calls->front().comm;
  for (const GroupedCall& c : *calls) {
    if (c.comm != *comm)
      return fail(zcollInvalidUsage, "zcollGroupEndNonBlocking: the group's collectives use "
                  "several communicators (%s and %s); a request covers one: end such a group "
                  "with zcollGroupEnd", (*comm)->name.c_str(), c.comm->name.c_str());
    if (c.exec->memKind() != MemKind::kHost)
      return fail(zcollInvalidUsage, "zcollGroupEndNonBlocking: %s in the group is on device "
                  "buffers, which are non-blocking on their stream already: end the group with "
                  "zcollGroupEnd", c.fn);
  }
  *run = [calls]() -> Result {
    for (size_t i = 0; i < calls->size(); ++i) {
      const GroupedCall& c = (*calls)[i];
      Result r = checkAndRun(c.comm, c.fn, c.d, c.work, *c.exec);
      if (r != zcollSuccess) {
        char context[160];
        std::snprintf(context, sizeof(context), "request: collective %zu of %zu (%s) failed%s",
                      i + 1, calls->size(), c.fn,
                      i + 1 < calls->size() ? "; the ones after it were not run" : "");
        return failWithContext(r, context);
      }
    }
    return zcollSuccess;
  };
  return zcollSuccess;
}

}  // namespace zcoll
