// A one-shot gate between the engine and a stream: a call that returns once enqueued holds the
// caller's stream on a gate (Executor::holdUntil), and the progress thread opens it when the
// call's work is done, failed, or will never run. Work the caller queued on the stream after
// the call therefore starts only after the call, as NCCL's stream semantics promise.
#pragma once

#include <condition_variable>
#include <mutex>

#include "base/result.h"

namespace zcoll {

class Gate {
 public:
  // Opens the gate (the first result is kept; later opens do nothing).
  void open(Result result) {
    std::lock_guard<std::mutex> lock(mu_);
    if (open_) return;
    open_ = true;
    result_ = result;
    opened_.notify_all();
  }
  // Blocks until the gate is open; returns the result it was opened with.
  Result wait() {
    std::unique_lock<std::mutex> lock(mu_);
    opened_.wait(lock, [&] { return open_; });
    return result_;
  }

 private:
  std::mutex mu_;
  std::condition_variable opened_;
  bool open_ = false;
  Result result_ = zcollSuccess;
};

}  // namespace zcoll
