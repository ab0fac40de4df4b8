#include "base/stream_holds.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>
#include <vector>

namespace zcoll::streams {

namespace {

struct Holds {
  std::mutex mu;
  std::condition_variable changed;
  int held = 0;
  bool busy = false;  // an operation that must not overlap a held stream is running
  std::vector<std::function<void()>> deferred;
};

Holds& holds() {
  static Holds* h = new Holds;  // never destroyed: streams may be released during exit
  return *h;
}

// Runs `op` with new holds kept out (busy), the lock released meanwhile, then what was deferred
// meanwhile. No stream is held throughout: holds wait while busy, and busy starts at zero.
template <typename Op>
void runExclusive(Holds& h, std::unique_lock<std::mutex>& lock, Op&& op) {
  h.busy = true;
  lock.unlock();
  op();
  lock.lock();
  while (!h.deferred.empty()) {
    std::vector<std::function<void()>> ops;
    ops.swap(h.deferred);
    lock.unlock();
    for (auto& d : ops) d();
    ops.clear();  // what they own goes outside the lock too
    lock.lock();
  }
  h.busy = false;
  h.changed.notify_all();
}

// Runs the deferred operations when nothing is held or running (lock held).
void runDeferred(Holds& h, std::unique_lock<std::mutex>& lock) {
  if (h.held == 0 && !h.busy && !h.deferred.empty()) runExclusive(h, lock, [] {});
}

}  // namespace

void hold() {
  Holds& h = holds();
  std::unique_lock<std::mutex> lock(h.mu);
  h.changed.wait(lock, [&] { return !h.busy; });
  ++h.held;
}

void release() {
  Holds& h = holds();
  std::unique_lock<std::mutex> lock(h.mu);
  --h.held;
  h.changed.notify_all();
  runDeferred(h, lock);
}

Result whenNoneHeld(int waitMs, const char* what, const std::function<Result()>& op) {
  Holds& h = holds();
  std::unique_lock<std::mutex> lock(h.mu);
  if (!h.changed.wait_for(lock, std::chrono::milliseconds(waitMs > 0 ? waitMs : 0),
                          [&] { return h.held == 0 && !h.busy; }))
    return fail(zcollTimeout, "%s: %d device calls of this process still hold their streams "
                "after %d ms (it synchronizes the device implicitly, so it must not run while a "
                "stream waits for zcoll)", what, h.held, waitMs);
  Result r = zcollSuccess;
  runExclusive(h, lock, [&] { r = op(); });
  return r;
}

bool ifNoneHeld(const std::function<void()>& op) {
  Holds& h = holds();
  std::unique_lock<std::mutex> lock(h.mu);
  h.changed.wait(lock, [&] { return !h.busy; });  // another thread's: short, and local
  if (h.held != 0) return false;
  runExclusive(h, lock, op);
  return true;
}

void deferUntilNoneHeld(std::function<void()> op) {
  Holds& h = holds();
  std::unique_lock<std::mutex> lock(h.mu);
  h.deferred.push_back(std::move(op));
  runDeferred(h, lock);
}

int held() {
  Holds& h = holds();
  std::lock_guard<std::mutex> lock(h.mu);
  return h.held;
}

}  // namespace zcoll::streams
