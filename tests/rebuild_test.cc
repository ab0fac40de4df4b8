// Keep training after a shrink (coll/shard_rebuild.h), ranks as threads on emulated nodes:
// zcollRebuildFromSecondary rebuilds a dead rank's shard from hpZ's secondaries and
// re-partitions the vector over the survivors bit-identical to what the last forward gather
// gathered (exact and INT8, with and without the survivors' primaries); zcollBuddyCopy /
// zcollRebuildFromBuddy do the same for optimizer state, on even and uneven layouts and across
// two deaths; a shard nobody holds any more fails every rank naming it; bad arguments and
// ranks that disagree.
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "support/ranks.h"

namespace zcoll::test {
namespace {

constexpr size_t kCount = 1000;                 // elements per old rank
constexpr size_t kTotal = 4 * kCount - 123;     // the parameters; the rest is padding
constexpr size_t kNewCount = (kTotal + 2) / 3;  // per rank of 3


// V's element p (inexact bits: a rebuild must copy, not recompute).
float weight(size_t p) { return static_cast<float>(p) * 0.37f + 1.0f / (1.0f + p % 7); }

// This rank's primary shard of V on a comm of this rank's `rank`.
std::vector<float> primaryShard(int rank) {
  std::vector<float> s(kCount);
  for (size_t i = 0; i < kCount; ++i) s[i] = weight(rank * kCount + i);
  return s;
}

// Every rank has finished the calls before (a barrier), then this one dies: its abort cannot
// cut a call that the others are still finishing.
void dieAfterTheOthersAreDone(zcollComm_t comm) {
  ASSERT_EQ(zcollBarrier(comm, nullptr), zcollSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(zcollCommAbort(comm), zcollSuccess);
}

// The survivors' side of a death: a call that fails once the rank is gone, as in training.
void seeItFail(zcollComm_t comm) {
  ASSERT_EQ(zcollBarrier(comm, nullptr), zcollSuccess);
  std::vector<float> x(100, 1.0f);
  EXPECT_EQ(zcollAllReduce(x.data(), x.data(), x.size(), zcollFloat32, zcollSum, comm, nullptr),
            zcollRemoteError);
}

// Shrinks `comm` without `dead` (this rank not among them) and returns the new comm.
zcollComm_t shrinkWithout(zcollComm_t comm, const std::vector<int>& dead,
                          int flags = ZCOLL_SHRINK_ABORT) {
  zcollComm_t shrunk = nullptr;
  EXPECT_EQ(zcollCommShrink(comm, dead.data(), static_cast<int>(dead.size()), &shrunk, nullptr,
                            flags),
            zcollSuccess)
      << zcollGetLastError(comm);
  return shrunk;
}

// Every rank's new shard gathered, compared with `expected` (V as gathered before the death)
// bit for bit over the first kTotal elements; the padding after it is zero.
void expectRebuilt(zcollComm_t comm, const std::vector<float>& mine, size_t newCount,
                   const std::vector<float>& expected) {
  const int n = countOf(comm);
  std::vector<float> all(newCount * n, -1.0f);
  ASSERT_EQ(zcollAllGather(mine.data(), all.data(), newCount, zcollFloat32, comm, nullptr),
            zcollSuccess);
  EXPECT_EQ(std::memcmp(all.data(), expected.data(), kTotal * sizeof(float)), 0)
      << "rank " << rankOf(comm) << ": the rebuilt vector differs";
  for (size_t p = kTotal; p < all.size(); ++p) ASSERT_EQ(all[p], 0.0f) << "padding " << p;
}

struct SecondaryCase {
  bool quantized;       // the forward gather was INT8 (qwZ on the rail)
  bool withPrimaries;   // survivors pass their primaries
  bool parentGone;      // the old comm is destroyed first: oldComm NULL
};

class RebuildFromSecondary : public testing::TestWithParam<SecondaryCase> {};

// 4 ranks on 2 nodes ({0,1}, {2,3}); a forward hpZ gather fills every secondary; rank 1 dies;
// the 3 others shrink and rebuild V over 3 ranks: exactly the forward call's result.
TEST_P(RebuildFromSecondary, ADeadRanksShardComesBackBitIdenticalOverTheNewWorld) {
  const SecondaryCase c = GetParam();
  runOwningRanks(RankSetup{4, 2, Placement::kContiguous, 60}, [&](int rank, zcollComm_t comm) {
    const std::vector<float> primary = primaryShard(rank);
    std::vector<float> gathered(4 * kCount), secondary(2 * kCount);
    zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
    ASSERT_EQ(zcollAllGatherHier(primary.data(), gathered.data(), secondary.data(), kCount,
                                 zcollFloat32, c.quantized ? &q : nullptr, comm, nullptr),
              zcollSuccess);
    if (rank == 1) return dieAfterTheOthersAreDone(comm);
    seeItFail(comm);
    zcollComm_t shrunk = shrinkWithout(comm, {1});
    ASSERT_NE(shrunk, nullptr);
    std::vector<float> mine(kNewCount, -1.0f);
    // Quantized, a survivor's own primary is exact where the secondary is not: pass none.
    const bool primaries = c.withPrimaries && !c.quantized;
    if (c.parentGone) {
      EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
    }
    ZCOLL_EXPECT_OK(shrunk, zcollRebuildFromSecondary(
                                primaries ? primary.data() : nullptr, secondary.data(), kCount,
                                mine.data(), kNewCount, kTotal, zcollFloat32,
                                c.parentGone ? nullptr : comm, shrunk, nullptr));
    expectRebuilt(shrunk, mine, kNewCount, gathered);
    EXPECT_EQ(zcollCommDestroy(shrunk), zcollSuccess);
    if (!c.parentGone) {
      EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Forward, RebuildFromSecondary,
                         testing::Values(SecondaryCase{false, false, false},
                                         SecondaryCase{false, true, false},
                                         SecondaryCase{true, false, false},
                                         SecondaryCase{false, false, true}),
                         [](const testing::TestParamInfo<SecondaryCase>& i) {
                           return std::string(i.param.quantized ? "int8" : "exact") +
                                  (i.param.withPrimaries ? "_primaries" : "_secondaries_only") +
                                  (i.param.parentGone ? "_parent_destroyed" : "");
                         });

TEST(RebuildFromSecondaryFails, WhenARanksWholeRailIsGoneNamingIt) {
  runOwningRanks(RankSetup{4, 2, Placement::kContiguous, 60}, [](int rank, zcollComm_t comm) {
    const std::vector<float> primary = primaryShard(rank);
    std::vector<float> gathered(4 * kCount), secondary(2 * kCount);
    ASSERT_EQ(zcollAllGatherHier(primary.data(), gathered.data(), secondary.data(), kCount,
                                 zcollFloat32, nullptr, comm, nullptr),
              zcollSuccess);
    if (rank == 1 || rank == 3) return dieAfterTheOthersAreDone(comm);  // rank 1's rail
    seeItFail(comm);
    zcollComm_t shrunk = shrinkWithout(comm, {1, 3});
    ASSERT_NE(shrunk, nullptr);
    std::vector<float> mine(2 * kCount);
    EXPECT_FAILS_WITH(shrunk, zcollInvalidUsage, "holds a copy of old rank 1's shard",
                      zcollRebuildFromSecondary(nullptr, secondary.data(), kCount, mine.data(),
                                                2 * kCount, kTotal, zcollFloat32, comm, shrunk,
                                                nullptr));
    expectRebuilt(shrunk, std::vector<float>(2 * kCount, 0.0f), 2 * kCount,
                  std::vector<float>(4 * kCount, 0.0f));  // the new comm still works
    EXPECT_EQ(zcollCommDestroy(shrunk), zcollSuccess);
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
  });
}

// Optimizer state: each rank's own, buddy-copied, then two deaths one after the other: rank 2
// of 4 (even layout), then on the uneven 3-rank comm its rank 0 (whose buddy copy holds two
// wards' state there). After each, the survivors rebuild the state bit-identical.
TEST(RebuildFromBuddy, StateSurvivesTwoDeathsOnEvenAndUnevenLayouts) {
  runOwningRanks(RankSetup{4, 2, Placement::kContiguous, 60}, [](int rank, zcollComm_t comm) {
    const std::vector<float> state = primaryShard(rank);  // V as the optimizer state
    std::vector<float> everything(4 * kCount);
    for (size_t p = 0; p < everything.size(); ++p) everything[p] = weight(p);
    size_t copyCount = 0;
    ASSERT_EQ(zcollBuddyCopyCount(comm, kCount, &copyCount), zcollSuccess);
    EXPECT_EQ(copyCount, kCount);  // even: one ward each
    std::vector<float> copy(copyCount);
    ZCOLL_EXPECT_OK(comm, zcollBuddyCopy(state.data(), copy.data(), kCount, zcollFloat32, comm,
                                         nullptr));
    EXPECT_EQ(copy[5], weight(((rank + 2) % 4) * kCount + 5));  // its ward: the next node's
    if (rank == 2) return dieAfterTheOthersAreDone(comm);
    seeItFail(comm);
    zcollComm_t three = shrinkWithout(comm, {2});
    ASSERT_NE(three, nullptr);
    std::vector<float> mine(kNewCount);
    ZCOLL_EXPECT_OK(three, zcollRebuildFromBuddy(state.data(), copy.data(), kCount, mine.data(),
                                                 kNewCount, kTotal, zcollFloat32, comm, three,
                                                 nullptr));
    expectRebuilt(three, mine, kNewCount, everything);
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
    // Uneven now (node 0: new ranks 0, 1; node 1: new rank 2): buddies 0->2, 1->2, 2->0.
    const int r3 = rankOf(three);
    size_t copy3Count = 0;
    ASSERT_EQ(zcollBuddyCopyCount(three, kNewCount, &copy3Count), zcollSuccess);
    EXPECT_EQ(copy3Count, (r3 == 2 ? 2 : r3 == 0 ? 1 : 0) * kNewCount);
    std::vector<float> copy3(copy3Count);
    ZCOLL_EXPECT_OK(three, zcollBuddyCopy(mine.data(), copy3.data(), kNewCount, zcollFloat32,
                                          three, nullptr));
    if (r3 == 0) return dieAfterTheOthersAreDone(three);
    seeItFail(three);
    zcollComm_t two = shrinkWithout(three, {0});
    ASSERT_NE(two, nullptr);
    const size_t count2 = (kTotal + 1) / 2;
    std::vector<float> mine2(count2);
    ZCOLL_EXPECT_OK(two, zcollRebuildFromBuddy(mine.data(), copy3.data(), kNewCount, mine2.data(),
                                               count2, kTotal, zcollFloat32, three, two,
                                               nullptr));
    expectRebuilt(two, mine2, count2, everything);
    EXPECT_EQ(zcollCommDestroy(two), zcollSuccess);
    EXPECT_EQ(zcollCommDestroy(three), zcollSuccess);
  });
}

TEST(RebuildFromBuddyFails, WhenARankAndItsBuddyAreBothGone) {
  runOwningRanks(RankSetup{4, 2, Placement::kContiguous, 60}, [](int rank, zcollComm_t comm) {
    const std::vector<float> state = primaryShard(rank);
    std::vector<float> copy(kCount);
    ASSERT_EQ(zcollBuddyCopy(state.data(), copy.data(), kCount, zcollFloat32, comm, nullptr),
              zcollSuccess);
    if (rank == 0 || rank == 2) return dieAfterTheOthersAreDone(comm);  // 0 and its buddy
    seeItFail(comm);
    zcollComm_t shrunk = shrinkWithout(comm, {0, 2});
    ASSERT_NE(shrunk, nullptr);
    std::vector<float> mine(2 * kCount);
    EXPECT_FAILS_WITH(shrunk, zcollInvalidUsage, "old rank 0's buddy copy was on old rank 2",
                      zcollRebuildFromBuddy(state.data(), copy.data(), kCount, mine.data(),
                                            2 * kCount, kTotal, zcollFloat32, comm, shrunk,
                                            nullptr));
    EXPECT_EQ(zcollCommDestroy(shrunk), zcollSuccess);
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
  });
}

TEST(Rebuild, BadArgumentsFailBeforeAnyExchange) {
  runOwningRanks(RankSetup{2, 2, Placement::kContiguous, 60}, [](int rank, zcollComm_t comm) {
    // A healthy "shrink" of nobody: a new comm, and `comm` stays usable.
    zcollComm_t same = shrinkWithout(comm, {}, ZCOLL_SHRINK_DEFAULT);
    ASSERT_NE(same, nullptr);
    std::vector<float> p = primaryShard(rank), sec(2 * kCount), out(kCount);
    const size_t total = 2 * kCount;
    auto rebuild = [&](const void* sec_, void* out_, size_t newCount, size_t tot,
                       zcollComm_t old, zcollComm_t now) {
      return zcollRebuildFromSecondary(nullptr, sec_, kCount, out_, newCount, tot, zcollFloat32,
                                       old, now, nullptr);
    };
    EXPECT_FAILS_WITH(same, zcollInvalidArgument, "secondary is NULL",
                      rebuild(nullptr, out.data(), kCount, total, comm, same));
    EXPECT_FAILS_WITH(same, zcollInvalidArgument, "newPrimary is NULL",
                      rebuild(sec.data(), nullptr, kCount, total, comm, same));
    EXPECT_FAILS_WITH(same, zcollInvalidArgument, "is more than oldComm's 2 ranks hold",
                      rebuild(sec.data(), out.data(), kCount, total + 1, comm, same));
    EXPECT_FAILS_WITH(same, zcollInvalidArgument, "cannot hold totalCount",
                      rebuild(sec.data(), out.data(), kCount - 1, total, comm, same));
    EXPECT_FAILS_WITH(same, zcollInvalidArgument, "the same communicator",
                      rebuild(sec.data(), out.data(), kCount, total, same, same));
    EXPECT_FAILS_WITH(same, zcollInvalidArgument, "must not overlap",
                      rebuild(sec.data(), sec.data() + 10, kCount, total, comm, same));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "was not made by zcollCommShrink",
                      rebuild(sec.data(), out.data(), kCount, total, nullptr, comm));
    EXPECT_FAILS_WITH(same, zcollInvalidArgument, "primary is NULL",
                      zcollRebuildFromBuddy(nullptr, sec.data(), kCount, out.data(), kCount,
                                            total, zcollFloat32, comm, same, nullptr));
    EXPECT_FAILS_WITH(same, zcollInvalidArgument, "datatype",
                      zcollRebuildFromSecondary(nullptr, sec.data(), kCount, out.data(), kCount,
                                                total, static_cast<zcollDataType_t>(99), comm,
                                                same, nullptr));
    ASSERT_EQ(zcollGroupStart(), zcollSuccess);
    EXPECT_FAILS_WITH(same, zcollInvalidUsage, "between zcollGroupStart and zcollGroupEnd",
                      rebuild(sec.data(), out.data(), kCount, total, comm, same));
    EXPECT_FAILS_WITH(same, zcollInvalidUsage, "between zcollGroupStart and zcollGroupEnd",
                      zcollBuddyCopy(p.data(), sec.data(), kCount, zcollFloat32, same, nullptr));
    ASSERT_EQ(zcollGroupEnd(), zcollSuccess);
    size_t n = 0;
    EXPECT_FAILS_WITH(same, zcollInvalidArgument, "copyCount is NULL",
                      zcollBuddyCopyCount(same, kCount, nullptr));
    EXPECT_FAILS_WITH(same, zcollInvalidArgument, "buddyCopy is NULL",
                      zcollBuddyCopy(p.data(), nullptr, kCount, zcollFloat32, same, nullptr));
    EXPECT_FAILS_WITH(same, zcollInvalidArgument, "must not overlap",
                      zcollBuddyCopy(p.data(), p.data() + 1, 10, zcollFloat32, same, nullptr));
    // Ranks that disagree fail alike, naming the other rank; the comm stays usable.
    EXPECT_FAILS_WITH(same, zcollInvalidUsage, "another totalCount",
                      rebuild(sec.data(), out.data(), kCount, rank == 0 ? total : total - 1,
                              comm, same));
    EXPECT_EQ(zcollBuddyCopyCount(same, kCount, &n), zcollSuccess);
    EXPECT_EQ(n, kCount);
    EXPECT_EQ(zcollCommDestroy(same), zcollSuccess);
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
  });
}

TEST(Rebuild, ACommNotMadeFromOldCommIsRefusedAndOneNodeHasNoBuddies) {
  zcollUniqueId otherId;
  ASSERT_EQ(zcollGetUniqueId(&otherId), zcollSuccess);
  runOwningRanks(RankSetup{2, 1, Placement::kContiguous, 60}, [&](int rank, zcollComm_t comm) {
    std::vector<float> p = primaryShard(rank), copy(kCount), out(kCount);
    EXPECT_FAILS_WITH(comm, zcollInvalidUsage, "another node",
                      zcollBuddyCopy(p.data(), copy.data(), kCount, zcollFloat32, comm, nullptr));
    size_t n = 0;
    EXPECT_FAILS_WITH(comm, zcollInvalidUsage, "another node",
                      zcollBuddyCopyCount(comm, kCount, &n));
    zcollComm_t other = nullptr;  // the same threads, a communicator of its own
    zcollConfig_t config = ZCOLL_CONFIG_INITIALIZER;
    ASSERT_EQ(zcollCommInitRankConfig(&other, 2, otherId, rank, &config), zcollSuccess);
    std::vector<float> sec(p);  // one node: the secondary is the rank's own shard
    EXPECT_FAILS_WITH(other, zcollInvalidUsage, "is not a rank of oldComm",
                      zcollRebuildFromSecondary(nullptr, sec.data(), kCount, out.data(), kCount,
                                                2 * kCount, zcollFloat32, comm, other, nullptr));
    EXPECT_EQ(zcollCommDestroy(other), zcollSuccess);
    zcollComm_t shrunk = shrinkWithout(comm, {});
    ASSERT_NE(shrunk, nullptr);
    ZCOLL_EXPECT_OK(shrunk, zcollRebuildFromSecondary(nullptr, sec.data(), kCount, out.data(),
                                                      kCount, 2 * kCount, zcollFloat32, comm,
                                                      shrunk, nullptr));
    EXPECT_EQ(out[3], weight(rank * kCount + 3));  // nobody died: everyone's own shard back
    EXPECT_EQ(zcollCommDestroy(shrunk), zcollSuccess);
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
  });
}

}  // namespace
}  // namespace zcoll::test
