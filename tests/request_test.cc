// Non-blocking calls on host buffers (zcoll.h: zcollGroupEndNonBlocking and requests): queued in
// the communicator's order, run by its progress thread or by the waiter when next, exact
// results, the order against blocking calls, errors for misuse, abort of a pending request.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "support/ranks.h"

using namespace zcoll::test;

namespace {

// x[i] = rank + i everywhere; the sum over w ranks is w*i + w(w-1)/2.
std::vector<float> input(int rank, size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = float(rank) + float(i % 1000);
  return x;
}

float summed(int w, size_t i) { return float(w) * float(i % 1000) + float(w * (w - 1) / 2); }

zcollResult_t allReduceRequest(std::vector<float>* x, zcollComm_t comm, zcollRequest_t* req) {
  zcollResult_t r = zcollGroupStart();
  if (r != zcollSuccess) return r;
  r = zcollAllReduce(x->data(), x->data(), x->size(), zcollFloat32, zcollSum, comm, nullptr);
  if (r != zcollSuccess) {
    zcollGroupEnd();
    return r;
  }
  return zcollGroupEndNonBlocking(req);
}

TEST(Requests, QueuedCollectivesGiveExactResultsInAnyWaitOrder) {
  RankSetup s;
  s.nranks = 3;
  runRanks(s, [&](int rank, zcollComm_t comm) {
    constexpr int kCalls = 5;
    std::vector<std::vector<float>> xs;
    for (int k = 0; k < kCalls; ++k) xs.push_back(input(rank, 4096 + 1000 * k));
    std::vector<zcollRequest_t> reqs(kCalls, nullptr);
    for (int k = 0; k < kCalls; ++k) ZCOLL_EXPECT_OK(comm, allReduceRequest(&xs[k], comm, &reqs[k]));
    for (int k = kCalls - 1; k >= 0; --k) {  // the last first: the earlier ones run before it
      ZCOLL_EXPECT_OK(comm, zcollRequestWait(reqs[k]));
      int done = 0;
      ZCOLL_EXPECT_OK(comm, zcollRequestTest(reqs[k], &done));
      EXPECT_EQ(done, 1);
    }
    for (int k = 0; k < kCalls; ++k) {
      for (size_t i = 0; i < xs[k].size(); ++i)
        ASSERT_EQ(xs[k][i], summed(s.nranks, i)) << "call " << k << " element " << i;
      ZCOLL_EXPECT_OK(comm, zcollRequestFree(reqs[k]));
    }
  });
}

TEST(Requests, ABlockingCallAfterARequestRunsAfterIt) {
  RankSetup s;
  s.nranks = 4;
  s.nodes = 2;
  runRanks(s, [&](int rank, zcollComm_t comm) {
    std::vector<float> x = input(rank, 100000);
    zcollRequest_t req = nullptr;
    ZCOLL_EXPECT_OK(comm, allReduceRequest(&x, comm, &req));
    // Gathers the first element of every rank's x: the all-reduce must have run before.
    std::vector<float> firsts(s.nranks, -1.0f);
    int done = -1;
    ZCOLL_EXPECT_OK(comm, zcollRequestTest(req, &done));  // either state
    EXPECT_TRUE(done == 0 || done == 1);
    ZCOLL_EXPECT_OK(comm, zcollRequestWait(req));
    float mine = x[7];
    ZCOLL_EXPECT_OK(comm, zcollAllGather(&mine, firsts.data(), 1, zcollFloat32, comm, nullptr));
    for (int r = 0; r < s.nranks; ++r) EXPECT_EQ(firsts[r], summed(s.nranks, 7)) << r;
    ZCOLL_EXPECT_OK(comm, zcollRequestFree(req));

    // Without a wait in between: the blocking all-reduce takes its turn after the request's.
    std::vector<float> y = input(rank, 5000), z = input(rank, 3000);
    ZCOLL_EXPECT_OK(comm, allReduceRequest(&y, comm, &req));
    ZCOLL_EXPECT_OK(comm, zcollAllReduce(z.data(), z.data(), z.size(), zcollFloat32, zcollSum,
                                         comm, nullptr));
    done = 0;
    ZCOLL_EXPECT_OK(comm, zcollRequestTest(req, &done));
    EXPECT_EQ(done, 1) << "the blocking call ran before the request it was queued behind";
    for (size_t i = 0; i < z.size(); ++i) ASSERT_EQ(z[i], summed(s.nranks, i)) << i;
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], summed(s.nranks, i)) << i;
    ZCOLL_EXPECT_OK(comm, zcollRequestFree(req));
  });
}

