#include "api/request.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>

#include "api/guard.h"

namespace zcoll {

namespace {

struct RequestState {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool settled = false;  // done, and its callback (if any) has returned: the handle may go
  Result result = zcollSuccess;
  std::string message;  // the failure's message, from the thread that ran it
  zcollComm* comm = nullptr;
  uint64_t ticket = 0;
  std::function<void(Result)> onComplete;  // zcollRequestOnComplete's callback, called once
  bool callbackSet = false;  // stays set after the callback is taken: a second one is refused
  std::thread::id callbackThread;          // the thread running the callback, while it runs

  void complete(Result r) {
    std::function<void(Result)> callback;
    {
      std::lock_guard<std::mutex> lock(mu);
      result = r;
      if (r != zcollSuccess) message = threadLastError();
      done = true;
      callback.swap(onComplete);
      if (callback) callbackThread = std::this_thread::get_id();
      cv.notify_all();
    }
    if (callback) callback(r);  // outside the lock: it may test or wait on the request
    std::lock_guard<std::mutex> lock(mu);
    settled = true;
    cv.notify_all();
  }
  bool isDone() {
    std::lock_guard<std::mutex> lock(mu);
    return done;
  }
  // The result once done, its message made the calling thread's last error.
  Result report() {
    if (result == zcollSuccess) return zcollSuccess;
    const std::string prefix = std::string(resultName(result)) + ": ";
    const size_t skip = message.rfind(prefix, 0) == 0 ? prefix.size() : 0;
    return fail(result, "%s", message.c_str() + skip);
  }
};

// Live handles: a freed or foreign handle is refused without being read.
std::mutex gLiveMu;
std::unordered_set<const zcollRequest*>& liveRequests() {
  static auto* live = new std::unordered_set<const zcollRequest*>();  // usable at exit
  return *live;
}

std::shared_ptr<RequestState> stateOf(const zcollRequest* request);

// Runs the request on this thread when it is the next operation of its comm. Pinning first keeps
// the comm allocated; a request not yet done after the pin has a comm that is still this one
// (its engine completes every queued request before the comm is freed).
void runIfNext(RequestState& s) {
  if (s.comm == nullptr || pinComm(s.comm) != Pin::kPinned) return;
  if (!s.isDone()) s.comm->engine.runIfNext(s.ticket);
  unpinComm(s.comm);
}

}  // namespace

}  // namespace zcoll

struct zcollRequest {
  std::shared_ptr<zcoll::RequestState> state;
};

namespace zcoll {

namespace {

std::shared_ptr<RequestState> stateOf(const zcollRequest* request) {
  std::lock_guard<std::mutex> lock(gLiveMu);
  if (request == nullptr || liveRequests().count(request) == 0) return nullptr;
  return request->state;
}

Result notLive(const zcollRequest* request, const char* fn) {
  if (request == nullptr) return fail(zcollInvalidArgument, "%s: request is NULL", fn);
  return fail(zcollInvalidArgument, "%s: not a live request (freed already?)", fn);
}

}  // namespace

Result startRequest(zcollComm* comm, const char* fn, std::function<Result()> body,
                    zcollRequest** out) {
  auto request = std::make_unique<zcollRequest>();
  auto state = std::make_shared<RequestState>();
  request->state = state;
  if (comm == nullptr) {
    state->done = state->settled = true;
  } else {
    state->comm = comm;
    ZCOLL_CHECK(commEnqueue(comm, fn, std::move(body),
                            [state](Result r) { state->complete(r); }, &state->ticket));
  }
  std::lock_guard<std::mutex> lock(gLiveMu);
  liveRequests().insert(request.get());
  *out = request.release();
  return zcollSuccess;
}

Result testRequest(zcollRequest* request, int* done) {
  if (done == nullptr) return fail(zcollInvalidArgument, "zcollRequestTest: done is NULL");
  std::shared_ptr<RequestState> s = stateOf(request);
  if (!s) return notLive(request, "zcollRequestTest");
  std::lock_guard<std::mutex> lock(s->mu);
  *done = s->done ? 1 : 0;
  return s->done ? s->report() : zcollSuccess;
}

Result setCompletionCallback(zcollRequest* request, void (*fn)(zcollRequest*, zcollResult_t, void*),
                             void* arg) {
  if (fn == nullptr) return fail(zcollInvalidArgument, "zcollRequestOnComplete: fn is NULL");
  std::shared_ptr<RequestState> s = stateOf(request);
  if (!s) return notLive(request, "zcollRequestOnComplete");
  std::unique_lock<std::mutex> lock(s->mu);
  if (s->callbackSet)
    return fail(zcollInvalidUsage, "zcollRequestOnComplete: the request has a callback already");
  s->callbackSet = true;
  if (!s->done) {
    s->onComplete = [request, fn, arg](Result r) { fn(request, r, arg); };
    return zcollSuccess;
  }
  const Result r = s->result;
  lock.unlock();
  fn(request, r, arg);  // complete already: called here, now
  return zcollSuccess;
}

Result waitRequest(zcollRequest* request) {
  std::shared_ptr<RequestState> s = stateOf(request);
  if (!s) return notLive(request, "zcollRequestWait");
  runIfNext(*s);
  std::unique_lock<std::mutex> lock(s->mu);
  // Settled: a waiter sees what the callback did (a framework's future completed, say). The
  // callback itself may wait on its request: done is enough there.
  const bool inCallback = s->callbackThread == std::this_thread::get_id();
  s->cv.wait(lock, [&] { return inCallback ? s->done : s->settled; });
  return s->report();
}

Result freeRequest(zcollRequest* request) {
  std::shared_ptr<RequestState> s = stateOf(request);
  if (!s) return notLive(request, "zcollRequestFree");
  runIfNext(*s);
  {
    std::unique_lock<std::mutex> lock(s->mu);
    s->cv.wait(lock, [&] { return s->settled; });  // its callback may still hold the handle
  }
  std::lock_guard<std::mutex> lock(gLiveMu);
  if (liveRequests().erase(request) == 0) return notLive(request, "zcollRequestFree");
  delete request;
  return zcollSuccess;
}

}  // namespace zcoll
