// zcollCommGetUniqueId and zcollCommGrow (core/grow.h), ranks as threads: a grow after a shrink
// brings a 2-node job back to its size and even layout (hpZ runs again, collectives exact), a
// healthy grow onto a new node, nothing left open or mapped after a death, a shrink, a grow and
// the destroys, bad arguments on members and new ranks, members that disagree,
// a new rank that never comes (a timeout, no hang), a member that dies during the grow (the
// others and the new rank fail at once), and a revoked comm (refused, the new rank turned away). A return after kHangGuard means the news did not
// travel (a hang guard, not a performance assertion).
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/leaks.h"
#include "support/ranks.h"

namespace zcoll::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kHangGuard = std::chrono::seconds(10);

// The id the coordinator hands the new ranks (out of band: here, across threads).
class IdHandoff {
 public:
  void give(const zcollUniqueId& id) {
    std::lock_guard<std::mutex> lock(mu_);
    id_ = id;
    given_ = true;
    cv_.notify_all();
  }
  // A zeroed id (refused by zcollCommGrow) if none came within the hang guard.
  zcollUniqueId take() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, 3 * kHangGuard, [&] { return given_; });
    return id_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  zcollUniqueId id_{};
  bool given_ = false;
};

// A new rank on emulated node `node` joining as `rank` of `nRanks`.
zcollResult_t join(IdHandoff& handoff, int nRanks, int rank, int node, zcollComm_t* grown,
                   int timeoutSec = 60) {
  const zcollUniqueId id = handoff.take();
  const std::string host = emulatedHost(node);
  zcollConfig_t config = ZCOLL_CONFIG_INITIALIZER;
  config.hostId = host.c_str();
  config.timeoutSec = timeoutSec;
  return zcollCommGrow(nullptr, nRanks, &id, rank, grown, &config);
}


