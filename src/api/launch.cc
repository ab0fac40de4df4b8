#include "api/launch.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/guard.h"
#include "base/stream_holds.h"
#include "core/progress.h"
#include "trigger/ring.h"

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
  TriggeredWork triggered;
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

// A triggered call's steps to other nodes, served by the proxy (trigger/proxy.h) as an operation
// of the comm's engine, whose tag sequence it draws when it runs (in the engine's order, the
// same on every rank, as queued calls draw theirs). When the operation fails, or cannot run
// (the comm broke, was aborted or destroyed first), the stream's waits are released
// (TriggerRing::releaseAfterFailure), so it never waits for good.
Result enqueueProxy(zcollComm* comm, const char* fn, std::vector<ProxyStep> steps) {
  std::shared_ptr<TriggerRing> ring = comm->trigger;
  return commEnqueue(comm, fn,
                     [ring, comm, steps = std::move(steps)] {
                       return ring->serveProxy(comm, comm->collSeq++, steps);
                     },
                     [ring](Result r) {
                       if (r != zcollSuccess) ring->releaseAfterFailure();
                     });
}

// With the comm's ring (ZCOLL_DEVICE_CALLS=stream), on the caller's thread in its turn: the
// triggered schedule enqueued whole on the caller's stream (joined to the previous call's
// stream; on a capturing stream, recorded into the graph), or, for a call without one, the
// ring drained and the call run synchronously. A failure while enqueueing leaves the ring's
// steps uneven across ranks: it breaks the comm.
Result runWithRing(zcollComm* comm, const char* fn, const CallExecutor& ce,
                   const CallDescriptor& d, const CallWork& work, const TriggeredWork& triggered) {
  auto inTurn = [&] {
    auto body = [&]() -> Result {
      ZCOLL_CHECK(checkCallMatches(comm, d, *ce.exec, fn));
      TriggerRing& ring = *comm->trigger;
      if (!triggered) {
        ZCOLL_CHECK(ring.drain(comm->timeoutSec * 1000));
        return work ? work(*ce.exec) : zcollSuccess;
      }
      bool capturing = false;
      ZCOLL_CHECK(ce.exec->isCapturing(&capturing));
      Result r = ring.join(*ce.exec, capturing);
      if (r == zcollSuccess) r = triggered(ring, *ce.exec);
      std::vector<ProxyStep> proxySteps;
      if (r == zcollSuccess) r = ring.endCall(*ce.exec, &proxySteps);
      if (r == zcollSuccess) r = ring.noteStream(*ce.exec, capturing);  // once, after the last step
      if (r == zcollSuccess && !proxySteps.empty()) {
        r = enqueueProxy(comm, fn, std::move(proxySteps));
        if (r != zcollSuccess) ring.releaseAfterFailure();  // nothing will serve the steps
      }
      if (r != zcollSuccess) breakComm(comm, r);
      return r;
    };
    return runInTurn(comm, fn, body);
  };
  // A triggered call drives no transport (its steps are stream work, its messages an engine
  // operation queued behind every earlier one), so it does not wait for the engine's queue: a
  // previous call's proxy operation waits for its stream to get there, and waiting for it here
  // would hold the caller until the device did (a second call behind a long kernel, or a
  // stream whose work the caller enqueues next: a deadlock). With ZCOLL_CHECK_CALLS the call
  // first trades descriptors over the transports: then it takes its turn.
  if (triggered && !comm->checkCalls) return inTurn();
  return comm->engine.runInOrder(inTurn);
}

}  // namespace

