// Public C API: point-to-point and groups.
//   Outside a group zcollSend/zcollRecv block until their transfer completes. Inside a group
//   they are queued (per thread) and all posted at the outermost zcollGroupEnd, then waited for
//   together, so exchanges that would deadlock one by one (A sends to B while B sends to A)
//   complete. Collectives called in a group are kept too (api/launch.h) and run at that
//   zcollGroupEnd, in call order per communicator (several comms' concurrently), before the
//   point-to-point operations. Pairs match in call order: the n-th send from A to B meets B's n-th receive from A.
//   Device buffers travel over the peer's device route (cuda_ipc or staged). Calls on device
//   buffers of one comm return once enqueued, as collectives do (api/launch.h): they run on the
//   comm's progress thread, and each stream is held until they are done. Otherwise (host
//   buffers, ZCOLL_DEVICE_CALLS=sync, a group over several comms or mixing kinds) they run on the
//   caller's thread, in their turn of every comm they use, and are complete when the call (or
//   zcollGroupEnd) returns.
#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

#include "api/guard.h"
#include "api/launch.h"
#include "api/request.h"
#include "api/validate.h"
#include "base/dtype.h"
#include "coll/coll.h"
#include "core/flight_recorder.h"

using namespace zcoll;

namespace {

struct P2pOp {
  zcollComm* comm;
  bool isSend;
  void* buf;
  size_t bytes;
  int peer;
  std::shared_ptr<Executor> ownedExec;  // a device buffer's executor, on the call's stream
  Executor* exec;
};

thread_local int tGroupDepth = 0;
thread_local std::vector<P2pOp> tQueued;
thread_local Result tGroupError = zcollSuccess;  // first failure while queueing

// Posts `op`. A device buffer's bytes are moved only after the work queued before the call on
// its stream (it may still write the buffer to send, or use the buffer to receive into): a
// fence or a flush (core/progress.h). Its bytes take the peer's device route.
Result post(const P2pOp& op, Request* req) {
  zcollComm* c = op.comm;
  if (op.isSend)
    return postSend(c, op.peer, op.buf, op.bytes, makeP2pTag(c->sendSeq[op.peer]++, c->rank),
                    req, op.exec);
  return postRecv(c, op.peer, op.buf, op.bytes, makeP2pTag(c->recvSeq[op.peer]++, op.peer), req,
                  op.exec);
}

// Posts every operation, then waits per communicator.
Result runOpsUnrecorded(const std::vector<P2pOp>& ops) {
  RequestList reqs(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) ZCOLL_CHECK(post(ops[i], reqs.next()));
  Result first = zcollSuccess;
  for (size_t i = 0; i < ops.size(); ++i) {
    Result r = waitAll(ops[i].comm, reqs.data() + i, 1);
    if (r == zcollSuccess) r = ops[i].exec->flush();
    if (r != zcollSuccess && first == zcollSuccess) first = r;
    if (r == zcollSuccess) ops[i].comm->stats.ops.fetch_add(1, std::memory_order_relaxed);
  }
  return first;
}

// One flight-recorder entry per communicator the operations use: "send" or "recv" with its peer
// for one operation, else "sendrecv" with their number as the count.
std::vector<std::unique_ptr<RecordedOp>> recordOps(const std::vector<P2pOp>& ops) {
  std::vector<std::unique_ptr<RecordedOp>> records;
  std::vector<zcollComm*> seen;
  for (const P2pOp& op : ops) {
    if (std::find(seen.begin(), seen.end(), op.comm) != seen.end()) continue;
    seen.push_back(op.comm);
    FlightEntry e;
    size_t n = 0;
    for (const P2pOp& o : ops) n += o.comm == op.comm ? 1 : 0;
    e.op = n > 1 ? "sendrecv" : op.isSend ? "send" : "recv";
    e.algorithm = "p2p";
    e.count = n > 1 ? n : op.bytes;
    e.dtype = n > 1 ? -1 : zcollUint8;
    e.peer = n > 1 ? -1 : op.peer;
    records.push_back(std::make_unique<RecordedOp>(op.comm, e));
  }
  return records;
}

Result runOps(const std::vector<P2pOp>& ops) {
  std::vector<std::unique_ptr<RecordedOp>> records = recordOps(ops);
  Result r = runOpsUnrecorded(ops);
  for (auto& rec : records) rec->finish(r);
  return r;
}

// Runs `body` in its turn of every comm of `comms` (comms[i..]): after every call submitted to
// them before it, collectives queued on their progress threads included.
Result inTurnOfEach(const std::vector<zcollComm*>& comms, size_t i,
                    const std::function<Result()>& body) {
  if (i == comms.size()) return body();
  return comms[i]->engine.runInOrder([&] { return inTurnOfEach(comms, i + 1, body); });
}

// Whether `ops` are queued like a device collective (api/launch.h): all on one comm that
// queues device calls, each one that moves bytes on device buffers, and at least one such.
bool queueable(const std::vector<P2pOp>& ops) {
  bool device = false;
  for (const P2pOp& op : ops) {
    if (op.comm != ops[0].comm) return false;
    if (op.bytes == 0) continue;
    if (op.exec->memKind() == MemKind::kHost) return false;
    device = true;
  }
  return device && ops[0].comm->deviceCallsAsync;
}

// Queues `ops` on their comm's progress thread (api/launch.h): each operation that moves bytes
// runs on a side stream of its own stream, and its stream is held until the whole batch is over.
Result enqueueOps(const char* fn, const std::vector<P2pOp>& ops) {
  std::vector<Executor*> callers;
  std::vector<size_t> moving;  // operations with bytes, in the order of `callers`
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].bytes != 0) {
      callers.push_back(ops[i].exec);
      moving.push_back(i);
    }
  return enqueueOnStreams(ops[0].comm, fn, callers,
                          [ops, moving](const std::vector<std::shared_ptr<Executor>>& sides) {
                            std::vector<P2pOp> onSides = ops;
                            for (size_t k = 0; k < moving.size(); ++k) {
                              onSides[moving[k]].ownedExec = sides[k];
                              onSides[moving[k]].exec = sides[k].get();
                            }
                            return runOps(onSides);
                          });
}

