// Point-to-point in groups, communicator split, and the byte counters per path.
#include <cstdlib>
#include <cstring>
#include <cstddef>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <numeric>
#include <string>
#include <vector>

#include "support/ranks.h"

using namespace zcoll::test;

namespace {

TEST(P2p, RingExchangeInAGroupAndOrderedMatching) {
  RankSetup s;
  s.nranks = 4;
  s.nodes = 2;
  runRanks(s, [&](int rank, zcollComm_t comm) {
    const int w = s.nranks, right = (rank + 1) % w, left = (rank + w - 1) % w;
    std::vector<double> a(1000, rank), b(1000, rank * 10.0), ra(1000, -1), rb(1000, -1);
    // Two messages to the same peer: matched in call order.
    ASSERT_EQ(zcollGroupStart(), zcollSuccess);
    ZCOLL_EXPECT_OK(comm, zcollSend(a.data(), a.size(), zcollFloat64, right, comm, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollSend(b.data(), b.size(), zcollFloat64, right, comm, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollRecv(ra.data(), ra.size(), zcollFloat64, left, comm, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollRecv(rb.data(), rb.size(), zcollFloat64, left, comm, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollGroupEnd());
    EXPECT_EQ(ra[999], double(left));
    EXPECT_EQ(rb[0], left * 10.0);
  });
}

TEST(P2p, SelfSendAndReceiveInAGroup) {
  RankSetup s;
  s.nranks = 2;
  runRanks(s, [&](int rank, zcollComm_t comm) {
    int out = rank + 40, in = -1;
    ASSERT_EQ(zcollGroupStart(), zcollSuccess);
    ZCOLL_EXPECT_OK(comm, zcollRecv(&in, 1, zcollInt32, rank, comm, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollSend(&out, 1, zcollInt32, rank, comm, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollGroupEnd());
    EXPECT_EQ(in, rank + 40);
  });
}

TEST(P2p, BlockingPairOutsideAGroup) {
  RankSetup s;
  s.nranks = 2;
  runRanks(s, [&](int rank, zcollComm_t comm) {
    std::vector<int> v(100000);
    if (rank == 0) {
      std::iota(v.begin(), v.end(), 7);
      ZCOLL_EXPECT_OK(comm, zcollSend(v.data(), v.size(), zcollInt32, 1, comm, nullptr));
    } else {
      ZCOLL_EXPECT_OK(comm, zcollRecv(v.data(), v.size(), zcollInt32, 0, comm, nullptr));
      EXPECT_EQ(v[99999], 99999 + 7);
    }
  });
}

TEST(Split, ColorsKeysAndNoColor) {
  RankSetup s;
  s.nranks = 6;
  s.nodes = 2;
  runRanks(s, [&](int rank, zcollComm_t comm) {
    // Rank 5 opts out; the others split by parity, ordered by descending rank.
    int color = rank == 5 ? ZCOLL_SPLIT_NOCOLOR : rank % 2;
    zcollComm_t sub = reinterpret_cast<zcollComm_t>(0x1);
    ZCOLL_EXPECT_OK(comm, zcollCommSplit(comm, color, -rank, &sub, nullptr));
    if (rank == 5) {
      EXPECT_EQ(sub, nullptr);
      return;
    }
    ASSERT_NE(sub, nullptr);
    int n = 0, me = -1;
    zcollCommCount(sub, &n);
    zcollCommUserRank(sub, &me);
    std::vector<int> members;
    for (int r = 4; r >= 0; --r)
      if (r % 2 == rank % 2) members.push_back(r);
    EXPECT_EQ(n, int(members.size()));
    EXPECT_EQ(members[me], rank);
    int x = rank, sum = 0;
    ZCOLL_EXPECT_OK(sub, zcollAllReduce(&x, &sum, 1, zcollInt32, zcollSum, sub, nullptr));
    EXPECT_EQ(sum, std::accumulate(members.begin(), members.end(), 0));
    // Node identities carry over: ranks 0..2 on one node, 3..5 on the other.
    int nodes = 0;
    zcollCommNodeCount(sub, &nodes);
    EXPECT_EQ(nodes, 2);
    EXPECT_EQ(zcollCommDestroy(sub), zcollSuccess);
  });
}

TEST(Split, ConfigFieldsLeftUnsetInheritTheParent) {
  RankSetup s;
  s.nranks = 2;
  s.timeoutSec = 1;  // the parent's; ZCOLL_TIMEOUT in tests is 60
  runRanks(s, [&](int rank, zcollComm_t comm) {
    zcollConfig_t config = ZCOLL_CONFIG_INITIALIZER;
    config.commName = "child";  // timeoutSec left unset: inherited
    zcollComm_t sub = nullptr;
    ZCOLL_EXPECT_OK(comm, zcollCommSplit(comm, 0, rank, &sub, &config));
    ASSERT_NE(sub, nullptr);
    if (rank == 0) {  // rank 1 never joins: the wait must end after the parent's 1 s
      float x = 1;
      auto start = std::chrono::steady_clock::now();
      EXPECT_EQ(zcollAllReduce(&x, &x, 1, zcollFloat32, zcollSum, sub, nullptr), zcollTimeout);
      EXPECT_NE(std::string(zcollGetLastError(sub)).find("more than 1 s"), std::string::npos)
          << zcollGetLastError(sub);
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    } else {  // alive but absent (a destroyed sub-comm would be a zcollRemoteError)
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    }
    EXPECT_EQ(zcollCommDestroy(sub), zcollSuccess);
  });
}

TEST(Stats, RingAllGatherBytesPerPathOnTwoNodes) {
  // 2x2, node-contiguous: the ring 0->1->2->3->0 crosses nodes at 1->2 and 3->0.
  RankSetup s;
  s.nranks = 4;
  s.nodes = 2;
  ScopedEnv force("ZCOLL_ALGO_ALLGATHER", "ring");
  runRanks(s, [&](int rank, zcollComm_t comm) {
    const size_t count = 1000, bytes = count * sizeof(float);
    std::vector<float> send(count, 1.f), recv(count * 4);
    ZCOLL_EXPECT_OK(comm, zcollCommResetStats(comm));
    ZCOLL_EXPECT_OK(comm, zcollAllGather(send.data(), recv.data(), count, zcollFloat32, comm, nullptr));
    zcollStats_t st{};
    st.size = sizeof(st);
    ZCOLL_EXPECT_OK(comm, zcollCommGetStats(comm, &st));
    const bool sendsAcross = rank == 1 || rank == 3;
    EXPECT_EQ(st.bytesSent[zcollPathInter], sendsAcross ? 3 * bytes : 0);
    EXPECT_EQ(st.bytesSent[zcollPathIntra], sendsAcross ? 0 : 3 * bytes);
    EXPECT_EQ(st.bytesSent[zcollPathSelf], bytes);  // own block copied into place
    EXPECT_EQ(st.opCount, 1u);
  });
}

// Growable: an older, smaller struct gets the fields it has and nothing past its size.
TEST(Stats, OlderSmallerStructGetsWhatFits) {
  RankSetup s;
  s.nranks = 2;
  s.nodes = 2;
  runRanks(s, [&](int, zcollComm_t comm) {
    std::vector<int> x(100, 7), y(200);
    ZCOLL_EXPECT_OK(comm, zcollAllGather(x.data(), y.data(), 100, zcollInt32, comm, nullptr));
    zcollStats_t full{};
    full.size = sizeof(full);
    ZCOLL_EXPECT_OK(comm, zcollCommGetStats(comm, &full));
    ASSERT_GT(full.bytesSent[zcollPathInter], 0u);
    zcollStats_t st;
    std::memset(&st, 0xab, sizeof(st));
    st.size = offsetof(zcollStats_t, bytesRecv);  // a struct with bytesSent only
    ZCOLL_EXPECT_OK(comm, zcollCommGetStats(comm, &st));
    for (int p = 0; p < zcollNumPaths; ++p) EXPECT_EQ(st.bytesSent[p], full.bytesSent[p]);
    EXPECT_EQ(st.bytesRecv[0], 0xababababababababull);  // past `size`: untouched
    EXPECT_EQ(st.opCount, 0xababababababababull);
    st.size = offsetof(zcollStats_t, opCount);
    ZCOLL_EXPECT_OK(comm, zcollCommGetStats(comm, &st));
    EXPECT_EQ(st.opCount, 0xababababababababull);
    st.size = sizeof(st);
    ZCOLL_EXPECT_OK(comm, zcollCommGetStats(comm, &st));
    EXPECT_EQ(st.opCount, 1u);
    st.size = offsetof(zcollStats_t, bytesSent);  // not even the first counters
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "stats->size", zcollCommGetStats(comm, &st));
  });
}

// Every thread reaches this point before any goes on (a rendezvous outside zcoll).
class ThreadGate {
 public:
  explicit ThreadGate(int n) : left_(n) {}
  void arriveAndWait() {
    left_.fetch_sub(1);
    while (left_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

 private:
  std::atomic<int> left_;
};

// An all-reduce after rank 0 changed ZCOLL_ALGO_ALLREDUCE (the others wait meanwhile, so no
// thread reads the environment while it changes); `results` gets what each rank's call returned.
void allReduceAfterEnvChange(const RankSetup& s, const char* newValue,
                                      std::vector<zcollResult_t>* results) {
  ThreadGate changed(s.nranks);
  results->assign(s.nranks, zcollSuccess);
  runRanks(s, [&](int rank, zcollComm_t comm) {
    if (rank == 0) {
      if (newValue != nullptr) setenv("ZCOLL_ALGO_ALLREDUCE", newValue, 1);
      else unsetenv("ZCOLL_ALGO_ALLREDUCE");
    }
    changed.arriveAndWait();
    std::vector<float> x(1 << 16, float(rank + 1));
    (*results)[rank] = zcollAllReduce(x.data(), x.data(), x.size(), zcollFloat32, zcollSum,
                                      comm, nullptr);
    if ((*results)[rank] == zcollSuccess) {
      EXPECT_EQ(x[0], 3.0f);
      EXPECT_EQ(x.back(), 3.0f);
    } else {
      EXPECT_NE(std::string(zcollGetLastError(comm)).find("ZCOLL_ALGO_ALLREDUCE=bogus"),
                std::string::npos) << zcollGetLastError(comm);
    }
  });
}

TEST(Params, AlgorithmOverridesAreReadWhenTheCommIsCreated) {
  RankSetup s;
  s.nranks = 2;
  std::vector<zcollResult_t> results;
  {
    ScopedEnv restore("ZCOLL_ALGO_ALLREDUCE", "");  // unset at creation; "bogus" afterwards
    unsetenv("ZCOLL_ALGO_ALLREDUCE");
    allReduceAfterEnvChange(s, "bogus", &results);
    EXPECT_EQ(results, std::vector<zcollResult_t>(2, zcollSuccess));
  }
  {
    ScopedEnv bogus("ZCOLL_ALGO_ALLREDUCE", "bogus");  // at creation; unset afterwards
    allReduceAfterEnvChange(s, nullptr, &results);
    EXPECT_EQ(results, std::vector<zcollResult_t>(2, zcollInvalidArgument));
  }
}

}  // namespace
