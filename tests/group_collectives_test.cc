// Collectives between zcollGroupStart and zcollGroupEnd (issue 34, item 9): kept, as NCCL
// aggregates them, and run at the outermost zcollGroupEnd in call order, before the group's
// point-to-point operations.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "support/ranks.h"

using namespace zcoll::test;

namespace {

TEST(GroupCollectives, RunAtGroupEndInCallOrderWithPointToPoint) {
  RankSetup s;
  s.nranks = 4;
  s.nodes = 2;
  runRanks(s, [&](int rank, zcollComm_t comm) {
    const int w = s.nranks, right = (rank + 1) % w, left = (rank + w - 1) % w;
    // x = rank + 1 in place: Sum then Prod gives (sum)^w; the other order would give w * prod.
    int x = rank + 1;
    std::vector<float> shard(1000, float(rank)), full(1000 * w, -1.0f);
    std::vector<double> out(64, rank), in(64, -1);
    ASSERT_EQ(zcollGroupStart(), zcollSuccess);
    ZCOLL_EXPECT_OK(comm, zcollAllReduce(&x, &x, 1, zcollInt32, zcollSum, comm, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollSend(out.data(), out.size(), zcollFloat64, right, comm, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollAllGather(shard.data(), full.data(), shard.size(), zcollFloat32,
                                         comm, nullptr));
    ASSERT_EQ(zcollGroupStart(), zcollSuccess);  // nested: runs at the outermost end
    ZCOLL_EXPECT_OK(comm, zcollAllReduce(&x, &x, 1, zcollInt32, zcollProd, comm, nullptr));
    ASSERT_EQ(zcollGroupEnd(), zcollSuccess);
    ZCOLL_EXPECT_OK(comm, zcollRecv(in.data(), in.size(), zcollFloat64, left, comm, nullptr));
    // Kept, not run yet.
    EXPECT_EQ(x, rank + 1);
    EXPECT_EQ(full[0], -1.0f);
    EXPECT_EQ(in[0], -1.0);
    ZCOLL_EXPECT_OK(comm, zcollGroupEnd());
    EXPECT_EQ(x, 10 * 10 * 10 * 10);  // (1+2+3+4)^4
    for (int r = 0; r < w; ++r) EXPECT_EQ(full[r * 1000 + 999], float(r)) << r;
    EXPECT_EQ(in[63], double(left));
  });
}

TEST(GroupCollectives, ZeroppCollectiveInAGroupGivesTheSameBits) {
  RankSetup s;
  s.nranks = 2;
  runRanks(s, [&](int rank, zcollComm_t comm) {
    const size_t n = 512;
    std::vector<float> shard(n);
    for (size_t i = 0; i < n; ++i) shard[i] = std::sin(float(i + 7 * rank));
    std::vector<float> direct(n * 2), grouped(n * 2, 0.0f);
    ZCOLL_EXPECT_OK(comm, zcollQuantizedAllGather(shard.data(), direct.data(), n, zcollFloat32,
                                                  nullptr, comm, nullptr));
    ASSERT_EQ(zcollGroupStart(), zcollSuccess);
    ZCOLL_EXPECT_OK(comm, zcollQuantizedAllGather(shard.data(), grouped.data(), n, zcollFloat32,
                                                  nullptr, comm, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollGroupEnd());
    EXPECT_EQ(direct, grouped);
  });
}

TEST(GroupCollectives, ARejectedCollectiveFailsTheGroupAndNothingRuns) {
  RankSetup s;
  s.nranks = 2;
  runRanks(s, [&](int rank, zcollComm_t comm) {
    int x = rank + 1;
    ASSERT_EQ(zcollGroupStart(), zcollSuccess);
    ZCOLL_EXPECT_OK(comm, zcollAllReduce(&x, &x, 1, zcollInt32, zcollSum, comm, nullptr));
    EXPECT_EQ(zcollAllReduce(&x, &x, 1, static_cast<zcollDataType_t>(99), zcollSum, comm,
                             nullptr),
              zcollInvalidArgument);
    EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "rejected", zcollGroupEnd());
    EXPECT_EQ(x, rank + 1);  // the valid one was not run either
    // The comm is still usable, and the next group runs.
    ASSERT_EQ(zcollGroupStart(), zcollSuccess);
    ZCOLL_EXPECT_OK(comm, zcollAllReduce(&x, &x, 1, zcollInt32, zcollSum, comm, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollGroupEnd());
    EXPECT_EQ(x, 3);
  });
}

}  // namespace
