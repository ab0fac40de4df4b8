// The peer-mapping table of cuda_ipc (transport/ipc_mappings.h): holds are counted per
// allocation, the last holder closes, eviction never takes a held mapping. The second CUDA
// review's defect: two windows carved from one allocation share a mapping, and deregistering
// one closed it under the other (an illegal address on the GPU).
#include "transport/ipc_mappings.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "base/process.h"

namespace zcoll {
namespace {

IpcHandle rangeOf(uint64_t allocation, uint64_t offset, int32_t pid = 4242) {
  IpcHandle h{};
  h.opaque[0] = static_cast<uint8_t>(allocation);  // the allocation's handle bytes
  h.base = allocation;
  h.offset = offset;
  h.pid = pid;
  return h;
}

TEST(IpcMappings, TwoWindowsOfOneAllocationShareAMappingUntilBothAreGone) {
  IpcMappings<int> table;
  const IpcHandle first = rangeOf(0x1000, 0), second = rangeOf(0x1000, 4096);
  ASSERT_EQ(table.find(first, MapUse::kHeld), nullptr);
  table.add(first, 7, MapUse::kHeld);
  ASSERT_NE(table.find(second, MapUse::kHeld), nullptr) << "one mapping per allocation";
  EXPECT_EQ(*table.find(second, MapUse::kCached), 7);
  EXPECT_EQ(table.holds(first), 2);

  int closed = 0;
  EXPECT_FALSE(table.release(first, &closed)) << "the second window still uses the mapping";
  EXPECT_TRUE(table.contains(second));
  EXPECT_EQ(table.holds(second), 1);
  EXPECT_TRUE(table.release(second, &closed)) << "the last holder closes it";
  EXPECT_EQ(closed, 7);
  EXPECT_FALSE(table.contains(first));
  EXPECT_FALSE(table.release(first, &closed)) << "nothing left to close";
}

TEST(IpcMappings, EvictionTakesTheLeastRecentUnheldMappingOnly) {
  IpcMappings<int> table;
  table.add(rangeOf(1, 0), 1, MapUse::kHeld);    // a window: never evicted
  table.add(rangeOf(2, 0), 2, MapUse::kCached);  // user buffers
  table.add(rangeOf(3, 0), 3, MapUse::kCached);
  (void)table.find(rangeOf(2, 0), MapUse::kCached);  // 2 is now more recent than 3
  int out = 0;
  ASSERT_TRUE(table.takeEvictable(&out));
  EXPECT_EQ(out, 3);
  ASSERT_TRUE(table.takeEvictable(&out));
  EXPECT_EQ(out, 2);
  EXPECT_FALSE(table.takeEvictable(&out)) << "only the held window is left";
  EXPECT_TRUE(table.contains(rangeOf(1, 0)));
  EXPECT_EQ(table.size(), 1u);
}

TEST(IpcMappings, ACachedMappingLaterHeldIsNotEvicted) {
  IpcMappings<int> table;
  table.add(rangeOf(5, 0), 5, MapUse::kCached);           // a call's user buffer first
  ASSERT_NE(table.find(rangeOf(5, 64), MapUse::kHeld), nullptr);  // then a registration
  int out = 0;
  EXPECT_FALSE(table.takeEvictable(&out));
  EXPECT_TRUE(table.release(rangeOf(5, 64), &out));  // deregistration: the last hold
  EXPECT_EQ(out, 5);
}

TEST(IpcMappings, AllocationsOfDifferentProcessesAreDifferentMappings) {
  IpcMappings<int> table;
  table.add(rangeOf(9, 0, /*pid=*/1), 1, MapUse::kHeld);
  EXPECT_EQ(table.find(rangeOf(9, 0, /*pid=*/2), MapUse::kHeld), nullptr);
  table.add(rangeOf(9, 0, /*pid=*/2), 2, MapUse::kHeld);
  EXPECT_EQ(table.size(), 2u);
  int out = 0;
  EXPECT_TRUE(table.release(rangeOf(9, 0, 1), &out));
  EXPECT_EQ(out, 1);
  EXPECT_TRUE(table.contains(rangeOf(9, 0, 2)));
}

// cuda_ipc takes a handle's memory as this process's own only when the handle carries this
// process's token: pids repeat across pid namespaces (the second CUDA review's defect).
TEST(ProcessToken, SameInEveryThreadNewInAForkedChild) {
  const uint64_t mine = processToken();
  uint64_t fromThread = 0;
  std::thread([&] { fromThread = processToken(); }).join();
  EXPECT_EQ(fromThread, mine);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const uint64_t token = processToken();
    _exit(write(fds[1], &token, sizeof(token)) == sizeof(token) ? 0 : 1);
  }
  uint64_t childToken = 0;
  const ssize_t got = read(fds[0], &childToken, sizeof(childToken));
  EXPECT_EQ(got, static_cast<ssize_t>(sizeof(childToken)));
  int status = 0;
  waitpid(child, &status, 0);
  close(fds[0]);
  close(fds[1]);
  EXPECT_NE(childToken, mine);
  EXPECT_EQ(processToken(), mine);
}

TEST(IpcMappings, EqualPidsOfTwoProcessesAreDifferentAllocations) {
  IpcMappings<int> table;
  IpcHandle a = rangeOf(9, 0), b = rangeOf(9, 0);
  a.process = 1;
  b.process = 2;
  table.add(a, 1, MapUse::kHeld);
  EXPECT_EQ(table.find(b, MapUse::kHeld), nullptr);
}

}  // namespace
}  // namespace zcoll
