// base/stream_holds: operations that synchronize the device implicitly run only while no stream
// of the process is held, and never overlap one another.
#include "base/stream_holds.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "zcoll/zcoll.h"

namespace zcoll {
namespace {

using namespace std::chrono_literals;

TEST(StreamHolds, IfNoneHeldRefusesWhileAStreamIsHeldAndRunsOnceNone) {
  streams::hold();
  bool ran = false;
  EXPECT_FALSE(streams::ifNoneHeld([&] { ran = true; }));
  EXPECT_FALSE(ran);
  streams::release();
  EXPECT_TRUE(streams::ifNoneHeld([&] { ran = true; }));
  EXPECT_TRUE(ran);
  EXPECT_EQ(streams::held(), 0);
}

// Two ranks of one process mapping each other's buffers at once: the second waits out the first
// (nothing is held) and runs, instead of reporting a held stream that is not there.
TEST(StreamHolds, IfNoneHeldWaitsOutAnotherThreadsOperation) {
  std::atomic<bool> firstRunning{false}, overlapped{false}, firstDone{false};
  std::thread first([&] {
    EXPECT_EQ(streams::whenNoneHeld(1000, "first", [&] {
      firstRunning = true;
      std::this_thread::sleep_for(50ms);
      firstDone = true;
      return zcollSuccess;
    }), zcollSuccess);
  });
  while (!firstRunning) std::this_thread::sleep_for(1ms);
  const bool ran = streams::ifNoneHeld([&] { overlapped = !firstDone; });
  first.join();
  EXPECT_TRUE(ran) << "refused although no stream was held";
  EXPECT_FALSE(overlapped) << "ran while the other thread's operation was under way";
}

TEST(StreamHolds, WhenNoneHeldTimesOutNamingTheOperation) {
  streams::hold();
  bool ran = false;
  EXPECT_EQ(streams::whenNoneHeld(20, "pinning a ring", [&] {
    ran = true;
    return zcollSuccess;
  }), zcollTimeout);
  EXPECT_NE(std::string(zcollGetLastError(nullptr)).find("pinning a ring"), std::string::npos);
  EXPECT_FALSE(ran);
  streams::release();
}

TEST(StreamHolds, DeferredOperationsRunWhenTheLastHoldIsReleased) {
  streams::hold();
  streams::hold();
  int ran = 0;
  streams::deferUntilNoneHeld([&] { ++ran; });
  EXPECT_EQ(ran, 0);
  streams::release();
  EXPECT_EQ(ran, 0);
  streams::release();
  EXPECT_EQ(ran, 1);
  streams::deferUntilNoneHeld([&] { ++ran; });  // none held: at once
  EXPECT_EQ(ran, 2);
}

}  // namespace
}  // namespace zcoll
