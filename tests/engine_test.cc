// The execution engine (src/exec/engine.h): one order for every operation on a communicator,
// blocking calls on the caller's thread and queued ones on the progress thread; a stopped engine
// fails what is queued with its error; an idle one takes no CPU. Then the same through real
// communicators: queued collectives interleaved with blocking calls give the right results on
// every rank, and an abort fails the running and the queued operations promptly.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "api/guard.h"
#include "coll/coll.h"
#include "core/comm.h"
#include "exec/engine.h"
#include "support/ranks.h"

namespace zcoll {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A one-shot gate an operation can wait on.
class Gate {
 public:
  void open() {
    std::lock_guard<std::mutex> l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST(Engine, QueuedAndBlockingOperationsRunInSubmissionOrder) {
  Engine e;
  std::mutex mu;
  std::vector<int> ran;
  auto op = [&](int id) {
    return [&, id]() -> Result {
      std::this_thread::sleep_for(milliseconds(id % 3));  // uneven durations
      std::lock_guard<std::mutex> l(mu);
      ran.push_back(id);
      return zcollSuccess;
    };
  };
  std::vector<int> expected;
  for (int id = 0; id < 30; ++id) {
    expected.push_back(id);
    if (id % 4 == 3) {
      ASSERT_EQ(e.runInOrder(op(id)), zcollSuccess);  // waits for the queued ones before it
      std::lock_guard<std::mutex> l(mu);
      EXPECT_EQ(ran.size(), static_cast<size_t>(id + 1)) << "blocking call " << id;
    } else {
      ASSERT_EQ(e.enqueue(op(id), nullptr), zcollSuccess);
    }
  }
  e.drain();
  EXPECT_EQ(e.pending(), 0u);
  EXPECT_EQ(ran, expected);
}

TEST(Engine, StopFailsQueuedOperationsWithItsErrorAndLetsTheRunningOneFinish) {
  Engine e;
  Gate started, release;
  std::promise<Result> first, second, third;
  ASSERT_EQ(e.enqueue([&] { started.open(); release.wait(); return zcollSuccess; },
                      [&](Result r) { first.set_value(r); }),
            zcollSuccess);
  bool secondRan = false;
  ASSERT_EQ(e.enqueue([&] { secondRan = true; return zcollSuccess; },
                      [&](Result r) { second.set_value(r); }),
            zcollSuccess);
  ASSERT_EQ(e.enqueue([&] { return zcollSuccess; }, [&](Result r) { third.set_value(r); }),
            zcollSuccess);
  started.wait();
  std::thread stopper([&] { e.stop(zcollRemoteError); });  // joins once the first returns
  auto f2 = second.get_future(), f3 = third.get_future();
  ASSERT_EQ(f2.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(f2.get(), zcollRemoteError);
  EXPECT_EQ(f3.get(), zcollRemoteError);
  release.open();
  stopper.join();
  EXPECT_EQ(first.get_future().get(), zcollSuccess);
  EXPECT_FALSE(secondRan);
  // After the stop nothing runs.
  bool ran = false;
  EXPECT_EQ(e.runInOrder([&] { ran = true; return zcollSuccess; }), zcollRemoteError);
  EXPECT_NE(threadLastError().find("stopped"), std::string::npos) << threadLastError();
  EXPECT_EQ(e.enqueue([&] { ran = true; return zcollSuccess; }, nullptr), zcollInvalidUsage);
  EXPECT_FALSE(ran);
}

TEST(Engine, ABlockingCallWaitingBehindQueuedOnesFailsWhenTheEngineStops) {
  Engine e;
  Gate started, release;
  ASSERT_EQ(e.enqueue([&] { started.open(); release.wait(); return zcollSuccess; }, nullptr),
            zcollSuccess);
  started.wait();
  std::atomic<bool> ran{false};
  auto blocked = std::async(std::launch::async,
                            [&] { return e.runInOrder([&] { ran = true; return zcollSuccess; }); });
  std::this_thread::sleep_for(milliseconds(50));
  std::thread stopper([&] { e.stop(zcollRemoteError); });
  ASSERT_EQ(blocked.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(blocked.get(), zcollRemoteError);
  EXPECT_FALSE(ran);
  release.open();
  stopper.join();
}

// runIfNext runs a queued operation on the calling thread only when it is next and not taken:
// not while an earlier one is queued or running, not twice, and its done callback runs there.
TEST(Engine, RunIfNextRunsTheNextQueuedOperationOnTheCallingThread) {
  Engine e;
  Gate started, release;
  std::thread::id ranOn, doneOn;
  uint64_t first = 0, second = 0;
  ASSERT_EQ(e.enqueue([&]() -> Result { started.open(); release.wait(); return zcollSuccess; },
                      nullptr, &first),
            zcollSuccess);
  ASSERT_EQ(e.enqueue([&]() -> Result { ranOn = std::this_thread::get_id(); return zcollSuccess; },
                      [&](Result r) {
                        EXPECT_EQ(r, zcollSuccess);
                        doneOn = std::this_thread::get_id();
                      },
                      &second),
            zcollSuccess);
  EXPECT_EQ(second, first + 1);
  started.wait();
  EXPECT_FALSE(e.runIfNext(first)) << "taken by the progress thread already";
  EXPECT_FALSE(e.runIfNext(second)) << "the operation before it still runs";
  // Blocks the progress thread from taking `second`: a blocking call in the queue's way would, so
  // instead wait until the first is done and race the progress thread for the second. Either
  // runs it exactly once.
  release.open();
  bool mine = false;
  for (int i = 0; i < 1000 && !mine && e.pending() > 0; ++i) mine = e.runIfNext(second);
  e.drain();
  EXPECT_EQ(e.pending(), 0u);
  if (mine) {
    EXPECT_EQ(ranOn, std::this_thread::get_id());
    EXPECT_EQ(doneOn, std::this_thread::get_id());
  }
  EXPECT_FALSE(e.runIfNext(second)) << "ran twice";
}

// An operation queued while this thread holds a blocking turn is not run inside that turn; after
// it, it runs exactly once (by this thread or the progress thread, whichever takes it).
TEST(Engine, RunIfNextAfterABlockingTurn) {
  Engine e;
  uint64_t ticket = 0;
  std::thread::id ranOn;
  bool queued = false;
  ASSERT_EQ(e.runInOrder([&]() -> Result {
              // In our turn: the queued one cannot run until it ends.
              queued = e.enqueue([&]() -> Result {
                ranOn = std::this_thread::get_id();
                return zcollSuccess;
              }, nullptr, &ticket) == zcollSuccess;
              EXPECT_FALSE(e.runIfNext(ticket)) << "ran inside another operation's turn";
              return zcollSuccess;
            }),
            zcollSuccess);
  ASSERT_TRUE(queued);
  e.runIfNext(ticket);  // this thread or the progress thread: exactly one runs it
  e.drain();
  EXPECT_NE(ranOn, std::thread::id());
}

TEST(Engine, AnIdleProgressThreadTakesNoCpu) {
  Engine e;
  ASSERT_EQ(e.enqueue([] { return zcollSuccess; }, nullptr), zcollSuccess);
  e.drain();
  const double before = e.progressThreadCpuSeconds();
  ASSERT_GT(before, 0.0) << "no CPU clock for the progress thread: the check below would be void";
  std::this_thread::sleep_for(milliseconds(300));
  const double used = e.progressThreadCpuSeconds() - before;
  EXPECT_LT(used, 0.005) << "the idle progress thread used " << used << " s of CPU in 0.3 s";
}

// ---- Through communicators ------------------------------------------------------------------

// An all-reduce (sum) of `x` in place, queued on `comm`; `done` gets its result.
Result enqueueAllReduce(zcollComm* comm, std::vector<float>* x, std::promise<Result>* done) {
  return commEnqueue(
      comm, "test.enqueueAllReduce",
      [comm, x]() -> Result {
        CollArgs a{x->data(), x->data(), x->size(), zcollFloat32, zcollSum, -1};
        return runAlgorithm(comm, CollKind::kAllReduce, a, x->size() * sizeof(float));
      },
      [done](Result r) { done->set_value(r); });
}

TEST(Engine, QueuedCollectivesAndBlockingCallsKeepOneOrderOnEveryRank) {
  // Each rank queues all-reduces of different sizes and values between blocking all-reduces,
  // at its own pace. A rank that ran them in another order would pair a different call with
  // its peers' (different counts: zcollInvalidUsage or a wrong sum).
  test::runRanks(test::RankSetup{3, 1}, [&](int rank, zcollComm_t comm) {
    constexpr int kRounds = 6;
    std::vector<std::vector<float>> queued(kRounds);
    std::vector<std::promise<Result>> done(kRounds);
    for (int k = 0; k < kRounds; ++k) {
      queued[k].assign(100 + 37 * k, static_cast<float>(rank + k));
      ASSERT_EQ(enqueueAllReduce(comm, &queued[k], &done[k]), zcollSuccess)
          << zcollGetLastError(comm);
      if (rank == k % 3) std::this_thread::sleep_for(milliseconds(20));
      std::vector<float> blocking(50 + k, static_cast<float>(10 * rank + k));
      ZCOLL_EXPECT_OK(comm, zcollAllReduce(blocking.data(), blocking.data(), blocking.size(),
                                           zcollFloat32, zcollSum, comm, nullptr));
      for (float v : blocking) ASSERT_EQ(v, 30.0f + 3 * k) << "blocking round " << k;
    }
    for (int k = 0; k < kRounds; ++k) {
      EXPECT_EQ(done[k].get_future().get(), zcollSuccess) << "queued round " << k;
      for (float v : queued[k]) ASSERT_EQ(v, 3.0f + 3 * k) << "queued round " << k;
    }
  });
}

TEST(Engine, AbortFailsTheRunningAndEveryQueuedOperationPromptly) {
  // Rank 1 never joins: rank 0's first queued all-reduce waits for it, three more wait behind.
  test::runOwningRanks(2, [](int) { return 60; }, [](int rank, zcollComm_t comm) {
    if (rank == 1) {
      std::this_thread::sleep_for(milliseconds(1500));
      EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess) << zcollGetLastError(nullptr);
      return;
    }
    constexpr int kQueued = 4;
    std::vector<std::vector<float>> bufs(kQueued, std::vector<float>(1000, 1.0f));
    std::vector<std::promise<Result>> done(kQueued);
    for (int k = 0; k < kQueued; ++k)
      ASSERT_EQ(enqueueAllReduce(comm, &bufs[k], &done[k]), zcollSuccess);
    std::this_thread::sleep_for(milliseconds(200));  // the first one is waiting for rank 1
    const auto start = Clock::now();
    EXPECT_EQ(zcollCommAbort(comm), zcollSuccess) << zcollGetLastError(nullptr);
    for (int k = 0; k < kQueued; ++k) {
      auto f = done[k].get_future();
      ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready) << k;
      EXPECT_EQ(f.get(), zcollRemoteError) << "queued operation " << k << " after the abort";
    }
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  });
}

TEST(Engine, ABrokenCommFailsEveryQueuedOperationWithTheErrorThatBrokeIt) {
  // Rank 0 (1 s timeout) times out in its first queued all-reduce: rank 1 is late. The two
  // queued behind it fail with zcollTimeout without communicating.
  test::runOwningRanks(2, [](int r) { return r == 0 ? 1 : 60; }, [](int rank, zcollComm_t comm) {
    if (rank == 1) {
      std::this_thread::sleep_for(milliseconds(2500));
      EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess) << zcollGetLastError(nullptr);
      return;
    }
    std::vector<std::vector<float>> bufs(3, std::vector<float>(1000, 1.0f));
    std::vector<std::promise<Result>> done(3);
    for (int k = 0; k < 3; ++k) ASSERT_EQ(enqueueAllReduce(comm, &bufs[k], &done[k]), zcollSuccess);
    for (int k = 0; k < 3; ++k)
      EXPECT_EQ(done[k].get_future().get(), zcollTimeout) << "queued operation " << k;
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess) << zcollGetLastError(nullptr);
  });
}

TEST(Engine, AbortAtAnyPointCompletesEveryQueuedOperationExactlyOnce) {
  // Both ranks queue all-reduces and make blocking ones in a loop; rank 0's comm is aborted from
  // another thread at a different moment each round (before, between and during operations).
  // Every operation that was queued must report exactly once, nothing may hang or crash, and
  // rank 1 learns of the abort and destroys.
  for (int round = 0; round < 8; ++round) {
    test::runOwningRanks(2, [](int) { return 60; }, [round](int rank, zcollComm_t comm) {
      std::atomic<int> reported{0};
      int queued = 0;
      std::vector<std::vector<float>> bufs(40, std::vector<float>(256, 1.0f));
      std::vector<std::promise<Result>> done(bufs.size());
      std::thread aborter;
      if (rank == 0) {
        aborter = std::thread([comm, round] {
          std::this_thread::sleep_for(std::chrono::microseconds(round * 1500));
          EXPECT_EQ(zcollCommAbort(comm), zcollSuccess) << zcollGetLastError(nullptr);
        });
      }
      for (size_t k = 0; k < bufs.size(); ++k) {
        Result r = commEnqueue(
            comm, "test.abortRace",
            [comm, x = &bufs[k]]() -> Result {
              CollArgs a{x->data(), x->data(), x->size(), zcollFloat32, zcollSum, -1};
              return runAlgorithm(comm, CollKind::kAllReduce, a, x->size() * sizeof(float));
            },
            [&reported, d = &done[k]](Result res) {
              ++reported;
              d->set_value(res);
            });
        if (r != zcollSuccess) break;  // aborted (rank 0) or broken by the abort (rank 1)
        ++queued;
        std::vector<float> y(64, 1.0f);
        if (zcollAllReduce(y.data(), y.data(), y.size(), zcollFloat32, zcollSum, comm, nullptr) !=
            zcollSuccess)
          break;
      }
      if (rank == 0) {
        aborter.join();  // the comm is gone: everything queued has reported
      } else {
        EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess) << zcollGetLastError(nullptr);
      }
      EXPECT_EQ(reported.load(), queued) << "rank " << rank << " round " << round;
      for (int k = 0; k < queued; ++k) {
        auto f = done[k].get_future();
        EXPECT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::ready) << k;
      }
    });
  }
}

TEST(Engine, DestroyRunsWhatIsQueuedFirst) {
  test::runOwningRanks(2, [](int) { return 60; }, [](int rank, zcollComm_t comm) {
    std::vector<float> x(500, static_cast<float>(rank + 1));
    std::promise<Result> done;
    ASSERT_EQ(enqueueAllReduce(comm, &x, &done), zcollSuccess);
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess) << zcollGetLastError(nullptr);
    EXPECT_EQ(done.get_future().get(), zcollSuccess);
    for (float v : x) ASSERT_EQ(v, 3.0f);
  });
}

}  // namespace
}  // namespace zcoll
