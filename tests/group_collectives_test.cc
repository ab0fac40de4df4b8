// Collectives between zcollGroupStart and zcollGroupEnd (issue 34, item 9): kept, as NCCL
// aggregates them, and run at the outermost zcollGroupEnd in call order (several comms'
// concurrently), before the group's point-to-point operations.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
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

// One thread drives both ranks of a communicator in a group (NCCL's several GPUs per thread):
// zcollGroupEnd runs each comm's collectives on a thread of its own, so they meet. The comms are
// made by two threads (zcollCommInitRank blocks until both ranks joined), then used by one.
TEST(GroupCollectives, OneThreadDrivesSeveralRanksInAGroup) {
  zcollUniqueId id;
  ASSERT_EQ(zcollGetUniqueId(&id), zcollSuccess);
  zcollComm_t comms[2] = {nullptr, nullptr};
  zcollResult_t inits[2] = {zcollInternalError, zcollInternalError};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] { inits[r] = zcollCommInitRank(&comms[r], 2, id, r); });
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(inits[0], zcollSuccess) << zcollGetLastError(nullptr);
  ASSERT_EQ(inits[1], zcollSuccess);
  std::vector<float> x[2] = {std::vector<float>(500, 1.5f), std::vector<float>(500, 2.0f)};
  std::vector<float> g[2] = {std::vector<float>(1000, -1), std::vector<float>(1000, -1)};
  ASSERT_EQ(zcollGroupStart(), zcollSuccess);
  for (int r = 0; r < 2; ++r) {
    ZCOLL_EXPECT_OK(comms[r], zcollAllGather(x[r].data(), g[r].data(), 500, zcollFloat32,
                                             comms[r], nullptr));
    ZCOLL_EXPECT_OK(comms[r], zcollAllReduce(x[r].data(), x[r].data(), 500, zcollFloat32,
                                             zcollSum, comms[r], nullptr));
  }
  ASSERT_EQ(zcollGroupEnd(), zcollSuccess) << zcollGetLastError(nullptr);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(x[r][499], 3.5f) << r;
    EXPECT_EQ(g[r][0], 1.5f) << r;
    EXPECT_EQ(g[r][999], 2.0f) << r;
  }
  EXPECT_EQ(zcollCommDestroy(comms[0]), zcollSuccess);
  EXPECT_EQ(zcollCommDestroy(comms[1]), zcollSuccess);
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
