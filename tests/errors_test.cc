// Bad input gets its specific code and a message; broken communicators stay broken; abort
// from another thread returns promptly; nothing hangs.
#include <atomic>
#include <cstddef>
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/ranks.h"

using namespace zcoll::test;

namespace {

TEST(Errors, EveryResultHasADistinctString) {
  std::set<std::string> seen;
  for (int r = 0; r < zcollNumResults; ++r) {
    const char* s = zcollGetErrorString(static_cast<zcollResult_t>(r));
    ASSERT_NE(s, nullptr);
    EXPECT_TRUE(seen.insert(s).second) << s;
  }
  EXPECT_STRNE(zcollGetErrorString(static_cast<zcollResult_t>(999)), "");
}

TEST(Errors, VersionAndNullOutputs) {
  int v = 0;
  EXPECT_EQ(zcollGetVersion(&v), zcollSuccess);
  EXPECT_EQ(v, ZCOLL_VERSION_CODE);
  EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "NULL", zcollGetVersion(nullptr));
  EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "NULL", zcollGetUniqueId(nullptr));
  EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "NULL", zcollGetDeviceSupport(nullptr));
}

TEST(Errors, InitArguments) {
  zcollUniqueId id;
  ASSERT_EQ(zcollGetUniqueId(&id), zcollSuccess);
  zcollComm_t comm = reinterpret_cast<zcollComm_t>(0x1);
  EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "nranks", zcollCommInitRank(&comm, 0, id, 0));
  EXPECT_EQ(comm, nullptr);  // set to NULL on failure
  EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "rank 2", zcollCommInitRank(&comm, 2, id, 2));
  EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "rank -1", zcollCommInitRank(&comm, 2, id, -1));
  EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "NULL", zcollCommInitRank(nullptr, 1, id, 0));
  zcollConfig_t bad = ZCOLL_CONFIG_INITIALIZER;
  bad.magic = 0;
  EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "ZCOLL_CONFIG_INITIALIZER",
                    zcollCommInitRankConfig(&comm, 1, id, 0, &bad));
  zcollConfig_t negative = ZCOLL_CONFIG_INITIALIZER;
  negative.timeoutSec = -5;
  EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "timeoutSec",
                    zcollCommInitRankConfig(&comm, 1, id, 0, &negative));
  zcollUniqueId zero;
  std::memset(&zero, 0, sizeof(zero));
  EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "not initialized",
                    zcollCommInitRank(&comm, 1, zero, 0));
}

// The growable-struct rule: an older (smaller) config is read as far as it goes; a newer one
// (larger, newer version) is accepted with its known fields used.
TEST(Errors, ConfigFromOlderAndNewerHeaders) {
  struct Newer {
    zcollConfig_t known;
    int futureField[8];
  } newer;
  std::memset(&newer, 0x5c, sizeof(newer));
  newer.known = ZCOLL_CONFIG_INITIALIZER;
  newer.known.size = sizeof(Newer);
  newer.known.version = ZCOLL_VERSION_CODE + 100;
  newer.known.timeoutSec = 17;
  zcollConfig_t older = ZCOLL_CONFIG_INITIALIZER;
  older.size = offsetof(zcollConfig_t, hostId);  // timeoutSec is the last field it has
  older.timeoutSec = 19;
  for (zcollConfig_t* cfg : {&newer.known, &older}) {
    zcollUniqueId id;
    ASSERT_EQ(zcollGetUniqueId(&id), zcollSuccess);
    zcollComm_t comm = nullptr;
    ASSERT_EQ(zcollCommInitRankConfig(&comm, 1, id, 0, cfg), zcollSuccess)
        << zcollGetLastError(nullptr);
    int x = 3, y = 0;
    EXPECT_EQ(zcollAllReduce(&x, &y, 1, zcollInt32, zcollSum, comm, nullptr), zcollSuccess);
    EXPECT_EQ(y, 3);
    EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
  }
}