// An exact all-reduce of rank-dependent values.
void expectExactAllReduce(zcollComm_t comm) {
  const int rank = rankOf(comm), n = countOf(comm);
  std::vector<int32_t> x(3000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int32_t>(i * 3 + rank * 1000);
  ZCOLL_EXPECT_OK(comm, zcollAllReduce(x.data(), x.data(), x.size(), zcollInt32, zcollSum, comm,
                                       nullptr));
  for (size_t i : {size_t(0), size_t(777), x.size() - 1})
    EXPECT_EQ(x[i], static_cast<int32_t>(n * i * 3 + 1000 * n * (n - 1) / 2)) << "element " << i;
}

// Every rank's checks on a grown comm: an exact all-reduce, and hpZ (exact, so it needs an even
// layout) giving every rank's shard in rank order.
void expectExactCollectives(zcollComm_t comm) {
  expectExactAllReduce(comm);
  const int rank = rankOf(comm), n = countOf(comm);
  constexpr size_t kShard = 1000;
  std::vector<float> shard(kShard), all(kShard * n, -1.0f);
  for (size_t i = 0; i < kShard; ++i) shard[i] = static_cast<float>(rank * 10000 + i);
  size_t secondaryCount = 0;
  ASSERT_EQ(zcollSecondaryShardCount(comm, kShard, &secondaryCount), zcollSuccess);
  std::vector<float> secondary(secondaryCount);
  ZCOLL_EXPECT_OK(comm, zcollAllGatherHier(shard.data(), all.data(), secondary.data(), kShard,
                                           zcollFloat32, nullptr, comm, nullptr));
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(all[r * kShard + 7], static_cast<float>(r * 10000 + 7)) << "shard of rank " << r;
}

// 4 ranks on 2 nodes ({0,1}, {2,3}); rank 1 dies; the 3 others shrink (node 0 keeps one rank:
// uneven, hpZ refuses) and a new rank on node 0 joins: 4 ranks, 2 nodes of 2 again; then every
// comm is destroyed.
void dieShrinkGrowBack() {
  RankSetup s{4, 2, Placement::kContiguous, 60};
  IdHandoff handoff;
  zcollComm_t joined = nullptr;
  zcollResult_t joinResult = zcollInternalError;
  std::thread newRank([&] {
    joinResult = join(handoff, 4, 3, 0, &joined);
    if (joinResult != zcollSuccess) return;
    EXPECT_EQ(rankOf(joined), 3);
    expectExactCollectives(joined);
    EXPECT_EQ(zcollCommDestroy(joined), zcollSuccess);
  });
  runOwningRanks(s, [&](int rank, zcollComm_t comm) {
    if (rank == 1) {
      EXPECT_EQ(zcollCommAbort(comm), zcollSuccess);
      return;
    }
    const int dead[] = {1};
    zcollComm_t shrunk = nullptr;
    ZCOLL_EXPECT_OK(comm, zcollCommShrink(comm, dead, 1, &shrunk, nullptr, ZCOLL_SHRINK_ABORT));
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
    ASSERT_NE(shrunk, nullptr);
    std::vector<float> one(10), three(30), sec(20);
    EXPECT_FAILS_WITH(shrunk, zcollInvalidUsage, "same number of ranks on every node",
                      zcollAllGatherHier(one.data(), three.data(), sec.data(), 10, zcollFloat32,
                                         nullptr, shrunk, nullptr));
    const int newRank = rankOf(shrunk);
    zcollUniqueId id;
    if (newRank == 0) {
      ZCOLL_EXPECT_OK(shrunk, zcollCommGetUniqueId(shrunk, &id));
      handoff.give(id);
    }
    zcollComm_t grown = nullptr;
    const auto start = Clock::now();
    ZCOLL_EXPECT_OK(shrunk, zcollCommGrow(shrunk, 4, newRank == 0 ? &id : nullptr, -1, &grown,
                                          nullptr));
    EXPECT_LT(Clock::now() - start, kHangGuard);
    ASSERT_NE(grown, nullptr);
    EXPECT_EQ(rankOf(grown), newRank);  // members keep their ranks
    EXPECT_EQ(countOf(grown), 4);
    int nodes = 0, localSize = 0;
    EXPECT_EQ(zcollCommNodeCount(grown, &nodes), zcollSuccess);
    EXPECT_EQ(zcollCommLocalSize(grown, &localSize), zcollSuccess);
    EXPECT_EQ(nodes, 2);
    EXPECT_EQ(localSize, 2);
    expectExactCollectives(grown);
    expectExactAllReduce(shrunk);  // the parent stays healthy
    EXPECT_EQ(zcollCommDestroy(grown), zcollSuccess);
    EXPECT_EQ(zcollCommDestroy(shrunk), zcollSuccess);
  });
  newRank.join();
  EXPECT_EQ(joinResult, zcollSuccess) << zcollGetLastError(nullptr);
}

TEST(Grow, AfterAShrinkANewRankBringsTheJobBackToItsSizeAndLayout) { dieShrinkGrowBack(); }

TEST(Grow, NothingIsLeftOpenOrMappedAfterADeathAShrinkAGrowAndTheDestroys) {
  dieShrinkGrowBack();  // first: what the libraries keep for the process (UCX's context) is made
  const int fds = openDescriptors(), maps = memfdMappings();
  dieShrinkGrowBack();
  dieShrinkGrowBack();
  EXPECT_EQ(openDescriptors(), fds) << "descriptors left open";
  EXPECT_EQ(memfdMappings(), maps) << "shared memory left mapped";
}

TEST(Grow, TwoNewRanksOnANewNodeTakeTheRanksAfterTheMembers) {
  RankSetup s{2, 1, Placement::kContiguous, 60};
  IdHandoff handoff;
  std::vector<std::thread> newRanks;
  std::vector<zcollResult_t> results(2, zcollInternalError);
  for (int k = 0; k < 2; ++k)
    newRanks.emplace_back([&, k] {
      zcollComm_t c = nullptr;
      results[k] = join(handoff, 4, 2 + k, 1, &c);
      if (results[k] != zcollSuccess) return;
      EXPECT_EQ(rankOf(c), 2 + k);
      int node = -1;
      EXPECT_EQ(zcollCommNodeRank(c, &node), zcollSuccess);
      EXPECT_EQ(node, 1);
      expectExactCollectives(c);
      EXPECT_EQ(zcollCommDestroy(c), zcollSuccess);
    });
  runOwningRanks(s, [&](int rank, zcollComm_t comm) {
    zcollUniqueId id;
    if (rank == 1) {  // any member may coordinate
      ZCOLL_EXPECT_OK(comm, zcollCommGetUniqueId(comm, &id));
      handoff.give(id);
    }
    zcollComm_t grown = nullptr;
    ZCOLL_EXPECT_OK(comm, zcollCommGrow(comm, 4, rank == 1 ? &id : nullptr, -1, &grown, nullptr));
    ASSERT_NE(grown, nullptr);
    EXPECT_EQ(rankOf(grown), rank);
    expectExactCollectives(grown);
    EXPECT_EQ(zcollCommDestroy(grown), zcollSuccess);
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
  });
  for (auto& t : newRanks) t.join();
  for (zcollResult_t r : results) EXPECT_EQ(r, zcollSuccess);
}

TEST(Grow, BadArgumentsFailBeforeAnyExchange) {
  runOwningRanks(2, [](int) { return 60; }, [](int rank, zcollComm_t comm) {
    zcollComm_t grown = reinterpret_cast<zcollComm_t>(&rank);  // must be set to NULL
    zcollUniqueId plain;
    ASSERT_EQ(zcollGetUniqueId(&plain), zcollSuccess);
    EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "newcomm pointer is NULL",
                      zcollCommGrow(comm, 3, nullptr, -1, nullptr, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "pass -1",
                      zcollCommGrow(comm, 3, nullptr, rank, &grown, nullptr));
    EXPECT_EQ(grown, nullptr);
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "must be more than the 2 ranks",
                      zcollCommGrow(comm, 2, nullptr, -1, &grown, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "not the id",
                      zcollCommGrow(comm, 3, &plain, -1, &grown, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "uniqueId is NULL",
                      zcollCommGetUniqueId(comm, nullptr));
    zcollUniqueId id;
    ZCOLL_EXPECT_OK(comm, zcollCommGetUniqueId(comm, &id));
    zcollUniqueId again;
    EXPECT_FAILS_WITH(comm, zcollInvalidUsage, "not been used",
                      zcollCommGetUniqueId(comm, &again));
    ASSERT_EQ(zcollGroupStart(), zcollSuccess);
    EXPECT_FAILS_WITH(comm, zcollInvalidUsage, "between zcollGroupStart and zcollGroupEnd",
                      zcollCommGrow(comm, 3, &id, -1, &grown, nullptr));
    ASSERT_EQ(zcollGroupEnd(), zcollSuccess);
    zcollConfig_t bad = ZCOLL_CONFIG_INITIALIZER;
    bad.timeoutSec = -5;
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "timeoutSec",
                      zcollCommGrow(comm, 3, &id, -1, &grown, &bad));
    // A new rank's arguments (comm NULL).
    EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "needs the uniqueId",
                      zcollCommGrow(nullptr, 3, nullptr, 2, &grown, nullptr));
    EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "not a grow id",
                      zcollCommGrow(nullptr, 3, &plain, 2, &grown, nullptr));
    EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "must be in [2, 3)",
                      zcollCommGrow(nullptr, 3, &id, 1, &grown, nullptr));
    EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "must be in [2, 3)",
                      zcollCommGrow(nullptr, 3, &id, 3, &grown, nullptr));
    EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "must be more than the 2 ranks",
                      zcollCommGrow(nullptr, 2, &id, 2, &grown, nullptr));
    EXPECT_EQ(grown, nullptr);
    zcollResult_t state = zcollInternalError;
    EXPECT_EQ(zcollCommGetAsyncError(comm, &state), zcollSuccess);
    EXPECT_EQ(state, zcollSuccess);  // argument errors leave the comm as it was
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
  });
}

