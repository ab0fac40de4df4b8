// A one-shot gate: opened once with a result, waited for by any number of threads. (Streams no
// longer wait on gates: a queued call's stream waits on a word, Executor::waitValue.)
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
  bool isOpen() {
    std::lock_guard<std::mutex> lock(mu_);
    return open_;
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