// Runs `ops` now, in the turn of every comm they use, or queues them (device buffers). Every
// comm is pinned first (a group's comm may have been destroyed or aborted since its operations
// were queued: refused, never touched) and checked usable; an abort that marks one while the
// operations run makes them fail (abortedDuringCall).
Result launchOps(const char* fn, const std::vector<P2pOp>& ops) {
  std::vector<zcollComm*> comms;
  for (const P2pOp& op : ops)
    if (std::find(comms.begin(), comms.end(), op.comm) == comms.end()) comms.push_back(op.comm);
  size_t pinned = 0;
  Result r = zcollSuccess;
  for (; pinned < comms.size(); ++pinned) {
    Pin pin = pinComm(comms[pinned]);
    if (pin != Pin::kPinned) {
      r = notPinned(pin, comms[pinned], fn);
      break;
    }
  }
  for (size_t i = 0; i < pinned && r == zcollSuccess; ++i) r = checkCommUsable(comms[i], fn);
  if (r == zcollSuccess && queueable(ops)) {
    r = enqueueOps(fn, ops);
  } else if (r == zcollSuccess) {
    r = inTurnOfEach(comms, 0, [&] {
      Result res = runOps(ops);
      if (res != zcollSuccess)  // before the next operation: the caller may reuse its buffers
        for (zcollComm* c : comms) settleCancelledTransfers(c);
      return res;
    });
  }
  bool aborted = false;
  for (size_t i = 0; i < pinned; ++i) {
    if (r != zcollSuccess) recordError(comms[i]);
    if (unpinCallAborted(comms[i])) aborted = true;
  }
  if (aborted && r == zcollSuccess) r = abortedDuringCall(fn);
  return r;
}

zcollResult_t p2pCall(const char* fn, bool isSend, const void* buf, size_t count,
                      zcollDataType_t dtype, int peer, zcollComm* comm, zcollStream_t stream) {
  return collCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkDtype(dtype, fn));
    if (peer < 0 || peer >= comm->nranks)
      return fail(zcollInvalidArgument, "%s: peer %d must be in [0, %d)", fn, peer, comm->nranks);
    ZCOLL_CHECK(checkSize(count, 1, dtypeSize(dtype), fn));
    ZCOLL_CHECK(checkBuffer(buf, count, isSend ? "sendbuff" : "recvbuff", fn));
    CallExecutor ce;
    ZCOLL_CHECK(checkCallMemory(count ? buf : nullptr, nullptr, stream, fn, &ce));
    if (ce.exec->memKind() != MemKind::kHost) ZCOLL_CHECK(checkDeviceCall(comm, *ce.exec, fn));
    P2pOp op{comm,    isSend, const_cast<void*>(buf), count * dtypeSize(dtype), peer,
             nullptr, ce.exec};
    op.ownedExec = std::move(ce.owned);
    if (tGroupDepth > 0) {
      tQueued.push_back(op);
      return zcollSuccess;
    }
    if (peer == comm->rank)
      return fail(zcollInvalidUsage, "%s: a rank sending to or receiving from itself must do "
                  "both inside zcollGroupStart/End", fn);
    return launchOps(fn, {op});
  });
}

}  // namespace