// zcollCommAbort from another thread while calls keep coming: every call either runs or fails
// with a clear code, none touches the freed communicator (this test runs under ASan in CI).
TEST(Errors, AbortRacingCallsFromAnotherThread) {
  for (int iter = 0; iter < 100; ++iter) {
    zcollUniqueId id;
    ASSERT_EQ(zcollGetUniqueId(&id), zcollSuccess);
    zcollComm_t comm = nullptr;
    ASSERT_EQ(zcollCommInitRank(&comm, 1, id, 0), zcollSuccess);
    std::atomic<bool> aborted{false};
    std::thread caller([&] {
      int x = 1, y = 0, count = 0;
      for (;;) {
        bool after = aborted.load();
        zcollResult_t r = zcollAllReduce(&x, &y, 1, zcollInt32, zcollSum, comm, nullptr);
        if (r == zcollSuccess) {
          ASSERT_FALSE(after) << "a call succeeded on an aborted communicator";
        } else {
          ASSERT_TRUE(r == zcollInvalidArgument || r == zcollInvalidUsage ||
                      r == zcollRemoteError) << r;
          if (after) break;
        }
        zcollCommCount(comm, &count);  // queries race too
      }
    });
    std::this_thread::sleep_for(std::chrono::microseconds(37 * (iter % 11)));
    EXPECT_EQ(zcollCommAbort(comm), zcollSuccess) << zcollGetLastError(nullptr);
    aborted.store(true);
    caller.join();
    EXPECT_EQ(zcollCommDestroy(comm), zcollInvalidArgument);  // already freed: recognised
  }
}

TEST(Errors, MismatchedUniqueIdIsRefusedAndTheRootTimesOut) {
  zcollUniqueId good;
  ASSERT_EQ(zcollGetUniqueId(&good), zcollSuccess);
  zcollUniqueId forged = good;
  forged.internal[0] ^= 0x5a;  // same root address, different magic
  zcollConfig_t config = ZCOLL_CONFIG_INITIALIZER;
  config.timeoutSec = 2;
  auto root = std::async(std::launch::async, [&] {
    zcollComm_t c = nullptr;
    zcollResult_t r = zcollCommInitRankConfig(&c, 2, good, 0, &config);
    return std::make_pair(r, std::string(zcollGetLastError(nullptr)));
  });
  zcollComm_t c = nullptr;
  EXPECT_FAILS_WITH(nullptr, zcollInvalidUsage, "does not match",
                    zcollCommInitRankConfig(&c, 2, forged, 1, &config));
  auto [r, msg] = root.get();
  EXPECT_EQ(r, zcollTimeout) << msg;
}

TEST(Errors, NullCommAndDestroyedComm) {
  int x = 0;
  EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "comm is NULL",
                    zcollAllGather(&x, &x, 1, zcollInt32, nullptr, nullptr));
  EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "comm",
                    zcollCommCount(nullptr, &x));
  EXPECT_EQ(zcollCommDestroy(nullptr), zcollSuccess);
  EXPECT_EQ(zcollCommAbort(nullptr), zcollSuccess);
}

