// zcollCommRevoke and zcollCommShrink (core/shrink.h), ranks as threads: a rank that dies (its
// comm aborted) is shrunk away and the others go on with exact collectives on the new comm; a
// healthy shrink drops a rank that takes no part, and that rank stays in a second shrink of the
// same parent (its call counted as an attempt); a rank that dies during the shrink fails it on
// the others, and a second shrink without it works; mismatched sets and bad arguments fail on
// every rank without a comm; revoke interrupts a call blocked in another thread. ZCOLL_TIMEOUT
// is 60 s (20 s where said), so a return after kHangGuard means the news did not travel (a hang guard, not a
// performance assertion).
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "support/leaks.h"
#include "support/ranks.h"

namespace zcoll::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kHangGuard = std::chrono::seconds(10);

int sixtySeconds(int) { return 60; }

// An all-reduce on `comm` (n ranks, this one `rank`) of rank-dependent values, checked exactly.
void expectExactAllReduce(zcollComm_t comm) {
  int rank = -1, n = 0;
  ASSERT_EQ(zcollCommUserRank(comm, &rank), zcollSuccess);
  ASSERT_EQ(zcollCommCount(comm, &n), zcollSuccess);
  std::vector<int32_t> x(5000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int32_t>(i * 7 + rank * 1000);
  ZCOLL_EXPECT_OK(comm, zcollAllReduce(x.data(), x.data(), x.size(), zcollInt32, zcollSum, comm,
                                       nullptr));
  for (size_t i : {size_t(0), size_t(1234), x.size() - 1})
    EXPECT_EQ(x[i], static_cast<int32_t>(n * i * 7 + 1000 * n * (n - 1) / 2)) << "element " << i;
}

// The all-reduce a dead peer fails (zcollRemoteError, promptly).
void expectRemoteErrorSoon(zcollComm_t comm) {
  std::vector<float> x(1000, 1.0f);
  const auto start = Clock::now();
  EXPECT_EQ(zcollAllReduce(x.data(), x.data(), x.size(), zcollFloat32, zcollSum, comm, nullptr),
            zcollRemoteError) << zcollGetLastError(comm);
  EXPECT_LT(Clock::now() - start, kHangGuard);
}

TEST(Shrink, AfterAPeerDiesTheOthersGoOnWithExactCollectives) {
  runOwningRanks(4, sixtySeconds, [](int rank, zcollComm_t comm) {
    if (rank == 2) {  // dies
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      EXPECT_EQ(zcollCommAbort(comm), zcollSuccess);
      return;
    }
    expectRemoteErrorSoon(comm);
    const int dead[] = {2};
    zcollComm_t shrunk = nullptr;
    const auto start = Clock::now();
    ZCOLL_EXPECT_OK(comm, zcollCommShrink(comm, dead, 1, &shrunk, nullptr, ZCOLL_SHRINK_ABORT));
    EXPECT_LT(Clock::now() - start, kHangGuard);
    ASSERT_NE(shrunk, nullptr);
    int newRank = -1, n = 0;
    ASSERT_EQ(zcollCommUserRank(shrunk, &newRank), zcollSuccess);
    ASSERT_EQ(zcollCommCount(shrunk, &n), zcollSuccess);
    EXPECT_EQ(n, 3);
    EXPECT_EQ(newRank, rank < 2 ? rank : rank - 1);  // renumbered in the parent's order
    expectExactAllReduce(shrunk);
    std::vector<int32_t> mine(100, newRank), all(300, -1);
    ZCOLL_EXPECT_OK(shrunk, zcollAllGather(mine.data(), all.data(), 100, zcollInt32, shrunk,
                                           nullptr));
    for (int r = 0; r < 3; ++r) EXPECT_EQ(all[r * 100 + 99], r);
    EXPECT_EQ(zcollCommDestroy(shrunk), zcollSuccess);
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
  });
}

// A peer dies, the others shrink and go on, everything is destroyed.
void dieShrinkDestroy() {
  runOwningRanks(4, sixtySeconds, [](int rank, zcollComm_t comm) {
    if (rank == 2) {
      EXPECT_EQ(zcollCommAbort(comm), zcollSuccess);
      return;
    }
    const int dead[] = {2};
    zcollComm_t shrunk = nullptr;
    ZCOLL_EXPECT_OK(comm, zcollCommShrink(comm, dead, 1, &shrunk, nullptr, ZCOLL_SHRINK_ABORT));
    if (shrunk != nullptr) expectExactAllReduce(shrunk);
    EXPECT_EQ(zcollCommDestroy(shrunk), zcollSuccess);
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
  });
}

TEST(Shrink, NothingIsLeftOpenOrMappedAfterAShrinkAndTheDestroys) {
  dieShrinkDestroy();  // first: what the libraries keep for the process (UCX's context) is made
  const int fds = openDescriptors(), maps = memfdMappings();
  dieShrinkDestroy();
  dieShrinkDestroy();
  EXPECT_EQ(openDescriptors(), fds) << "descriptors left open";
  EXPECT_EQ(memfdMappings(), maps) << "shared memory left mapped";
}

TEST(Shrink, AHealthyShrinkDropsARankThatTakesNoPart) {
  runOwningRanks(4, sixtySeconds, [](int rank, zcollComm_t comm) {
    const int dropped[] = {1};
    zcollComm_t shrunk = reinterpret_cast<zcollComm_t>(&rank);  // must be set to NULL
    ZCOLL_EXPECT_OK(comm, zcollCommShrink(comm, dropped, 1, &shrunk, nullptr,
                                          ZCOLL_SHRINK_DEFAULT));
    if (rank == 1) {
      EXPECT_EQ(shrunk, nullptr);
    } else {
      ASSERT_NE(shrunk, nullptr);
      expectExactAllReduce(shrunk);
      EXPECT_EQ(zcollCommDestroy(shrunk), zcollSuccess);
    }
    zcollResult_t state = zcollInternalError;
    EXPECT_EQ(zcollCommGetAsyncError(comm, &state), zcollSuccess);
    EXPECT_EQ(state, zcollSuccess);  // a default shrink leaves the parent healthy
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
  });
}

// Two healthy shrinks of one parent, every rank calling both: first[] then second[]. A rank
// that takes no part in the first (it excluded itself) still counts the call, so it meets the
// others on the second's tags (issue 42: it was one attempt behind, and both shrinks' stayers
// waited on each other until ZCOLL_TIMEOUT). The timeout is 20 s, the hang guard 10 s.
void shrinkTwice(const RankSetup& setup, int first, int second) {
  runOwningRanks(setup, [&](int rank, zcollComm_t comm) {
    const int out1[] = {first};
    const int out2[] = {second};
    for (const int* out : {out1, out2}) {
      zcollComm_t shrunk = reinterpret_cast<zcollComm_t>(&rank);  // must be set
      const auto start = Clock::now();
      ZCOLL_EXPECT_OK(comm, zcollCommShrink(comm, out, 1, &shrunk, nullptr,
                                            ZCOLL_SHRINK_DEFAULT));
      EXPECT_LT(Clock::now() - start, kHangGuard) << "rank " << rank << " excluding " << *out;
      if (rank == *out) {
        EXPECT_EQ(shrunk, nullptr) << "rank " << rank;
        continue;
      }
      ASSERT_NE(shrunk, nullptr) << "rank " << rank << " excluding " << *out;
      EXPECT_EQ(countOf(shrunk), setup.nranks - 1);
      EXPECT_EQ(rankOf(shrunk), rank < *out ? rank : rank - 1);
      expectExactAllReduce(shrunk);
      EXPECT_EQ(zcollCommDestroy(shrunk), zcollSuccess);
    }
    zcollResult_t state = zcollInternalError;
    EXPECT_EQ(zcollCommGetAsyncError(comm, &state), zcollSuccess);
    EXPECT_EQ(state, zcollSuccess);
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
  });
}

TEST(Shrink, ARankThatTookNoPartStaysInTheNextShrinkOnOneNode) {
  RankSetup s;
  s.nranks = 3;
  s.timeoutSec = 20;
  shrinkTwice(s, 0, 2);  // rank 0 out of the first, in the second with rank 1
}

TEST(Shrink, ARankThatTookNoPartStaysInTheNextShrinkOnTwoNodes) {
  RankSetup s;
  s.nranks = 4;
  s.nodes = 2;
  s.timeoutSec = 20;
  shrinkTwice(s, 2, 1);  // 2x2: rank 2 out of the first, in the second with ranks 0 and 3
}

TEST(Shrink, ARankThatDiesDuringTheShrinkFailsItAndASecondShrinkWithoutItWorks) {
  runOwningRanks(4, sixtySeconds, [](int rank, zcollComm_t comm) {
    if (rank == 3) {  // dead from the start
      EXPECT_EQ(zcollCommAbort(comm), zcollSuccess);
      return;
    }
    if (rank == 2) {  // dies while the others shrink
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      EXPECT_EQ(zcollCommAbort(comm), zcollSuccess);
      return;
    }
    const int first[] = {3};
    zcollComm_t shrunk = nullptr;
    auto start = Clock::now();
    EXPECT_FAILS_WITH(comm, zcollRemoteError, "rank 2",
                      zcollCommShrink(comm, first, 1, &shrunk, nullptr, ZCOLL_SHRINK_ABORT));
    EXPECT_LT(Clock::now() - start, kHangGuard);
    EXPECT_EQ(shrunk, nullptr);
    const int both[] = {3, 2};  // any order
    start = Clock::now();
    ZCOLL_EXPECT_OK(comm, zcollCommShrink(comm, both, 2, &shrunk, nullptr, ZCOLL_SHRINK_ABORT));
    EXPECT_LT(Clock::now() - start, kHangGuard);
    ASSERT_NE(shrunk, nullptr);
    expectExactAllReduce(shrunk);
    EXPECT_EQ(zcollCommDestroy(shrunk), zcollSuccess);
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
  });
}

TEST(Shrink, RanksThatExcludeDifferentRanksAllFailWithoutAComm) {
  // Ranks 0 and 1 exclude {3}; rank 2 excludes {1, 3}, so it never hears from rank 1: rank 0
  // and 2 see the mismatch at once, and rank 1 learns when rank 2 destroys its comm.
  runOwningRanks(4, sixtySeconds, [](int rank, zcollComm_t comm) {
    if (rank == 3) {
      EXPECT_EQ(zcollCommAbort(comm), zcollSuccess);
      return;
    }
    const std::vector<int> excluded = rank == 2 ? std::vector<int>{1, 3} : std::vector<int>{3};
    zcollComm_t shrunk = nullptr;
    const auto start = Clock::now();
    zcollResult_t r = zcollCommShrink(comm, excluded.data(), static_cast<int>(excluded.size()),
                                      &shrunk, nullptr, ZCOLL_SHRINK_ABORT);
    const std::string msg = zcollGetLastError(comm);
    EXPECT_LT(Clock::now() - start, kHangGuard) << "rank " << rank;
    EXPECT_EQ(shrunk, nullptr);
    if (rank == 1) {
      EXPECT_EQ(r, zcollRemoteError) << msg;
      EXPECT_NE(msg.find("rank 2"), std::string::npos) << msg;
    } else {
      EXPECT_EQ(r, zcollInvalidUsage) << msg;
      EXPECT_NE(msg.find("excluded other ranks"), std::string::npos) << msg;
    }
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
  });
}

TEST(Shrink, ALoneRankShrinksToACommOfItself) {
  runOwningRanks(1, sixtySeconds, [](int, zcollComm_t comm) {
    zcollComm_t shrunk = nullptr;
    ZCOLL_EXPECT_OK(comm, zcollCommShrink(comm, nullptr, 0, &shrunk, nullptr,
                                          ZCOLL_SHRINK_DEFAULT));
    ASSERT_NE(shrunk, nullptr);
    expectExactAllReduce(shrunk);
    EXPECT_EQ(zcollCommDestroy(shrunk), zcollSuccess);
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
  });
}

TEST(Shrink, BadArgumentsFailBeforeAnyExchange) {
  runOwningRanks(2, sixtySeconds, [](int rank, zcollComm_t comm) {
    zcollComm_t shrunk = nullptr;
    const int one[] = {1 - rank};
    const int twice[] = {1, 1};
    const int all[] = {0, 1};
    const int outside[] = {2};
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "newcomm pointer is NULL",
                      zcollCommShrink(comm, one, 1, nullptr, nullptr, ZCOLL_SHRINK_DEFAULT));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "shrinkFlags 7",
                      zcollCommShrink(comm, one, 1, &shrunk, nullptr, 7));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "excludeCount -1",
                      zcollCommShrink(comm, one, -1, &shrunk, nullptr, ZCOLL_SHRINK_DEFAULT));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "excludeRanks NULL",
                      zcollCommShrink(comm, nullptr, 1, &shrunk, nullptr, ZCOLL_SHRINK_DEFAULT));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "excluded twice",
                      zcollCommShrink(comm, twice, 2, &shrunk, nullptr, ZCOLL_SHRINK_DEFAULT));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "all 2 ranks are excluded",
                      zcollCommShrink(comm, all, 2, &shrunk, nullptr, ZCOLL_SHRINK_DEFAULT));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "excludeCount 1000000 is more than the 2",
                      zcollCommShrink(comm, one, 1000000, &shrunk, nullptr, ZCOLL_SHRINK_DEFAULT));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "not in [0, 2)",
                      zcollCommShrink(comm, outside, 1, &shrunk, nullptr, ZCOLL_SHRINK_DEFAULT));
    ASSERT_EQ(zcollGroupStart(), zcollSuccess);
    EXPECT_FAILS_WITH(comm, zcollInvalidUsage, "between zcollGroupStart and zcollGroupEnd",
                      zcollCommShrink(comm, one, 1, &shrunk, nullptr, ZCOLL_SHRINK_DEFAULT));
    ASSERT_EQ(zcollGroupEnd(), zcollSuccess);
    zcollConfig_t bad = ZCOLL_CONFIG_INITIALIZER;
    bad.timeoutSec = -5;
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "timeoutSec",
                      zcollCommShrink(comm, one, 1, &shrunk, &bad, ZCOLL_SHRINK_DEFAULT));
    EXPECT_EQ(shrunk, nullptr);
    zcollResult_t state = zcollInternalError;
    EXPECT_EQ(zcollCommGetAsyncError(comm, &state), zcollSuccess);
    EXPECT_EQ(state, zcollSuccess);  // argument errors leave the parent as it was
    EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "zcollCommRevoke",
                      zcollCommRevoke(nullptr));
    EXPECT_EQ(zcollCommRevoke(comm), zcollSuccess);
    EXPECT_EQ(zcollCommRevoke(comm), zcollSuccess);  // again: nothing more
    EXPECT_FAILS_WITH(comm, zcollInvalidUsage, "shrink it with ZCOLL_SHRINK_ABORT",
                      zcollCommShrink(comm, nullptr, 0, &shrunk, nullptr, ZCOLL_SHRINK_DEFAULT));
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
  });
}

