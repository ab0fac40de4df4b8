// How a collective runs once its arguments are checked. The entry point validates on the
// caller's thread (outside the comm's order: checking arguments needs no turn), then hands the
// call to launchCall with the work that moves its data:
//  - Host buffers (and device buffers with ZCOLL_DEVICE_CALLS=sync, or auto on CUDA: see
//    DeviceComponent::queuedCallsTrusted): the call check and the
//    work run on the caller's thread in its turn of the comm's order (exec/engine.h), and the
//    call returns once they are done (the stream synchronized, for device buffers).
//  - Device buffers with queued calls (ZCOLL_DEVICE_CALLS=async, or auto on the tests' stand-in
//    device; NCCL's semantics): the call returns once queued. Its work
//    runs on the comm's progress thread, in its turn, on a side stream that starts after what
//    the caller queued on its stream before the call (Executor::makeSideExecutor); the caller's
//    stream waits on a host-mapped word (Executor::waitValue: a stream memory operation) that
//    the progress thread sets once the work is done, failed or dropped, so what the caller
//    queues after the call sees its result. A failure found then breaks the comm
//    (zcollCommGetAsyncError, zcollGetLastError(comm)) and releases the stream; later calls
//    fail with it. At most kMaxDeviceCallsInFlight calls of a comm are queued; the next caller
//    waits (up to the comm's timeout) for the oldest to finish.
//  - With one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1) device calls run as with
//    ZCOLL_DEVICE_CALLS=sync: a wait queued on the caller's stream before the call's own work
//    is submitted would sit in front of that work in the one queue (src/README.md).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "api/call_check.h"
#include "api/validate.h"
#include "trigger/ring.h"

namespace zcoll {

// The data movement of a call, on `exec` (the call's executor, or the side executor when the
// call is queued). Empty: the call moves nothing (a zero count); only its call check runs.
using CallWork = std::function<Result(Executor& exec)>;

// The same call as a stream-triggered collective (trigger/collectives.h): its whole device
// schedule enqueued on the caller's stream through the comm's ring. Empty: the call has none.
using TriggeredWork = std::function<Result(TriggerRing& ring, Executor& exec)>;

// Runs or queues a validated call (above). `d` describes it for ZCOLL_CHECK_CALLS. What `work`
// captures must be owned by it (copied): a queued call runs after the entry point returned.
// Inside zcollGroupStart/End the call is kept instead (taking ce.owned) and launched at the
// outermost zcollGroupEnd (runGroupedCalls), as NCCL aggregates a group's collectives.
// With ZCOLL_DEVICE_CALLS=stream and a ring (comm->trigger), a device call with `triggered` runs
// it in its turn on the caller's thread and returns once enqueued; one without drains the ring
// first (trigger/ring.h: the window is shared) and runs synchronously.
Result launchCall(zcollComm* comm, const char* fn, CallExecutor& ce, const CallDescriptor& d,
                  CallWork work, TriggeredWork triggered = {});

// Whether the calling thread is inside zcollGroupStart/End (api/p2p.cc).
bool inGroup();
// At the outermost zcollGroupEnd: launches the collectives the thread kept in the group, in call
// order per communicator, each pinned and checked as a call of its own (host ones complete,
// device ones queued); the calls of different communicators run concurrently, each comm's on a
// thread of its own (so one thread may drive several ranks of one job, as NCCL allows). Stops a
// comm's calls at its first failure (the message says which collective; the rest are dropped).
Result runGroupedCalls();
// Drops the kept collectives without running them (a group whose queueing failed).
void dropGroupedCalls();
// For zcollGroupEndNonBlocking: takes the kept collectives out as one body that runs them in call
// order (each with its call check) in a turn of their communicator, *comm (NULL when the group
// kept none). zcollInvalidUsage, the calls dropped, when they span communicators or use device
// buffers (those are non-blocking on their stream already).
Result takeGroupedHostCalls(zcollComm** comm, std::function<Result()>* run);

// The most calls on device buffers a communicator has queued and not finished.
constexpr int kMaxDeviceCallsInFlight = 64;


// A call on device buffers (executor `exec`) needs the comm's device routes, which exist when the
// rank had an initialized device at init (core/init.cc): zcollUnsupported saying so otherwise;
// and its buffers on the comm's device: zcollInvalidUsage naming both devices otherwise; and its
// stream not under graph capture (Executor::isCapturing) unless the call is `capturable` (a
// stream-triggered call on a comm with a ring, src/trigger): zcollInvalidUsage naming the
// capture otherwise. All before anything moves or is queued on the stream (the comm stays
// usable). Then bounds the executor's waits by the comm's abort and timeout
// (Executor::limitWaits).
Result checkDeviceCall(zcollComm* comm, Executor& exec, const char* fn, bool capturable = false);

// Queues `work` on the comm's progress thread for a call on device buffers whose executors
// (streams) are `callers` (at least one). A stream with calls in flight of a peer rank of this
// process (a comm whose members include this rank, or the other way round, with another own
// member) is refused (zcollInvalidUsage: ranks must not share a stream); one rank's comms may
// share one. Each caller gets a
// side executor that starts after its stream; all are made before any stream waits, since
// callers may share a stream and a side stream made after a wait would wait for the call it
// belongs to. Then every caller's stream waits on the call's word until the work is over (run,
// failed, or dropped after an abort or destroy). The progress
// thread binds the first side executor and runs work(sides), sides[i] standing for callers[i];
// a failure breaks the comm.
using SideWork = std::function<Result(const std::vector<std::shared_ptr<Executor>>& sides)>;
Result enqueueOnStreams(zcollComm* comm, const char* fn, const std::vector<Executor*>& callers,
                        SideWork work);

}  // namespace zcoll