TEST(Errors, CollectiveArguments) {
  RankSetup s;
  s.nranks = 2;
  runRanks(s, [](int rank, zcollComm_t comm) {
    std::vector<float> a(8, 1.f), b(16, 0.f);
    auto dt = static_cast<zcollDataType_t>(42);
    auto op = static_cast<zcollRedOp_t>(17);
    auto stream = reinterpret_cast<zcollStream_t>(0x1234);
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "sendbuff is NULL",
                      zcollAllGather(nullptr, b.data(), 8, zcollFloat32, comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "recvbuff is NULL",
                      zcollAllReduce(a.data(), nullptr, 8, zcollFloat32, zcollSum, comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "invalid datatype",
                      zcollAllGather(a.data(), b.data(), 8, dt, comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "invalid reduction op",
                      zcollReduceScatter(b.data(), a.data(), 8, zcollFloat32, op, comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "stream must be NULL",
                      zcollAllGather(a.data(), b.data(), 8, zcollFloat32, comm, stream));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "root 5",
                      zcollBroadcast(a.data(), a.data(), 8, zcollFloat32, 5, comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "overflow",
                      zcollAllGather(a.data(), b.data(), SIZE_MAX / 2, zcollFloat32, comm, nullptr));
    // All-gather in place only at the rank's own slot.
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "overlap",
                      zcollAllGather(b.data() + 1, b.data(), 4, zcollFloat32, comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "overlap",
                      zcollAllToAll(b.data(), b.data() + 4, 4, zcollFloat32, comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "peer 7",
                      zcollSend(a.data(), 8, zcollFloat32, 7, comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidUsage, "itself",
                      zcollSend(a.data(), 8, zcollFloat32, rank, comm, nullptr));
    zcollStats_t st{};
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "sizeof(zcollStats_t)", zcollCommGetStats(comm, &st));
    // Argument errors do not break the communicator.
    zcollResult_t async = zcollInternalError;
    EXPECT_EQ(zcollCommGetAsyncError(comm, &async), zcollSuccess);
    EXPECT_EQ(async, zcollSuccess);
    ZCOLL_EXPECT_OK(comm, zcollAllReduce(a.data(), a.data(), 8, zcollFloat32, zcollSum, comm, nullptr));
    EXPECT_EQ(a[0], 2.f);
  });
}

TEST(Errors, RootedAndAllToAllvArguments) {
  RankSetup s;
  s.nranks = 2;
  runRanks(s, [](int rank, zcollComm_t comm) {
    std::vector<float> a(8, 1.f), b(16, 0.f);
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "root -1",
                      zcollReduce(a.data(), a.data(), 8, zcollFloat32, zcollSum, -1, comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "root 2",
                      zcollGather(a.data(), b.data(), 8, zcollFloat32, 2, comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "root 9",
                      zcollScatter(b.data(), a.data(), 8, zcollFloat32, 9, comm, nullptr));
    // recvbuff matters on the root only, sendbuff of a scatter too.
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "recvbuff is NULL",
                      zcollReduce(a.data(), nullptr, 8, zcollFloat32, zcollSum, rank, comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "recvbuff is NULL",
                      zcollGather(a.data(), nullptr, 8, zcollFloat32, rank, comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "sendbuff is NULL",
                      zcollScatter(nullptr, a.data(), 8, zcollFloat32, rank, comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "invalid reduction op",
                      zcollReduce(a.data(), a.data(), 8, zcollFloat32,
                                  static_cast<zcollRedOp_t>(17), 0, comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "overlap",
                      zcollGather(b.data() + 1, b.data(), 4, zcollFloat32, rank, comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "overlap",
                      zcollScatter(b.data(), b.data() + 1, 4, zcollFloat32, rank, comm, nullptr));
    std::vector<size_t> counts = {2, 2}, displs = {0, 2}, overlapping = {0, 1};
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "sdispls is NULL",
                      zcollAllToAllv(a.data(), counts.data(), nullptr, b.data(), counts.data(),
                                     displs.data(), zcollFloat32, comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "receive blocks overlap",
                      zcollAllToAllv(a.data(), counts.data(), displs.data(), b.data(),
                                     counts.data(), overlapping.data(), zcollFloat32, comm, nullptr));
    std::vector<size_t> selfMismatch = counts;
    selfMismatch[rank] = 1;
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "sends itself",
                      zcollAllToAllv(a.data(), counts.data(), displs.data(), b.data(),
                                     selfMismatch.data(), displs.data(), zcollFloat32, comm, nullptr));
    std::vector<size_t> huge = {SIZE_MAX / 2, 1};
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "overflows",
                      zcollAllToAllv(a.data(), huge.data(), displs.data(), b.data(), counts.data(),
                                     displs.data(), zcollFloat32, comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "overlap",
                      zcollAllToAllv(b.data(), counts.data(), displs.data(), b.data() + 2,
                                     counts.data(), displs.data(), zcollFloat32, comm, nullptr));
    // None of these broke the communicator.
    ZCOLL_EXPECT_OK(comm, zcollAllToAllv(a.data(), counts.data(), displs.data(), b.data(),
                                         counts.data(), displs.data(), zcollFloat32, comm, nullptr));
  });
}

// A pair whose counts disagree fails on the receiving rank, whether the message is longer or
// shorter than the receive (never a silent partial block).
TEST(Errors, AllToAllvCountMismatchFailsOnTheReceiver) {
  for (size_t sent : {size_t{3}, size_t{5}}) {
    RankSetup s;
    s.nranks = 2;
    s.nodes = 2;
    s.timeoutSec = 5;
    runRanks(s, [&](int rank, zcollComm_t comm) {
      std::vector<float> a(9, 1.f), b(8, 0.f);  // a: room for the 5-element block at 4
      std::vector<size_t> sc = {4, 4}, rc = {4, 4}, d = {0, 4};
      if (rank == 0) sc[1] = sent;  // rank 1 expects 4
      zcollResult_t r = zcollAllToAllv(a.data(), sc.data(), d.data(), b.data(), rc.data(),
                                        d.data(), zcollFloat32, comm, nullptr);
      if (rank == 1) {
        EXPECT_EQ(r, zcollInvalidUsage) << "sent " << sent << ": " << zcollGetLastError(comm);
        EXPECT_NE(std::string(zcollGetLastError(comm)).find("rank 0"), std::string::npos)
            << zcollGetLastError(comm);
      }
    });
  }
}

// The same for point to point: a shorter message than the receive is an error, not a partial
// buffer (UCX would complete such a receive quietly).
TEST(Errors, RecvOfAnotherSizeFails) {
  RankSetup s;
  s.nranks = 2;
  s.nodes = 2;
  s.timeoutSec = 5;
  runRanks(s, [](int rank, zcollComm_t comm) {
    std::vector<float> buf(4, 1.f);
    if (rank == 0) {
      ZCOLL_EXPECT_OK(comm, zcollSend(buf.data(), 3, zcollFloat32, 1, comm, nullptr));
    } else {
      EXPECT_FAILS_WITH(comm, zcollInvalidUsage, "a message of 12 bytes from rank 0",
                        zcollRecv(buf.data(), 4, zcollFloat32, 0, comm, nullptr));
    }
  });
}

TEST(Errors, GroupMisuse) {
  EXPECT_FAILS_WITH(nullptr, zcollInvalidUsage, "without a matching", zcollGroupEnd());
  RankSetup s;
  s.nranks = 1;
  runRanks(s, [](int, zcollComm_t comm) {
    float x = 1, y = 0;
    // Collectives are kept in a group (group_collectives_test.cc); the barrier, which blocks
    // the calling thread, is refused there.
    ASSERT_EQ(zcollGroupStart(), zcollSuccess);
    EXPECT_FAILS_WITH(comm, zcollInvalidUsage, "between zcollGroupStart",
                      zcollBarrier(comm, nullptr));
    ASSERT_EQ(zcollGroupEnd(), zcollSuccess);
    EXPECT_EQ(y, 0);
    // A rejected operation makes the whole group fail instead of running half of it.
    ASSERT_EQ(zcollGroupStart(), zcollSuccess);
    EXPECT_EQ(zcollSend(&x, 1, zcollFloat32, 0, comm, nullptr), zcollSuccess);
    EXPECT_EQ(zcollRecv(nullptr, 1, zcollFloat32, 0, comm, nullptr), zcollInvalidArgument);
    EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "rejected", zcollGroupEnd());
  });
}

// Rank 1 never joins the collective: rank 0 times out, then its comm stays broken.
// One policy for ZCOLL_* values: empty is unset (the default), an invalid one fails init with a
// message naming the variable and what it takes.
zcollResult_t initOneRank(zcollComm_t* comm) {
  zcollUniqueId id;
  zcollResult_t r = zcollGetUniqueId(&id);
  if (r != zcollSuccess) return r;
  return zcollCommInitRank(comm, 1, id, 0);
}

TEST(EnvPolicy, EmptyValueIsUnset) {
  for (const char* name : {"ZCOLL_CHECK_CALLS", "ZCOLL_DEVICE_CALLS", "ZCOLL_REDUCE_PARTIALS",
                           "ZCOLL_CUDA_IPC_LEVEL", "ZCOLL_TIMEOUT", "ZCOLL_SPIN_COUNT",
                           "ZCOLL_CUDA_IPC_USER_BUFFERS", "ZCOLL_DEBUG_SUBSYS"}) {
    ScopedEnv empty(name, "");
    zcollComm_t comm = nullptr;
    EXPECT_EQ(initOneRank(&comm), zcollSuccess) << name << "=: " << zcollGetLastError(nullptr);
    float x = 3;
    if (comm != nullptr) {
      EXPECT_EQ(zcollAllReduce(&x, &x, 1, zcollFloat32, zcollSum, comm, nullptr), zcollSuccess);
      EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
    }
  }
}

TEST(EnvPolicy, InvalidValueFailsInitNamingTheVariable) {
  struct Case {
    const char* name;
    const char* value;
    const char* says;  // what the message must contain besides NAME=VALUE
  };
  for (const Case& c : {Case{"ZCOLL_TIMEOUT", "abc", "takes an integer"},
                        Case{"ZCOLL_TIMEOUT", "0", "whole seconds from 1"},
                        Case{"ZCOLL_TIMEOUT", "-5", "whole seconds from 1"},
                        Case{"ZCOLL_TIMEOUT", "4294967296", "whole seconds from 1"},
                        Case{"ZCOLL_SPIN_COUNT", "12x", "takes an integer"},
                        Case{"ZCOLL_CUDA_IPC_USER_BUFFERS", "yes", "takes an integer"},
                        Case{"ZCOLL_CHECK_CALLS", "maybe", "use off or on"},
                        Case{"ZCOLL_STATUS", "yes", "use on or off"},
                        Case{"ZCOLL_DEBUG_DUMP_SIGNAL", "HUP", "use USR1 or USR2"},
                        Case{"ZCOLL_REDUCE_PARTIALS", "fp64", "use fp32 or dtype"}}) {
    ScopedEnv bad(c.name, c.value);
    zcollComm_t comm = nullptr;
    zcollUniqueId id;
    zcollResult_t r = zcollGetUniqueId(&id);
    if (r == zcollSuccess) r = zcollCommInitRank(&comm, 1, id, 0);
    EXPECT_EQ(r, zcollInvalidArgument) << c.name << "=" << c.value;
    std::string msg = zcollGetLastError(nullptr);
    EXPECT_NE(msg.find(std::string(c.name) + "=" + c.value), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.says), std::string::npos) << msg;
    if (comm != nullptr) zcollCommDestroy(comm);
  }
}

// The flight record (ZCOLL_DEBUG_DUMP) in `dir` that names rank `rank`, or "" (found by content:
// the file name is the dump pattern's business).
std::string recordOfRank(const std::string& dir, int rank) {
  std::string found;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream f(dir + "/" + e->d_name);
      std::string json((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      if (json.find("\"rank\": " + std::to_string(rank) + ",") != std::string::npos) found = json;
    }
    closedir(d);
  }
  return found;
}

// The timed-out rank's message points at the tools that find the rank behind, and its flight
// record (ZCOLL_DEBUG_DUMP) carries the error it broke with.
TEST(Errors, TimeoutBreaksTheCommAndLaterCallsSayWhy) {
  RankSetup s;
  s.nranks = 2;
  s.timeoutSec = 1;
  const std::string dir = testing::TempDir() + "timeout_records_" + std::to_string(getpid());
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0) << dir;
  ScopedEnv dumpTo("ZCOLL_DEBUG_DUMP", (dir + "/%r.json").c_str());
  runRanks(s, [](int rank, zcollComm_t comm) {
    float x = 1;
    if (rank == 0) {
      auto start = std::chrono::steady_clock::now();
      EXPECT_FAILS_WITH(comm, zcollTimeout, "waited more than 1 s",
                        zcollAllReduce(&x, &x, 1, zcollFloat32, zcollSum, comm, nullptr));
      // The message names the peer the wait is still waiting on (here the only one).
      std::string msg = zcollGetLastError(comm);
      EXPECT_NE(msg.find("still waiting on rank 1 ("), std::string::npos) << msg;
      EXPECT_NE(msg.find("while the job runs, `zcoll_info --status` names the rank behind and "
                         "ZCOLL_CHECK_CALLS=on catches mismatched calls"), std::string::npos)
          << msg;
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
      EXPECT_FAILS_WITH(comm, zcollTimeout, "error state",
                        zcollBarrier(comm, nullptr));
      zcollResult_t async = zcollSuccess;
      EXPECT_EQ(zcollCommGetAsyncError(comm, &async), zcollSuccess);
      EXPECT_EQ(async, zcollTimeout);
    } else {
      // Alive but absent: a destroyed rank 1 would be reported as zcollRemoteError instead.
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    }
  });
  const std::string record = recordOfRank(dir, 0);
  EXPECT_NE(record.find("\"reason\": \"timeout\""), std::string::npos) << record;
  EXPECT_NE(record.find("\"error\": \"zcollTimeout\""), std::string::npos) << record;
  EXPECT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

TEST(Errors, AbortFromAnotherThreadReturnsPromptly) {
  zcollUniqueId id;
  ASSERT_EQ(zcollGetUniqueId(&id), zcollSuccess);
  zcollComm_t comms[2] = {nullptr, nullptr};
  std::thread t1([&] { zcollCommInitRank(&comms[1], 2, id, 1); });
  ASSERT_EQ(zcollCommInitRank(&comms[0], 2, id, 0), zcollSuccess);
  t1.join();
  ASSERT_NE(comms[1], nullptr);
  // Rank 0 waits in a barrier rank 1 never enters; another thread aborts rank 0's comm.
  auto waiting = std::async(std::launch::async, [&] { return zcollBarrier(comms[0], nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(zcollCommAbort(comms[0]), zcollSuccess) << zcollGetLastError(nullptr);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(waiting.get(), zcollRemoteError);
  EXPECT_EQ(zcollCommDestroy(comms[1]), zcollSuccess);
}

}  // namespace