TEST(Requests, PointToPointAndCollectivesInOneRequest) {
  RankSetup s;
  s.nranks = 3;
  runRanks(s, [&](int rank, zcollComm_t comm) {
    const int w = s.nranks, right = (rank + 1) % w, left = (rank + w - 1) % w;
    std::vector<double> out(70000, rank), in(70000, -1);
    std::vector<float> x = input(rank, 2048);
    zcollRequest_t req = nullptr;
    ASSERT_EQ(zcollGroupStart(), zcollSuccess);
    ZCOLL_EXPECT_OK(comm, zcollSend(out.data(), out.size(), zcollFloat64, right, comm, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollRecv(in.data(), in.size(), zcollFloat64, left, comm, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollAllReduce(x.data(), x.data(), x.size(), zcollFloat32, zcollSum,
                                         comm, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollGroupEndNonBlocking(&req));
    ASSERT_NE(req, nullptr);
    ZCOLL_EXPECT_OK(comm, zcollRequestFree(req));  // waits for it
    EXPECT_EQ(in.front(), double(left));
    EXPECT_EQ(in.back(), double(left));
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], summed(w, i)) << i;
  });
}

TEST(Requests, WaitedFromAnotherThread) {
  RankSetup s;
  s.nranks = 2;
  runRanks(s, [&](int rank, zcollComm_t comm) {
    std::vector<float> x = input(rank, 300000);
    zcollRequest_t req = nullptr;
    ZCOLL_EXPECT_OK(comm, allReduceRequest(&x, comm, &req));
    zcollResult_t waited = zcollInternalError;
    std::thread waiter([&] { waited = zcollRequestWait(req); });
    waiter.join();
    EXPECT_EQ(waited, zcollSuccess);
    EXPECT_EQ(x.back(), summed(s.nranks, x.size() - 1));
    ZCOLL_EXPECT_OK(comm, zcollRequestFree(req));
  });
}

struct Seen {
  std::atomic<int> calls{0};
  std::atomic<int> result{-1};
};

void record(zcollRequest_t request, zcollResult_t result, void* arg) {
  auto* seen = static_cast<Seen*>(arg);
  int done = 0;
  EXPECT_EQ(zcollRequestTest(request, &done), result);  // complete when called
  EXPECT_EQ(done, 1);
  seen->result = result;
  seen->calls++;
}

// A callback that takes a while, and then waits on its own request (allowed; done is enough).
void slowRecord(zcollRequest_t req, zcollResult_t result, void* arg) {
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(zcollRequestWait(req), result);
  record(req, result, arg);
}

TEST(Requests, WaitReturnsAfterTheCallbackHasReturned) {
  RankSetup s;
  s.nranks = 2;
  runRanks(s, [&](int rank, zcollComm_t comm) {
    for (int round = 0; round < 3; ++round) {
      std::vector<float> x = input(rank, 100000);
      zcollRequest_t req = nullptr;
      Seen seen;
      ZCOLL_EXPECT_OK(comm, allReduceRequest(&x, comm, &req));
      ZCOLL_EXPECT_OK(comm, zcollRequestOnComplete(req, slowRecord, &seen));
      zcollResult_t waited = zcollInternalError;
      std::thread waiter([&] { waited = zcollRequestWait(req); });  // may run it, or not
      waiter.join();
      EXPECT_EQ(waited, zcollSuccess);
      EXPECT_EQ(seen.calls.load(), 1) << "zcollRequestWait returned before the callback did";
      ZCOLL_EXPECT_OK(comm, zcollRequestFree(req));
    }
  });
}

TEST(Requests, OnCompleteIsCalledOnceWithTheResult) {
  RankSetup s;
  s.nranks = 2;
  runRanks(s, [&](int rank, zcollComm_t comm) {
    std::vector<float> x = input(rank, 200000);
    zcollRequest_t req = nullptr;
    Seen seen;
    ZCOLL_EXPECT_OK(comm, allReduceRequest(&x, comm, &req));
    ZCOLL_EXPECT_OK(comm, zcollRequestOnComplete(req, record, &seen));
    EXPECT_FAILS_WITH(nullptr, zcollInvalidUsage, "has a callback already",
                      zcollRequestOnComplete(req, record, &seen));
    ZCOLL_EXPECT_OK(comm, zcollRequestFree(req));  // waits for the callback too
    EXPECT_EQ(seen.calls.load(), 1);
    EXPECT_EQ(seen.result.load(), zcollSuccess);
    EXPECT_EQ(x[5], summed(s.nranks, 5));

    // Set on a complete request: called at once, here.
    Seen late;
    ZCOLL_EXPECT_OK(comm, allReduceRequest(&x, comm, &req));
    ZCOLL_EXPECT_OK(comm, zcollRequestWait(req));
    ZCOLL_EXPECT_OK(comm, zcollRequestOnComplete(req, record, &late));
    EXPECT_EQ(late.calls.load(), 1);
    // Once called (here, or by the thread that completed it), a second one is still refused.
    EXPECT_FAILS_WITH(nullptr, zcollInvalidUsage, "has a callback already",
                      zcollRequestOnComplete(req, record, &late));
    EXPECT_EQ(late.calls.load(), 1);
    EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "fn is NULL",
                      zcollRequestOnComplete(req, nullptr, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollRequestFree(req));
  });
}

TEST(Requests, MisuseIsRefusedWithAMessage) {
  RankSetup s;
  s.nranks = 2;
  runRanks(s, [&](int rank, zcollComm_t comm) {
    zcollRequest_t req = reinterpret_cast<zcollRequest_t>(0x1);
    EXPECT_FAILS_WITH(nullptr, zcollInvalidUsage, "without a matching zcollGroupStart",
                      zcollGroupEndNonBlocking(&req));
    EXPECT_EQ(req, nullptr);
    EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "request is NULL",
                      zcollGroupEndNonBlocking(nullptr));
    EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "request is NULL", zcollRequestWait(nullptr));
    int done = 0;
    EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "request is NULL",
                      zcollRequestTest(nullptr, &done));
    EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "request is NULL", zcollRequestFree(nullptr));

    // Nested: only the outermost group ends non-blocking.
    ASSERT_EQ(zcollGroupStart(), zcollSuccess);
    ASSERT_EQ(zcollGroupStart(), zcollSuccess);
    EXPECT_FAILS_WITH(nullptr, zcollInvalidUsage, "outermost", zcollGroupEndNonBlocking(&req));
    ASSERT_EQ(zcollGroupEnd(), zcollSuccess);
    // An empty group: a request that is complete at once.
    ZCOLL_EXPECT_OK(nullptr, zcollGroupEndNonBlocking(&req));
    ZCOLL_EXPECT_OK(nullptr, zcollRequestTest(req, &done));
    EXPECT_EQ(done, 1);
    ZCOLL_EXPECT_OK(nullptr, zcollRequestFree(req));
    EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "not a live request", zcollRequestFree(req));
    EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "not a live request", zcollRequestWait(req));

    // A group over two communicators cannot be one request; nothing of it runs.
    zcollComm_t half = nullptr;
    ZCOLL_EXPECT_OK(comm, zcollCommSplit(comm, 0, rank, &half, nullptr));
    float a = 1, b = 2;
    ASSERT_EQ(zcollGroupStart(), zcollSuccess);
    ZCOLL_EXPECT_OK(comm, zcollAllReduce(&a, &a, 1, zcollFloat32, zcollSum, comm, nullptr));
    ZCOLL_EXPECT_OK(half, zcollAllReduce(&b, &b, 1, zcollFloat32, zcollSum, half, nullptr));
    EXPECT_FAILS_WITH(nullptr, zcollInvalidUsage, "several communicators",
                      zcollGroupEndNonBlocking(&req));
    EXPECT_EQ(req, nullptr);
    EXPECT_EQ(a, 1.0f);
    // Both comms still work.
    ZCOLL_EXPECT_OK(comm, zcollAllReduce(&a, &a, 1, zcollFloat32, zcollSum, comm, nullptr));
    ZCOLL_EXPECT_OK(half, zcollAllReduce(&b, &b, 1, zcollFloat32, zcollSum, half, nullptr));
    EXPECT_EQ(a, 2.0f);
    EXPECT_EQ(b, 4.0f);
    ZCOLL_EXPECT_OK(half, zcollCommDestroy(half));
  });
}