namespace {

// Streams with queued calls in flight, process-wide: for each, the comms with calls on it and how
// many each has.
std::mutex gStreamsMu;
std::map<uintptr_t, std::map<const zcollComm*, int>>& streamsInUse() {
  static auto* m = new std::map<uintptr_t, std::map<const zcollComm*, int>>;  // never freed
  return *m;
}

bool hasMember(const zcollComm* c, uint64_t memberId) {
  for (const PeerInfo& p : c->peers)
    if (p.memberId == memberId) return true;
  return false;
}

// Whether calls of `a` and `b` queued on one stream can wait on each other: a queued call holds
// its stream until its communicator's peers join, so a call queued behind it waits too. They can
// when they are different ranks (members) and one's communicator has the other as a member: two
// ranks of one communicator family (threads of this process), where the call behind the held
// one is the very peer it waits for. Calls of one rank on several communicators (two torch
// groups drawing the same pool stream) are ordered by the stream, as with NCCL; so are calls of
// unrelated communicators.
bool mayWaitOnEachOther(const zcollComm* a, const zcollComm* b) {
  const uint64_t idA = a->peers[a->rank].memberId, idB = b->peers[b->rank].memberId;
  if (idA == idB) return false;
  return hasMember(a, idB) || hasMember(b, idA);
}

std::string streamName(uintptr_t k) {
  char name[40];
  if (k == 0) std::snprintf(name, sizeof name, "NULL (the legacy default stream)");
  else std::snprintf(name, sizeof name, "%#lx", static_cast<unsigned long>(k));
  return name;
}

Result claimStreams(const zcollComm* comm, const char* fn, const std::vector<uintptr_t>& keys) {
  std::lock_guard<std::mutex> lock(gStreamsMu);
  for (uintptr_t k : keys) {
    auto it = streamsInUse().find(k);
    if (it == streamsInUse().end()) continue;
    for (const auto& [other, calls] : it->second) {
      if (other == comm || !mayWaitOnEachOther(comm, other)) continue;
      return fail(zcollInvalidUsage, "%s: the stream %s has calls of rank %d of %s in flight, a "
                  "peer of this rank (rank %d of %s): ranks of one process must each use their "
                  "own stream (NULL included), as with NCCL; one rank's call would hold the "
                  "stream its peer's call needs", fn, streamName(k).c_str(), other->rank,
                  other->name.c_str(), comm->rank, comm->name.c_str());
    }
  }
  for (uintptr_t k : keys) ++streamsInUse()[k][comm];
  return zcollSuccess;
}

void releaseStreams(const zcollComm* comm, const std::vector<uintptr_t>& keys) {
  std::lock_guard<std::mutex> lock(gStreamsMu);
  for (uintptr_t k : keys) {
    auto it = streamsInUse().find(k);
    if (it == streamsInUse().end()) continue;
    auto use = it->second.find(comm);
    if (use != it->second.end() && --use->second == 0) it->second.erase(use);
    if (it->second.empty()) streamsInUse().erase(it);
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
  if (comm->waitWords == nullptr)
    return fail(zcollInternalError, "%s: this communicator has no wait words for queued device "
                "calls (its rank had no device when it was made)", fn);
  ZCOLL_CHECK(claimStreams(comm, fn, keys));
  // A place among the comm's calls in flight (bounded: the caller waits, up to the comm's
  // timeout, for the oldest to finish) and its wait word.
  WaitWords& w = *comm->waitWords;
  uint32_t seq = 0;
  {
    std::unique_lock<std::mutex> lock(w.mu);
    if (!w.changed.wait_for(lock, std::chrono::seconds(comm->timeoutSec),
                            [&] { return w.inFlight < kMaxDeviceCallsInFlight; })) {
      releaseStreams(comm, keys);
      return fail(zcollTimeout, "%s: %d device calls of this communicator are in flight (the "
                  "most it queues) and none finished within the timeout (%d s, ZCOLL_TIMEOUT)",
                  fn, kMaxDeviceCallsInFlight, comm->timeoutSec);
    }
    ++w.inFlight;
    seq = ++w.seq;
  }
  uint32_t* word = w.word(seq);
  // The callers' streams will be held (base/stream_holds.h): nothing that synchronizes the
  // device implicitly may run until the word is stored.
  streams::hold();
  // Releases the callers' streams (a store the device sees: the progress thread only flips a
  // word) and the call's place; once, whatever happens to the call.
  auto done = std::make_shared<std::atomic<bool>>(false);
  const zcollComm* claimant = comm;  // only compared, never read, in releaseStreams
  auto release = [done, word, seq, &w, keys, claimant] {
    if (done->exchange(true)) return;
    __atomic_store_n(word, seq, __ATOMIC_RELEASE);
    {
      std::lock_guard<std::mutex> lock(w.mu);
      --w.inFlight;
    }
    w.changed.notify_all();
    releaseStreams(claimant, keys);
    streams::release();
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
    side->limitWaits(comm->deviceWaitLimits());
    sides.push_back(std::move(side));
  }
  for (Executor* caller : callers) {
    Result r = caller->waitValue(word, seq);
    // A mark after the wait: the words are freed only once every stream got past its last one.
    std::shared_ptr<StreamMark> mark;
    if (r == zcollSuccess) r = caller->markStream(&mark);
    if (r != zcollSuccess) {
      release();  // a stream that waits must never wait for nothing
      return r;
    }
    uintptr_t key = 0;
    if (!caller->sharedStreamKey(&key))  // the thread's own stream (cudaStreamPerThread)
      key = static_cast<uintptr_t>(std::hash<std::thread::id>()(std::this_thread::get_id())) | 1;
    std::lock_guard<std::mutex> lock(w.mu);
    w.noteMark(key, std::move(mark));
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

Result checkDeviceCall(zcollComm* comm, Executor& exec, const char* fn, bool capturable) {
  if (!comm->deviceRouted(comm->rank))  // all peers or none have one
    return fail(zcollUnsupported, "%s: device buffers, but this communicator has no way to move "
                "them: %s (initialize the device, e.g. cudaSetDevice, before creating the "
                "communicator, as NCCL binds a communicator to it)", fn,
                comm->deviceRouteWhy.empty() ? "" : comm->deviceRouteWhy[comm->rank].c_str());
  const int mine = comm->peers[comm->rank].device.ordinal;
  if (exec.device() != mine)
    return fail(zcollInvalidUsage, "%s: the buffers are on device %d, but this communicator "
                "works on device %d (the current device when it was made); use a communicator "
                "of device %d, as NCCL binds one to each device", fn, exec.device(), mine,
                exec.device());
  bool capturing = false;
  ZCOLL_CHECK(exec.isCapturing(&capturing));
  if (capturing && !capturable)
    return fail(zcollInvalidUsage, "%s: the stream is being captured into a CUDA graph: this "
                "call cannot be captured here (only the stream-triggered calls can: all-gather, "
                "reduce-scatter, all-reduce, qwZ, hpZ, qgZ and the quantized all-reduce, with "
                "ZCOLL_DEVICE_CALLS=stream on a communicator of one node whose ranks each have a "
                "device of their own; this communicator %s); run it outside the capture", fn,
                !comm->trigger ? "has none"
                : comm->trigger->spansNodes()
                    ? "spans nodes: a launch would not run the proxy that carries the steps "
                      "between nodes"
                    : "has them, but not for this call");
  exec.limitWaits(comm->deviceWaitLimits());
  return zcollSuccess;
}

Result launchCall(zcollComm* comm, const char* fn, CallExecutor& ce, const CallDescriptor& d,
                  CallWork work, TriggeredWork triggered) {
  if (ce.exec->memKind() != MemKind::kHost)
    ZCOLL_CHECK(checkDeviceCall(comm, *ce.exec, fn,
                                comm->trigger && triggered && !ringSpansNodes(comm)));
  if (inGroup()) {
    tGrouped.push_back({comm, fn, std::move(ce.owned), ce.exec, d, std::move(work),
                        std::move(triggered)});
    return zcollSuccess;
  }
  if (ce.exec->memKind() == MemKind::kHost) return runNow(comm, fn, ce, d, work);
  if (comm->trigger) return runWithRing(comm, fn, ce, d, work, triggered);
  if (!comm->deviceCallsAsync) return runNow(comm, fn, ce, d, work);
  if (!work && !comm->checkCalls) return zcollSuccess;  // nothing to move, nothing to check
  return enqueueOnStreams(comm, fn, {ce.exec}, [comm, fn, d, work = std::move(work)](
                                                   const std::vector<std::shared_ptr<Executor>>& s) {
    return checkAndRun(comm, fn, d, work, *s[0]);
  });
}

// Launches calls[i] for i in `which` (call order), each pinned and checked as a call of its own;
// stops at the first failure, saying which collective of the `total` it was.
Result launchGroupedCalls(std::vector<GroupedCall>& calls, const std::vector<size_t>& which) {
  for (size_t k = 0; k < which.size(); ++k) {
    GroupedCall& c = calls[which[k]];
    CallExecutor ce;
    ce.exec = c.exec;
    ce.owned = std::move(c.owned);
    Result r = pinnedCall(c.comm, c.fn, [&]() -> Result {
      ZCOLL_CHECK(checkCommUsable(c.comm, c.fn));
      return launchCall(c.comm, c.fn, ce, c.d, std::move(c.work), std::move(c.triggered));
    });
    if (r != zcollSuccess) {
      char context[200];
      std::snprintf(context, sizeof(context),
                    "zcollGroupEnd: collective %zu of %zu in the group (%s, on %s) failed; the "
                    "%zu after it on that communicator were not run", which[k] + 1, calls.size(),
                    c.fn, c.comm->name.c_str(), which.size() - k - 1);
      return failWithContext(r, context);
    }
  }
  return zcollSuccess;
}

// Several communicators in one group: each one's calls on a thread of its own, concurrently (as
// NCCL runs a group's operations on several communicators together), so one thread can drive
// several ranks of one job (NCCL's several GPUs per thread), whose collectives wait for each
// other, and calls on unrelated comms do not wait behind each other. The thread binds the
// executor (CUDA: its device becomes current) first. The first failure, in the order the comms
// first appear in the group, is the result, with its message.
Result launchPerComm(std::vector<GroupedCall>& calls,
                     const std::vector<std::vector<size_t>>& perComm) {
  std::vector<Result> results(perComm.size(), zcollSuccess);
  std::vector<std::string> messages(perComm.size());
  std::vector<std::thread> threads;
  for (size_t j = 0; j < perComm.size(); ++j)
    threads.emplace_back([&, j] {
      Result r = calls[perComm[j].front()].exec->bindThread();
      if (r == zcollSuccess) r = launchGroupedCalls(calls, perComm[j]);
      results[j] = r;
      if (r != zcollSuccess) messages[j] = zcollGetLastError(nullptr);
    });
  for (std::thread& t : threads) t.join();
  for (size_t j = 0; j < perComm.size(); ++j)
    if (results[j] != zcollSuccess) return fail(results[j], "%s", messages[j].c_str());
  return zcollSuccess;
}

// Whether a device call of the group is on the calling thread's own stream (CUDA:
// cudaStreamPerThread), which names another stream on any other thread: such a group runs on the
// caller's thread, in call order.
bool onThreadsOwnStream(const std::vector<GroupedCall>& calls) {
  uintptr_t key = 0;
  for (const GroupedCall& c : calls)
    if (c.exec->memKind() != MemKind::kHost && !c.exec->sharedStreamKey(&key)) return true;
  return false;
}

Result runGroupedCalls() {
  std::vector<GroupedCall> calls;
  calls.swap(tGrouped);
  std::vector<zcollComm*> comms;            // in order of first appearance
  std::vector<std::vector<size_t>> perComm;  // each comm's calls, in call order
  for (size_t i = 0; i < calls.size(); ++i) {
    auto at = std::find(comms.begin(), comms.end(), calls[i].comm);
    if (at == comms.end()) {
      comms.push_back(calls[i].comm);
      perComm.emplace_back();
      at = comms.end() - 1;
    }
    perComm[static_cast<size_t>(at - comms.begin())].push_back(i);
  }
  if (perComm.empty()) return zcollSuccess;
  if (perComm.size() == 1 || onThreadsOwnStream(calls)) {
    std::vector<size_t> all(calls.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    return launchGroupedCalls(calls, all);
  }
  return launchPerComm(calls, perComm);
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
