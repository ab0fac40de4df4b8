// A request: the completion of operations queued on a communicator's engine for a caller that
// waits later (zcollGroupEndNonBlocking, zcoll.h). The queued operation and the caller's handle
// share its state; whichever finishes last frees it. A waiter whose request is next in the
// comm's order runs it on its own thread (Engine::runIfNext): no hand-off to the progress thread
// and back for a caller that waits at once.
#pragma once

#include <functional>

#include "core/comm.h"

struct zcollRequest;

namespace zcoll {

// Queues `body` on `comm` (in its turn, pinned, as commEnqueue) and gives a new request for it in
// *out. comm NULL: nothing to run, the request is complete with zcollSuccess.
Result startRequest(zcollComm* comm, const char* fn, std::function<Result()> body,
                    zcollRequest** out);

// The entry points' bodies (api/p2p.cc declares the C functions): each refuses a handle that is
// not a live request.
Result testRequest(zcollRequest* request, int* done);
Result setCompletionCallback(zcollRequest* request, void (*fn)(zcollRequest*, zcollResult_t, void*),
                             void* arg);
Result waitRequest(zcollRequest* request);
Result freeRequest(zcollRequest* request);

}  // namespace zcoll
