// zcollCommSplit with unusual colors and with an argument error on one rank (issue 34, item 12):
// every negative color takes no part, and a rank whose arguments are bad still takes part in the
// split's exchange, so every rank fails at once (that rank with zcollInvalidArgument, the others
// with zcollInvalidUsage naming it), nothing is created, and the parent stays usable.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/ranks.h"

using namespace zcoll::test;

namespace {

// The parent still works on every rank: an all-reduce of the ranks.
void expectParentUsable(int rank, int nranks, zcollComm_t comm) {
  int x = rank, sum = -1;
  ZCOLL_EXPECT_OK(comm, zcollAllReduce(&x, &sum, 1, zcollInt32, zcollSum, comm, nullptr));
  EXPECT_EQ(sum, nranks * (nranks - 1) / 2) << "rank " << rank;
  zcollResult_t async = zcollInternalError;
  ZCOLL_EXPECT_OK(comm, zcollCommGetAsyncError(comm, &async));
  EXPECT_EQ(async, zcollSuccess) << "rank " << rank;
}

TEST(SplitErrors, EveryNegativeColorTakesNoPart) {
  RankSetup s;
  s.nranks = 4;
  s.timeoutSec = 20;
  runRanks(s, [&](int rank, zcollComm_t comm) {
    // Ranks 0 and 2 form a comm; rank 1 passes -7, rank 3 INT_MIN: neither takes part.
    const int colors[] = {5, -7, 5, -2147483647 - 1};
    zcollComm_t sub = reinterpret_cast<zcollComm_t>(0x1);
    ZCOLL_EXPECT_OK(comm, zcollCommSplit(comm, colors[rank], rank, &sub, nullptr));
    if (colors[rank] < 0) {
      EXPECT_EQ(sub, nullptr);
    } else {
      ASSERT_NE(sub, nullptr);
      int n = 0, me = -1;
      ZCOLL_EXPECT_OK(sub, zcollCommCount(sub, &n));
      ZCOLL_EXPECT_OK(sub, zcollCommUserRank(sub, &me));
      EXPECT_EQ(n, 2);
      EXPECT_EQ(me, rank / 2);
      int x = rank, sum = -1;
      ZCOLL_EXPECT_OK(sub, zcollAllReduce(&x, &sum, 1, zcollInt32, zcollSum, sub, nullptr));
      EXPECT_EQ(sum, 2);
      EXPECT_EQ(zcollCommDestroy(sub), zcollSuccess);
    }
    expectParentUsable(rank, s.nranks, comm);
  });
}

// One rank's bad config (or NULL newcomm) must not leave the others waiting in the split until
// the timeout, nor break the parent.
void splitWithOneBadRank(bool nullNewcomm) {
  RankSetup s;
  s.nranks = 4;
  s.nodes = 2;
  s.timeoutSec = 20;  // a rank left waiting would take this long and break the parent
  runRanks(s, [&](int rank, zcollComm_t comm) {
    const int bad = 2;
    zcollConfig_t config = ZCOLL_CONFIG_INITIALIZER;
    zcollConfig_t* cfg = nullptr;
    if (rank == bad && !nullNewcomm) {
      config.timeoutSec = -3;  // invalid
      cfg = &config;
    }
    zcollComm_t sub = reinterpret_cast<zcollComm_t>(0x1);
    zcollComm_t* out = rank == bad && nullNewcomm ? nullptr : &sub;
    zcollResult_t r = zcollCommSplit(comm, rank % 2, rank, out, cfg);
    const std::string msg = zcollGetLastError(comm);
    if (rank == bad) {
      EXPECT_EQ(r, zcollInvalidArgument) << msg;
      EXPECT_NE(msg.find(nullNewcomm ? "newcomm" : "timeoutSec"), std::string::npos) << msg;
    } else {
      EXPECT_EQ(r, zcollInvalidUsage) << msg;
      EXPECT_NE(msg.find("parent rank 2"), std::string::npos) << msg;
      EXPECT_EQ(sub, nullptr);
    }
    expectParentUsable(rank, s.nranks, comm);
    // And a correct split afterwards works on every rank.
    zcollComm_t again = nullptr;
    ZCOLL_EXPECT_OK(comm, zcollCommSplit(comm, 0, -rank, &again, nullptr));
    ASSERT_NE(again, nullptr);
    int me = -1;
    ZCOLL_EXPECT_OK(again, zcollCommUserRank(again, &me));
    EXPECT_EQ(me, s.nranks - 1 - rank);
    EXPECT_EQ(zcollCommDestroy(again), zcollSuccess);
  });
}

TEST(SplitErrors, BadConfigOnOneRankFailsEveryRankAtOnceAndKeepsTheParent) {
  splitWithOneBadRank(false);
}

TEST(SplitErrors, NullNewcommOnOneRankFailsEveryRankAtOnceAndKeepsTheParent) {
  splitWithOneBadRank(true);
}

}  // namespace