// A request whose peer never comes: an abort makes it, and the one queued behind it, complete
// with zcollRemoteError; the second never ran.
TEST(Requests, AbortCompletesPendingRequestsWithRemoteError) {
  runOwningRanks(2, [](int) { return 60; }, [](int rank, zcollComm_t comm) {
    if (rank == 1) {  // never calls the all-reduce; leaves once rank 0 is done with it
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      EXPECT_EQ(zcollCommAbort(comm), zcollSuccess);
      return;
    }
    std::vector<float> x(1000, 1.0f), y(1000, 1.0f);
    zcollRequest_t first = nullptr, second = nullptr;
    ZCOLL_EXPECT_OK(comm, allReduceRequest(&x, comm, &first));
    ZCOLL_EXPECT_OK(comm, allReduceRequest(&y, comm, &second));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    int done = 1;
    ZCOLL_EXPECT_OK(comm, zcollRequestTest(second, &done));
    EXPECT_EQ(done, 0);
    // Keeps the handles: the abort frees the comm, never the requests.
    std::thread aborter([comm] { EXPECT_EQ(zcollCommAbort(comm), zcollSuccess); });
    zcollResult_t r1 = zcollRequestWait(first);
    zcollResult_t r2 = zcollRequestWait(second);
    aborter.join();
    EXPECT_NE(r1, zcollSuccess);
    EXPECT_EQ(r2, zcollRemoteError) << zcollGetLastError(nullptr);
    EXPECT_EQ(y[0], 1.0f) << "the request queued behind the aborted one ran";
    EXPECT_EQ(zcollRequestFree(first), zcollSuccess);
    EXPECT_EQ(zcollRequestFree(second), zcollSuccess);
  });
}

}  // namespace
