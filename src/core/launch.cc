#include "core/launch.h"

#include <memory>
#include <utility>

#include "core/api_guard.h"
#include "core/progress.h"

namespace zcoll {

namespace {

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

// Queued on the progress thread; the caller's stream is held until the work is over.
Result enqueue(zcollComm* comm, const char* fn, const CallExecutor& ce, const CallDescriptor& d,
               CallWork work) {
  std::unique_ptr<Executor> sideExec;
  ZCOLL_CHECK(ce.exec->makeSideExecutor(&sideExec));
  auto gate = std::make_shared<Gate>();
  ZCOLL_CHECK(ce.exec->holdUntil(gate));
  std::shared_ptr<Executor> side(std::move(sideExec));
  auto op = [comm, fn, d, work = std::move(work), side]() -> Result {
    Result r = side->bindThread();
    if (r == zcollSuccess) r = checkAndRun(comm, fn, d, work, *side);
    // Nobody waits for this result: a failure, usage errors included, breaks the comm so the
    // caller learns it from zcollCommGetAsyncError and from its next call. Peers are told of
    // other failures already (runAlgorithm); a usage error (the call check) every rank finds.
    if (r != zcollSuccess) breakComm(comm, r);
    return r;
  };
  Result queued = commEnqueue(comm, fn, std::move(op), [gate](Result r) { gate->open(r); });
  if (queued != zcollSuccess) gate->open(queued);  // the stream must not wait for nothing
  return queued;
}

}  // namespace

Result launchCall(zcollComm* comm, const char* fn, const CallExecutor& ce, const CallDescriptor& d,
                  CallWork work) {
  if (ce.exec->memKind() == MemKind::kHost || !comm->deviceCallsAsync)
    return runNow(comm, fn, ce, d, work);
  if (!work && !comm->checkCalls) return zcollSuccess;  // nothing to move, nothing to check
  return enqueue(comm, fn, ce, d, std::move(work));
}

}  // namespace zcoll
