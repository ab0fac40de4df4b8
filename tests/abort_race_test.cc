// zcollCommAbort from another thread against the call running on the communicator (issue 34,
// item 13): zcoll.h promises that call returns zcollRemoteError, and the handle stays allocated
// until every caller that was inside a call on it has returned.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api/guard.h"
#include "support/ranks.h"

namespace {

using namespace std::chrono_literals;

zcollComm_t loneComm() {
  zcollUniqueId id;
  EXPECT_EQ(zcollGetUniqueId(&id), zcollSuccess);
  zcollComm_t comm = nullptr;
  EXPECT_EQ(zcollCommInitRank(&comm, 1, id, 0), zcollSuccess) << zcollGetLastError(nullptr);
  return comm;
}

// Waits (sleeping, bounded) until an abort has marked `comm`.
bool waitForAbortMark(zcollComm_t comm) {
  for (int i = 0; i < 20000 && !comm->aborting.load(); ++i) std::this_thread::sleep_for(1ms);
  return comm->aborting.load();
}

// The race made deterministic: a call whose work is all done (it found no error) when the abort
// marks the comm, and that only then leaves. Before the fix it returned zcollSuccess.
TEST(AbortRace, ACallThatFinishesAfterTheAbortMarkedItReturnsRemoteError) {
  zcollComm_t comm = loneComm();
  ASSERT_NE(comm, nullptr);
  std::atomic<bool> entered{false};
  std::thread aborter([&] {
    while (!entered.load()) std::this_thread::sleep_for(1ms);
    EXPECT_EQ(zcollCommAbort(comm), zcollSuccess) << zcollGetLastError(nullptr);
  });
  bool marked = false;
  std::string nameSeen;
  zcollResult_t r = zcoll::collCall(comm, "test.finishing", [&]() -> zcoll::Result {
    entered.store(true);
    marked = waitForAbortMark(comm);
    nameSeen = comm->name;  // still allocated: the abort waits for this call to leave
    return zcollSuccess;
  });
  aborter.join();
  EXPECT_TRUE(marked);
  EXPECT_FALSE(nameSeen.empty());
  EXPECT_EQ(r, zcollRemoteError);
  EXPECT_NE(std::string(zcollGetLastError(comm)).find("aborted"), std::string::npos)
      << zcollGetLastError(comm);
  // Freed by the abort: recognised, never dereferenced.
  EXPECT_EQ(zcollCommDestroy(comm), zcollInvalidArgument);
}

// The same for a call that was pinned but had not yet checked the comm when the abort marked it:
// it was running, so zcollRemoteError (not zcollInvalidUsage, which is for calls made after).
TEST(AbortRace, ACallPinnedBeforeTheAbortFailsWithRemoteErrorAtItsCheck) {
  zcollComm_t comm = loneComm();
  ASSERT_NE(comm, nullptr);
  std::atomic<bool> entered{false};
  std::thread aborter([&] {
    while (!entered.load()) std::this_thread::sleep_for(1ms);
    EXPECT_EQ(zcollCommAbort(comm), zcollSuccess) << zcollGetLastError(nullptr);
  });
  zcollResult_t r = zcoll::pinnedCall(comm, "test.pinned", [&]() -> zcoll::Result {
    entered.store(true);
    EXPECT_TRUE(waitForAbortMark(comm));
    return zcoll::checkCommUsable(comm, "test.pinned");
  });
  aborter.join();
  EXPECT_EQ(r, zcollRemoteError);
}

// Black box: two ranks (threads) run 4 MiB all-gathers in a loop, from registered host memory
// (zcollMemAllocHost) in even rounds and ordinary buffers in odd ones, while another thread
// aborts rank 0's comm at a different moment each round. Every call either succeeds before the
// abort, or fails with one of the documented codes; once the abort has returned no call
// succeeds; nothing touches a freed communicator (this runs under ASan and TSan); rank 1 learns
// of the abort and destroys its comm.
TEST(AbortRace, AbortDuringLargeAllGathersInALoop) {
  constexpr int kRounds = 50;
  constexpr size_t kBytes = 2 << 20;  // per rank: 4 MiB gathered
  for (int round = 0; round < kRounds; ++round) {
    const bool registered = round % 2 == 0;
    zcoll::test::runOwningRanks(2, [](int) { return 30; }, [&](int rank, zcollComm_t comm) {
      void* send = nullptr;
      void* recv = nullptr;
      std::vector<char> ordinary;
      if (registered) {
        ASSERT_EQ(zcollMemAllocHost(&send, kBytes), zcollSuccess);
        ASSERT_EQ(zcollMemAllocHost(&recv, 2 * kBytes), zcollSuccess);
      } else {
        ordinary.resize(3 * kBytes);
        send = ordinary.data();
        recv = ordinary.data() + kBytes;
      }
      std::memset(send, rank + 1, kBytes);
      std::atomic<int> calls{0};
      std::atomic<bool> abortReturned{false};
      std::thread aborter;
      if (rank == 0) {
        aborter = std::thread([&, comm] {
          while (calls.load() < round % 3) std::this_thread::sleep_for(100us);
          std::this_thread::sleep_for(std::chrono::microseconds(97 * (round % 13)));
          EXPECT_EQ(zcollCommAbort(comm), zcollSuccess) << zcollGetLastError(nullptr);
          abortReturned.store(true);
        });
      }
      zcollResult_t last = zcollSuccess;
      std::string lastMsg;
      for (int k = 0; k < 1000; ++k) {
        calls.store(k);
        const bool afterAbort = abortReturned.load();
        zcollResult_t r = zcollAllGather(send, recv, kBytes, zcollUint8, comm, nullptr);
        if (r == zcollSuccess) {
          EXPECT_FALSE(afterAbort) << "a call made after zcollCommAbort returned succeeded";
          EXPECT_EQ(static_cast<unsigned char*>(recv)[2 * kBytes - 1], 2);
          continue;
        }
        last = r;
        lastMsg = zcollGetLastError(comm);
        break;
      }
      if (rank == 0) {
        aborter.join();
        // Running when the abort came: zcollRemoteError; made after it marked the comm:
        // zcollInvalidUsage; after it freed it: zcollInvalidArgument.
        EXPECT_TRUE(last == zcollRemoteError || last == zcollInvalidUsage ||
                    last == zcollInvalidArgument)
            << "round " << round << ": " << zcollGetErrorString(last) << " | " << lastMsg;
        EXPECT_EQ(zcollCommDestroy(comm), zcollInvalidArgument);  // freed by the abort
      } else {
        EXPECT_EQ(last, zcollRemoteError) << "round " << round << ": " << lastMsg;
        EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
      }
      if (registered) {
        EXPECT_EQ(zcollMemFreeHost(send), zcollSuccess);
        EXPECT_EQ(zcollMemFreeHost(recv), zcollSuccess);
      }
    });
  }
}

}  // namespace
