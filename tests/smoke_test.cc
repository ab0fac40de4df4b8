#include <gtest/gtest.h>

#include <vector>

#include "support/ranks.h"

using namespace zcoll::test;

TEST(Smoke, AllGatherFourRanksTwoNodes) {
  RankSetup s;
  s.nranks = 4;
  s.nodes = 2;
  runRanks(s, [](int rank, zcollComm_t comm) {
    std::vector<int> send(3, rank), recv(12, -1);
    ZCOLL_EXPECT_OK(comm, zcollAllGather(send.data(), recv.data(), 3, zcollInt32, comm, nullptr));
    for (int i = 0; i < 12; ++i) EXPECT_EQ(recv[i], i / 3);
    int nodes = 0;
    zcollCommNodeCount(comm, &nodes);
    EXPECT_EQ(nodes, 2);
  });
}