TEST(Shrink, RevokeInterruptsACallBlockedInAnotherThreadAndTheRanksRebuild) {
  runOwningRanks(2, sixtySeconds, [](int rank, zcollComm_t comm) {
    if (rank == 0) {
      std::atomic<bool> returned{false};
      std::thread revoker([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        EXPECT_EQ(zcollCommRevoke(comm), zcollSuccess) << zcollGetLastError(nullptr);
      });
      std::vector<float> x(1000, 1.0f);  // rank 1 never joins this all-reduce
      const auto start = Clock::now();
      EXPECT_FAILS_WITH(comm, zcollRemoteError, "revoked",
                        zcollAllReduce(x.data(), x.data(), x.size(), zcollFloat32, zcollSum,
                                       comm, nullptr));
      EXPECT_LT(Clock::now() - start, kHangGuard);
      returned = true;
      revoker.join();
      EXPECT_FAILS_WITH(comm, zcollRemoteError, "was revoked",
                        zcollAllReduce(x.data(), x.data(), x.size(), zcollFloat32, zcollSum,
                                       comm, nullptr));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(600));  // after the revoke
    }
    zcollComm_t rebuilt = nullptr;  // nothing excluded: the same ranks, a fresh comm
    ZCOLL_EXPECT_OK(comm, zcollCommShrink(comm, nullptr, 0, &rebuilt, nullptr,
                                          ZCOLL_SHRINK_ABORT));
    ASSERT_NE(rebuilt, nullptr);
    expectExactAllReduce(rebuilt);
    EXPECT_EQ(zcollCommDestroy(rebuilt), zcollSuccess);
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
  });
}

}  // namespace
}  // namespace zcoll::test
