// The engine's cost per operation (src/exec/engine.h), Google Benchmark:
//   run_in_order: a blocking call taking its turn on the caller's thread (what every host call
//                 pays: one uncontended lock, a ticket, a notify);
//   enqueue_and_wait: the same empty operation handed to the progress thread and waited for
//                 (two cross-thread wake-ups: what every call would pay if the progress thread
//                 ran all of them, the first design sketched).
//
//   build/perf/engine_bench --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <condition_variable>
#include <mutex>

#include "exec/engine.h"

namespace zcoll {
namespace {

void runInOrder(benchmark::State& state) {
  Engine e;
  for (auto _ : state) benchmark::DoNotOptimize(e.runInOrder([] { return zcollSuccess; }));
}
BENCHMARK(runInOrder)->Name("run_in_order");

void enqueueAndWait(benchmark::State& state) {
  Engine e;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  for (auto _ : state) {
    done = false;
    e.enqueue([] { return zcollSuccess; },
              [&](Result) {
                std::lock_guard<std::mutex> l(mu);
                done = true;
                cv.notify_one();
              });
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return done; });
  }
}
BENCHMARK(enqueueAndWait)->Name("enqueue_and_wait")->UseRealTime();

}  // namespace
}  // namespace zcoll

BENCHMARK_MAIN();