TEST(Grow, ANewRankThatNeverComesTimesOutOnEveryMemberNamingIt) {
  runOwningRanks(2, [](int) { return 3; }, [](int rank, zcollComm_t comm) {
    zcollUniqueId id;
    if (rank == 0) ZCOLL_EXPECT_OK(comm, zcollCommGetUniqueId(comm, &id));
    zcollComm_t grown = nullptr;
    const auto start = Clock::now();
    EXPECT_FAILS_WITH(comm, zcollTimeout, "new rank 2 never did",
                      zcollCommGrow(comm, 3, rank == 0 ? &id : nullptr, -1, &grown, nullptr));
    EXPECT_LT(Clock::now() - start, kHangGuard);
    EXPECT_EQ(grown, nullptr);
    zcollResult_t state = zcollInternalError;
    EXPECT_EQ(zcollCommGetAsyncError(comm, &state), zcollSuccess);
    EXPECT_EQ(state, zcollSuccess);  // the comm is as it was
    if (rank == 0) {  // the id was used: a new one can be made at once
      ZCOLL_EXPECT_OK(comm, zcollCommGetUniqueId(comm, &id));
    }
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
  });
}

TEST(Grow, AMemberThatDiesDuringTheGrowFailsItOnEveryRankAtOnce) {
  IdHandoff handoff;
  zcollResult_t joinResult = zcollInternalError;
  std::string joinMessage;
  Clock::duration joinTook{};
  std::thread newRank([&] {
    zcollComm_t c = nullptr;
    const auto start = Clock::now();
    joinResult = join(handoff, 4, 3, 0, &c);
    joinTook = Clock::now() - start;
    joinMessage = zcollGetLastError(nullptr);
    EXPECT_EQ(c, nullptr);
  });
  runOwningRanks(3, [](int) { return 60; }, [&](int rank, zcollComm_t comm) {
    if (rank == 2) {  // dies instead of growing
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      EXPECT_EQ(zcollCommAbort(comm), zcollSuccess);
      return;
    }
    zcollUniqueId id;
    if (rank == 0) {
      ZCOLL_EXPECT_OK(comm, zcollCommGetUniqueId(comm, &id));
      handoff.give(id);
    }
    zcollComm_t grown = nullptr;
    const auto start = Clock::now();
    EXPECT_FAILS_WITH(comm, zcollRemoteError, "rank 2",
                      zcollCommGrow(comm, 4, rank == 0 ? &id : nullptr, -1, &grown, nullptr));
    EXPECT_LT(Clock::now() - start, kHangGuard);
    EXPECT_EQ(grown, nullptr);
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
  });
  newRank.join();
  EXPECT_EQ(joinResult, zcollRemoteError);
  EXPECT_NE(joinMessage.find("called it off"), std::string::npos) << joinMessage;
  EXPECT_LT(joinTook, kHangGuard);
}