namespace zcoll {
bool inGroup() { return tGroupDepth > 0; }
void noteGroupFailure(Result r) {
  if (tGroupDepth > 0 && tGroupError == zcollSuccess) tGroupError = r;
}
}  // namespace zcoll

extern "C" {

zcollResult_t zcollSend(const void* sendbuff, size_t count, zcollDataType_t datatype, int peer,
                        zcollComm_t comm, zcollStream_t stream) {
  return p2pCall("zcollSend", true, sendbuff, count, datatype, peer, comm, stream);
}

zcollResult_t zcollRecv(void* recvbuff, size_t count, zcollDataType_t datatype, int peer,
                        zcollComm_t comm, zcollStream_t stream) {
  return p2pCall("zcollRecv", false, recvbuff, count, datatype, peer, comm, stream);
}

zcollResult_t zcollGroupStart(void) {
  return guarded(nullptr, [&]() -> Result {
    if (tGroupDepth == 0) tGroupError = zcollSuccess;
    ++tGroupDepth;
    return zcollSuccess;
  });
}

zcollResult_t zcollGroupEnd(void) {
  return guarded(nullptr, [&]() -> Result {
    if (tGroupDepth == 0)
      return fail(zcollInvalidUsage, "zcollGroupEnd without a matching zcollGroupStart");
    if (--tGroupDepth > 0) return zcollSuccess;
    std::vector<P2pOp> ops;
    ops.swap(tQueued);
    if (tGroupError != zcollSuccess) {
      dropGroupedCalls();
      return fail(tGroupError, "zcollGroupEnd: an operation of this group was rejected; the "
                  "group was not run");
    }
    // The collectives first, in call order (every rank runs them before its point-to-point
    // operations, so mixing both in one group cannot deadlock), then the point-to-point ones
    // together. A comm broken, aborted or destroyed since queueing is reported, not used.
    ZCOLL_CHECK(runGroupedCalls());
    if (ops.empty()) return zcollSuccess;
    return launchOps("zcollGroupEnd", ops);
  });
}

zcollResult_t zcollGroupEndNonBlocking(zcollRequest_t* request) {
  return guarded(nullptr, [&]() -> Result {
    const char* fn = "zcollGroupEndNonBlocking";
    if (request == nullptr) return fail(zcollInvalidArgument, "%s: request is NULL", fn);
    *request = nullptr;
    if (tGroupDepth == 0)
      return fail(zcollInvalidUsage, "%s without a matching zcollGroupStart", fn);
    if (tGroupDepth > 1)
      return fail(zcollInvalidUsage, "%s ends the outermost group only (depth %d): end the inner "
                  "ones with zcollGroupEnd", fn, tGroupDepth);
    tGroupDepth = 0;
    auto ops = std::make_shared<std::vector<P2pOp>>();
    ops->swap(tQueued);
    if (tGroupError != zcollSuccess) {
      dropGroupedCalls();
      return fail(tGroupError, "%s: an operation of this group was rejected; the group was not "
                  "run", fn);
    }
    zcollComm* comm = nullptr;
    std::function<Result()> collectives;
    ZCOLL_CHECK(takeGroupedHostCalls(&comm, &collectives));
    for (const P2pOp& op : *ops) {
      if (comm == nullptr) comm = op.comm;
      if (op.comm != comm)
        return fail(zcollInvalidUsage, "%s: the group uses several communicators; a request "
                    "covers one: end such a group with zcollGroupEnd", fn);
      if (op.bytes > 0 && op.exec->memKind() != MemKind::kHost)
        return fail(zcollInvalidUsage, "%s: a send or receive of the group is on device buffers, "
                    "which are non-blocking on their stream already: end the group with "
                    "zcollGroupEnd", fn);
    }
    // The collectives first, in call order, then the point-to-point operations together (as
    // zcollGroupEnd), all in one turn of the comm.
    return startRequest(comm, fn, [collectives, ops]() -> Result {
      if (collectives) ZCOLL_CHECK(collectives());
      return ops->empty() ? zcollSuccess : runOps(*ops);
    }, request);
  });
}

zcollResult_t zcollRequestTest(zcollRequest_t request, int* done) {
  return guarded(nullptr, [&] { return testRequest(request, done); });
}

zcollResult_t zcollRequestOnComplete(zcollRequest_t request,
                                     void (*fn)(zcollRequest_t, zcollResult_t, void*), void* arg) {
  return guarded(nullptr, [&] { return setCompletionCallback(request, fn, arg); });
}

zcollResult_t zcollRequestWait(zcollRequest_t request) {
  return guarded(nullptr, [&] { return waitRequest(request); });
}

zcollResult_t zcollRequestFree(zcollRequest_t request) {
  return guarded(nullptr, [&] { return freeRequest(request); });
}

}  // extern "C"
