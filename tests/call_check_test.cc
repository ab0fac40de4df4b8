// ZCOLL_CHECK_CALLS=on: a collective whose arguments differ between ranks fails on EVERY rank with
// zcollInvalidUsage naming the first differing field and a rank holding it; matching calls
// before and after still work (the check moves no user data).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "support/ranks.h"

namespace zcoll::test {
namespace {

// Runs `call(rank, comm)` on 3 ranks with the check on; every rank must fail with a message
// holding every needle, and an all-reduce afterwards must still succeed.
void expectMismatch(const std::function<zcollResult_t(int, zcollComm_t)>& call,
                    const std::vector<std::string>& needles) {
  ScopedEnv check("ZCOLL_CHECK_CALLS", "on");
  RankSetup s;
  s.nranks = 3;
  s.nodes = 2;
  runRanks(s, [&](int rank, zcollComm_t comm) {
    EXPECT_EQ(call(rank, comm), zcollInvalidUsage) << "rank " << rank;
    std::string msg = zcollGetLastError(comm);
    EXPECT_NE(msg.find("mismatched call"), std::string::npos) << msg;
    for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg;
    int x = rank, y = -1;
    EXPECT_EQ(zcollAllReduce(&x, &y, 1, zcollInt32, zcollSum, comm, nullptr), zcollSuccess)
        << zcollGetLastError(comm);
    EXPECT_EQ(y, 0 + 1 + 2);
  });
}

TEST(CallCheck, CountDiffers) {
  expectMismatch([](int rank, zcollComm_t comm) {
    size_t count = rank == 1 ? 200 : 100;
    std::vector<float> send(count), recv(count * 3);
    return zcollAllGather(send.data(), recv.data(), count, zcollFloat32, comm, nullptr);
  }, {"count", "rank 1 has 200", "rank 0 100"});
}

TEST(CallCheck, ZeroCountAgainstNonZero) {
  expectMismatch([](int rank, zcollComm_t comm) {
    size_t count = rank == 2 ? 0 : 5;
    std::vector<float> send(5 * 3), recv(5);
    return zcollReduceScatter(send.data(), recv.data(), count, zcollFloat32, zcollSum, comm,
                              nullptr);
  }, {"count", "rank 2 has 0"});
}

TEST(CallCheck, DatatypeOpAndRootDiffer) {
  expectMismatch([](int rank, zcollComm_t comm) {
    std::vector<double> buf(16);
    return zcollAllReduce(buf.data(), buf.data(), 8, rank == 1 ? zcollFloat64 : zcollInt64,
                          zcollSum, comm, nullptr);
  }, {"datatype", "rank 1"});
  expectMismatch([](int rank, zcollComm_t comm) {
    std::vector<float> buf(8);
    return zcollAllReduce(buf.data(), buf.data(), 8, zcollFloat32, rank == 2 ? zcollMax : zcollSum,
                          comm, nullptr);
  }, {"op: rank 2 has max, rank 0 sum"});
  expectMismatch([](int rank, zcollComm_t comm) {
    std::vector<float> buf(8);
    return zcollBroadcast(buf.data(), buf.data(), 8, zcollFloat32, rank == 1 ? 1 : 0, comm,
                          nullptr);
  }, {"root", "rank 1 has 1"});
}

TEST(CallCheck, CollectiveKindDiffers) {
  expectMismatch([](int rank, zcollComm_t comm) {
    std::vector<float> a(12), b(12);
    if (rank == 2) return zcollAllReduce(a.data(), b.data(), 4, zcollFloat32, zcollSum, comm, nullptr);
    return zcollAllGather(a.data(), b.data(), 4, zcollFloat32, comm, nullptr);
  }, {"collective", "zcollAllReduce", "zcollAllGather"});
}

TEST(CallCheck, QuantizationSettingsDiffer) {
  // Each setting is named with both values, as counts are.
  expectMismatch([](int rank, zcollComm_t comm) {
    std::vector<float> send(256), recv(256 * 3);
    zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
    q.bits = rank == 1 ? 4 : 8;
    return zcollQuantizedAllGather(send.data(), recv.data(), 256, zcollFloat32, &q, comm, nullptr);
  }, {"quantization settings (bits): rank 1 has 4, rank 0 8"});
  expectMismatch([](int rank, zcollComm_t comm) {
    std::vector<float> send(300 * 3), recv(300);
    zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
    q.blockSize = rank == 0 ? 64 : 128;
    return zcollQuantizedReduceScatter(send.data(), recv.data(), 300, zcollFloat32, zcollSum, &q,
                                       comm, nullptr);
  }, {"quantization settings (blockSize): rank 1 has 128, rank 0 64"});
  // A default left 0 on one rank compares as the value it stands for (block 256).
  expectMismatch([](int rank, zcollComm_t comm) {
    std::vector<float> send(256), recv(256 * 3);
    zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
    q.blockSize = rank == 2 ? 512 : 0;
    return zcollQuantizedAllGather(send.data(), recv.data(), 256, zcollFloat32, &q, comm, nullptr);
  }, {"quantization settings (blockSize): rank 2 has 512, rank 0 256"});
  expectMismatch([](int rank, zcollComm_t comm) {
    std::vector<float> send(256), recv(256 * 3);
    zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
    q.rounding = rank == 1 ? zcollRoundStochastic : zcollRoundNearestEven;
    return zcollQuantizedAllGather(send.data(), recv.data(), 256, zcollFloat32, &q, comm, nullptr);
  }, {"quantization settings (rounding): rank 1 has stochastic, rank 0 nearest-even"});
  expectMismatch([](int rank, zcollComm_t comm) {
    std::vector<float> send(300 * 3), recv(300);
    zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
    q.intraBits = rank == 2 ? 8 : 4;
    return zcollQuantizedReduceScatter(send.data(), recv.data(), 300, zcollFloat32, zcollSum, &q,
                                       comm, nullptr);
  }, {"quantization settings (intraBits): rank 2 has 8, rank 0 4"});
}

// The check is off by default: matching calls pay nothing and behave as before.
TEST(CallCheck, OffByDefaultAndMatchingCallsPass) {
  for (const char* mode : {"off", "on"}) {
    ScopedEnv check("ZCOLL_CHECK_CALLS", mode);
    RankSetup s;
    s.nranks = 3;
    runRanks(s, [&](int rank, zcollComm_t comm) {
      std::vector<float> send(4, float(rank)), recv(12);
      for (int i = 0; i < 3; ++i)
        ASSERT_EQ(zcollAllGather(send.data(), recv.data(), 4, zcollFloat32, comm, nullptr),
                  zcollSuccess) << mode;
      EXPECT_EQ(recv[8], 2.0f);
      EXPECT_EQ(zcollBarrier(comm, nullptr), zcollSuccess);
    });
  }
}

// The check's own exchange is not the call's traffic: with the check on, zcollCommGetStats counts
// exactly the bytes it counts with the check off (hpZ's backward call: zero inter-node bytes).
TEST(CallCheck, StatsCountOnlyTheCallsBytes) {
  struct Sent {
    uint64_t backward[zcollNumPaths];
    uint64_t qgz[zcollNumPaths];
  };
  auto measure = [](const char* mode) {
    ScopedEnv check("ZCOLL_CHECK_CALLS", mode);
    RankSetup s;
    s.nranks = 4;
    s.nodes = 2;
    std::vector<Sent> sent(s.nranks);
    runRanks(s, [&](int rank, zcollComm_t comm) {
      const size_t count = 256;
      std::vector<float> shard(count, float(rank)), full(count * 4), secondary(count * 2);
      std::vector<float> grads(count * 4, 1.0f), gradShard(count);
      zcollStats_t st;
      auto snapshot = [&](uint64_t* out) {
        std::memset(&st, 0, sizeof(st));
        st.size = sizeof(st);
        ASSERT_EQ(zcollCommGetStats(comm, &st), zcollSuccess);
        for (int p = 0; p < zcollNumPaths; ++p) out[p] = st.bytesSent[p];
      };
      ZCOLL_EXPECT_OK(comm, zcollAllGatherHier(shard.data(), full.data(), secondary.data(), count,
                                               zcollFloat32, nullptr, comm, nullptr));
      ASSERT_EQ(zcollCommResetStats(comm), zcollSuccess);
      ZCOLL_EXPECT_OK(comm, zcollAllGatherFromSecondary(secondary.data(), full.data(), count,
                                                        zcollFloat32, comm, nullptr));
      snapshot(sent[rank].backward);
      ASSERT_EQ(zcollCommResetStats(comm), zcollSuccess);
      ZCOLL_EXPECT_OK(comm, zcollQuantizedReduceScatter(grads.data(), gradShard.data(), count,
                                                        zcollFloat32, zcollSum, nullptr, comm,
                                                        nullptr));
      snapshot(sent[rank].qgz);
    });
    return sent;
  };
  std::vector<Sent> off = measure("off"), on = measure("on");
  for (size_t r = 0; r < off.size(); ++r) {
    EXPECT_EQ(on[r].backward[zcollPathInter], 0u) << "rank " << r;
    for (int p = 0; p < zcollNumPaths; ++p) {
      EXPECT_EQ(on[r].backward[p], off[r].backward[p]) << "rank " << r << " path " << p;
      EXPECT_EQ(on[r].qgz[p], off[r].qgz[p]) << "rank " << r << " path " << p;
    }
  }
}

}  // namespace
}  // namespace zcoll::test
