// The execution engine of a communicator: one order for every operation on it. A blocking call
// (host buffers) takes its place in the order and runs on the caller's thread once everything
// before it has run; an enqueued operation (device buffers on a stream) returns at once and runs
// on the engine's progress thread in its turn. All ranks that submit the same calls in the same
// order therefore run them in that order, on whichever thread, and draw the same tag sequence.
//
// Why the caller runs its own blocking call (instead of handing every call to the progress
// thread, as the first design sketched): a hand-off costs two cross-thread wake-ups per call
// (108-121 us against 33-36 ns for a turn on the caller's thread: perf/engine_bench.cc,
// perf/LOG.md), and host calls are most of the traffic. Operations never overlap, so the
// UCX worker is driven by one thread at a time.
//
// The progress thread starts with the first enqueued operation, and when idle it sleeps on a
// condition variable: an engine with nothing to do takes no CPU. Once the engine is stopped
// (destroyComm, after a destroy or an abort), every operation still queued completes with the
// stop's error without running. A broken communicator does not stop it: the operations queued
// on it fail in their turn with the error that broke it (api/guard.h, commEnqueue).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "base/result.h"

namespace zcoll {

class Engine {
 public:
  using Op = std::function<Result()>;
  using Done = std::function<void(Result)>;

  Engine() = default;
  ~Engine();  // stop(zcollInvalidUsage) if not stopped
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Runs `op` on the calling thread after every operation submitted before it; returns its
  // result. After stop(): the stop's error, without running it.
  Result runInOrder(const Op& op);

  // Queues `op` behind every operation submitted before it and returns at once; the progress
  // thread runs it, then calls done(result) (on that thread). After stop(): zcollInvalidUsage,
  // nothing queued (done is not called). *ticket (if given) names it for runIfNext.
  Result enqueue(Op op, Done done, uint64_t* ticket = nullptr);

  // Runs the queued operation `ticket` (and its done) on the calling thread when it is the next
  // to run and nothing is running; returns whether it did. A thread about to wait for a queued
  // operation calls it first: a wait for the next operation then costs no hand-off to the
  // progress thread and back (two cross-thread wake-ups, about 35 us on 2 cores: python/README).
  bool runIfNext(uint64_t ticket);

  // Waits until every operation submitted so far has completed (run or failed).
  void drain();

  // Fails every queued operation with `error` (their done callbacks get it), lets a running one
  // finish, joins the progress thread. Later submissions fail with `error`. Idempotent.
  void stop(Result error);

  // Operations submitted and not yet completed; the progress thread's CPU time (0 if none).
  uint64_t pending() const;
  double progressThreadCpuSeconds() const;

 private:
  struct Queued {
    uint64_t ticket;
    Op op;
    Done done;
  };
  void progressLoop();
  // Pops the queue's front and runs it, op then done, with the lock released; then its turn ends.
  void runFront(std::unique_lock<std::mutex>& lock);
  // Waits (lock held) until `ticket` is the next to run; false if the engine stopped.
  bool waitForTurn(std::unique_lock<std::mutex>& lock, uint64_t ticket);
  void finishTurn(std::unique_lock<std::mutex>& lock);

  mutable std::mutex mu_;
  std::condition_variable turn_;  // the next ticket may run / the engine stopped
  std::deque<Queued> queue_;      // enqueued operations, in ticket order
  uint64_t nextTicket_ = 0;       // handed to the next submission
  uint64_t completed_ = 0;        // tickets below this one have completed
  bool stopped_ = false;
  Result stopError_ = zcollSuccess;
  std::thread progress_;
};

}  // namespace zcoll
