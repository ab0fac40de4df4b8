#include "api/launch.h"

#include <cstdio>
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

Result enqueueOnStreams(zcollComm* comm, const char* fn, const std::vector<Executor*>& callers,
                        SideWork work) {
  std::vector<std::shared_ptr<Executor>> sides;
  for (Executor* caller : callers) {
    std::unique_ptr<Executor> side;
    ZCOLL_CHECK(caller->makeSideExecutor(&side));
    sides.push_back(std::move(side));
  }
  std::vector<std::shared_ptr<Gate>> gates;
  auto openAll = [](const std::vector<std::shared_ptr<Gate>>& gs, Result r) {
    for (const auto& g : gs) g->open(r);  // a held stream must never wait for nothing
  };
  for (Executor* caller : callers) {
    gates.push_back(std::make_shared<Gate>());
    Result r = caller->holdUntil(gates.back());
    if (r != zcollSuccess) {
      openAll(gates, r);
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
  Result queued =
      commEnqueue(comm, fn, std::move(op), [gates, openAll](Result r) { openAll(gates, r); });
  if (queued != zcollSuccess) openAll(gates, queued);
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
