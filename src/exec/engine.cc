#include "exec/engine.h"

#include <pthread.h>
#include <time.h>

#include <system_error>

namespace zcoll {

namespace {

Result notRun(Result error) {
  return fail(error, "operation not run: the communicator's engine was stopped (%s)",
              resultName(error));
}

}  // namespace

Engine::~Engine() { stop(zcollInvalidUsage); }

bool Engine::waitForTurn(std::unique_lock<std::mutex>& lock, uint64_t ticket) {
  turn_.wait(lock, [&] { return completed_ == ticket || stopped_; });
  return !stopped_;
}

void Engine::finishTurn(std::unique_lock<std::mutex>&) {
  ++completed_;
  turn_.notify_all();
}

Result Engine::runInOrder(const Op& op) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stopped_) return notRun(stopError_);
  const uint64_t ticket = nextTicket_++;
  if (!waitForTurn(lock, ticket)) return notRun(stopError_);
  // In our turn: nothing else runs until finishTurn, even if op throws.
  struct TurnGuard {
    Engine* e;
    std::unique_lock<std::mutex>* lock;
    ~TurnGuard() {
      lock->lock();
      e->finishTurn(*lock);
    }
  } guard{this, &lock};
  lock.unlock();
  return op();
}

Result Engine::enqueue(Op op, Done done, uint64_t* ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) {
    return fail(zcollInvalidUsage, "cannot queue an operation: the communicator's engine was "
                "stopped (%s)", resultName(stopError_));
  }
  if (!progress_.joinable()) {
    try {
      progress_ = std::thread([this] {
        pthread_setname_np(pthread_self(), "zcoll-progress");  // as top and perf show it
        progressLoop();
      });
    } catch (const std::system_error& e) {
      return fail(zcollSystemError, "cannot start the progress thread: %s", e.what());
    }
  }
  if (ticket != nullptr) *ticket = nextTicket_;
  queue_.push_back(Queued{nextTicket_++, std::move(op), std::move(done)});
  turn_.notify_all();
  return zcollSuccess;
}

bool Engine::runIfNext(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  // Next and not taken: the turn before it has completed and it is still at the queue's front
  // (the progress thread pops what it runs under this lock).
  if (stopped_ || completed_ != ticket || queue_.empty() || queue_.front().ticket != ticket)
    return false;
  runFront(lock);
  return true;
}

void Engine::runFront(std::unique_lock<std::mutex>& lock) {
  Queued q = std::move(queue_.front());
  queue_.pop_front();
  lock.unlock();
  Result r = q.op();
  if (q.done) q.done(r);
  lock.lock();
  finishTurn(lock);
}

void Engine::progressLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    turn_.wait(lock, [&] {
      return stopped_ || (!queue_.empty() && queue_.front().ticket == completed_);
    });
    if (stopped_) return;  // stop() fails what is queued
    runFront(lock);
  }
}

void Engine::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t last = nextTicket_;
  turn_.wait(lock, [&] { return completed_ >= last || (stopped_ && queue_.empty()); });
}

void Engine::stop(Result error) {
  std::deque<Queued> failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopped_) {
      stopped_ = true;
      stopError_ = error;
    }
    failed.swap(queue_);
    turn_.notify_all();
  }
  for (Queued& q : failed) {
    Result r = notRun(stopError_);
    if (q.done) q.done(r);
  }
  if (!progress_.joinable()) return;
  if (progress_.get_id() == std::this_thread::get_id()) {
    progress_.detach();  // stopped from one of its own operations: it leaves after that one
  } else {
    progress_.join();
  }
}

uint64_t Engine::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return nextTicket_ - completed_;
}

double Engine::progressThreadCpuSeconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!progress_.joinable()) return 0.0;
  clockid_t cid;
  timespec ts{};
  if (pthread_getcpuclockid(const_cast<std::thread&>(progress_).native_handle(), &cid) != 0 ||
      clock_gettime(cid, &ts) != 0)
    return 0.0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace zcoll