// Two members grow towards a third rank that waits for the id; `growFails(rank, comm, id)` makes
// each member's zcollCommGrow fail (rank 0 passes `id`, the one it handed out) and checks how.
// The new rank must be turned away (zcollRemoteError), and every member destroys its comm.
void expectGrowFailsAndTheNewRankIsTurnedAway(
    const std::function<void(int, zcollComm_t, zcollUniqueId*)>& growFails) {
  IdHandoff handoff;
  zcollResult_t joinResult = zcollInternalError;
  std::thread newRank([&] {
    zcollComm_t c = nullptr;
    joinResult = join(handoff, 3, 2, 0, &c);
  });
  runOwningRanks(2, [](int) { return 60; }, [&](int rank, zcollComm_t comm) {
    zcollUniqueId id;
    if (rank == 0) {
      ZCOLL_EXPECT_OK(comm, zcollCommGetUniqueId(comm, &id));
      handoff.give(id);
    }
    growFails(rank, comm, rank == 0 ? &id : nullptr);
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
  });
  newRank.join();
  EXPECT_EQ(joinResult, zcollRemoteError);
}

TEST(Grow, MembersThatAskForDifferentSizesAllFailAndTheNewRankIsTurnedAway) {
  expectGrowFailsAndTheNewRankIsTurnedAway([](int rank, zcollComm_t comm, zcollUniqueId* id) {
    zcollComm_t grown = nullptr;
    EXPECT_FAILS_WITH(comm, zcollInvalidUsage, "every rank must pass the same nRanks",
                      zcollCommGrow(comm, rank == 0 ? 3 : 4, id, -1, &grown, nullptr));
    EXPECT_EQ(grown, nullptr);
  });
}

TEST(Grow, ARevokedCommIsRefusedAndTheNewRankIsTurnedAway) {
  expectGrowFailsAndTheNewRankIsTurnedAway([](int, zcollComm_t comm, zcollUniqueId* id) {
    EXPECT_EQ(zcollCommRevoke(comm), zcollSuccess);
    zcollComm_t grown = nullptr;
    EXPECT_FAILS_WITH(comm, zcollInvalidUsage, "shrink it first",
                      zcollCommGrow(comm, 3, id, -1, &grown, nullptr));
    EXPECT_EQ(grown, nullptr);
  });
}

TEST(Grow, NoMemberOrTwoMembersWithTheIdFailEveryMember) {
  runOwningRanks(2, [](int) { return 60; }, [](int, zcollComm_t comm) {
    zcollComm_t grown = nullptr;
    EXPECT_FAILS_WITH(comm, zcollInvalidUsage, "no member passed the uniqueId",
                      zcollCommGrow(comm, 3, nullptr, -1, &grown, nullptr));
    zcollUniqueId id;
    ZCOLL_EXPECT_OK(comm, zcollCommGetUniqueId(comm, &id));  // each its own: two coordinators
    EXPECT_FAILS_WITH(comm, zcollInvalidUsage, "both passed a uniqueId",
                      zcollCommGrow(comm, 3, &id, -1, &grown, nullptr));
    EXPECT_EQ(grown, nullptr);
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
  });
}

}  // namespace
}  // namespace zcoll::test
