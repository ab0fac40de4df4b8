// The PeerMemory contract (transport/peer_memory.h), tested alone on both implementations,
// ranks as threads of one process: shm for host memory (ordinary buffers read one-sidedly,
// zcollMemAllocHost memory mapped once and writable, memfd windows), and cuda_ipc for device
// memory with the stand-in device (caller buffers not exposed, windows mapped at init and fixed
// in size), plus peerMemoryOf's choice per group and memory kind (coll/in_place.h).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "coll/in_place.h"
#include "core/comm.h"
#include "support/fake_device.h"
#include "support/ranks.h"
#include "transport/host_memory.h"
#include "transport/shm_transport.h"

namespace zcoll::test {
namespace {

std::vector<unsigned char> pattern(size_t bytes, int salt) {
  std::vector<unsigned char> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<unsigned char>(i * 37 + salt * 11);
  return v;
}

RankSetup twoRanks() {
  RankSetup s;
  s.nranks = 2;
  s.timeoutSec = 30;
  return s;
}

// What the two rank threads hand each other (the algorithms trade it in messages).
struct Shared {
  ExposedRange range[2];
};

PeerMemory* hostPeerMemory(zcollComm_t comm) {
  return peerMemoryOf(comm, worldGroup(comm), MemKind::kHost);
}

void barrier(zcollComm_t comm) { ZCOLL_EXPECT_OK(comm, zcollBarrier(comm, nullptr)); }

TEST(ShmPeerMemory, AnOrdinaryBufferIsNotMappedAndIsReadOneSidedly) {
  ScopedEnv shm("ZCOLL_TRANSPORT", "shm");
  Shared shared;
  runRanks(twoRanks(), [&](int rank, zcollComm_t comm) {
    PeerMemory* pm = hostPeerMemory(comm);
    ASSERT_NE(pm, nullptr);
    EXPECT_TRUE(pm->exposesCallerBuffers());
    EXPECT_TRUE(pm->readsUnmapped());
    EXPECT_EQ(rangeWireBytes(*pm), offsetof(ExposedRange, handle) + sizeof(shm::RegionRef));
    const std::vector<unsigned char> mine = pattern(10000, rank);
    ZCOLL_EXPECT_OK(comm, pm->expose(mine.data(), mine.size(), &shared.range[rank]));
    EXPECT_EQ(shared.range[rank].mappable, 0u);
    barrier(comm);
    const int peer = 1 - rank;
    PeerView view;
    ZCOLL_EXPECT_OK(comm, pm->map(peer, shared.range[peer], false, &view));
    EXPECT_EQ(view.at, nullptr);
    std::vector<unsigned char> got(3000);
    ZCOLL_EXPECT_OK(comm, pm->read(peer, shared.range[peer], 5000, got.data(), got.size()));
    const std::vector<unsigned char> theirs = pattern(10000, peer);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), theirs.begin() + 5000));
    barrier(comm);  // the peer read `mine`: it may go now
  });
}

TEST(ShmPeerMemory, RegisteredMemoryIsMappedOnceWritableAndKept) {
  ScopedEnv shm("ZCOLL_TRANSPORT", "shm");
  Shared shared;
  runRanks(twoRanks(), [&](int rank, zcollComm_t comm) {
    PeerMemory* pm = hostPeerMemory(comm);
    ASSERT_NE(pm, nullptr);
    void* p = nullptr;
    ASSERT_EQ(zcollMemAllocHost(&p, 1 << 20), zcollSuccess);
    char* mine = static_cast<char*>(p);
    const std::vector<unsigned char> bytes = pattern(4096, rank);
    std::memcpy(mine + 8192, bytes.data(), bytes.size());
    ZCOLL_EXPECT_OK(comm, pm->expose(mine + 8192, bytes.size(), &shared.range[rank]));
    EXPECT_EQ(shared.range[rank].mappable, 1u);
    barrier(comm);
    const int peer = 1 - rank;
    auto* shm = static_cast<ShmTransport*>(comm->transportNamed("shm"));
    for (int round = 0; round < 3; ++round) {
      PeerView view;
      ZCOLL_EXPECT_OK(comm, pm->map(peer, shared.range[peer], true, &view));
      ASSERT_NE(view.at, nullptr);
      ASSERT_NE(view.writable, nullptr);
      EXPECT_NE(view.hold, nullptr);
      const std::vector<unsigned char> theirs = pattern(4096, peer);
      EXPECT_EQ(std::memcmp(view.at, theirs.data(), 16), 0) << round;
      if (round == 0) view.writable[4095] = static_cast<char>(0x5a + rank);
    }
    EXPECT_EQ(shm->peerRegions().mapped(), 1u) << "mapped again instead of kept";
    barrier(comm);
    EXPECT_EQ(static_cast<unsigned char>(mine[8192 + 4095]), 0x5a + peer)
        << "a peer's write through its mapping did not land";
    barrier(comm);
    ASSERT_EQ(zcollMemFreeHost(p), zcollSuccess);
  });
}

TEST(ShmPeerMemory, AWindowGrowsKeepsItsReferenceMappableAndPeersSeeItsBytes) {
  ScopedEnv shm("ZCOLL_TRANSPORT", "shm");
  Shared shared;
  runRanks(twoRanks(), [&](int rank, zcollComm_t comm) {
    PeerMemory* pm = hostPeerMemory(comm);
    ASSERT_NE(pm, nullptr);
    const int peer = 1 - rank;
    for (size_t bytes : {size_t(4096), size_t(3) << 20}) {
      char* base = nullptr;
      ZCOLL_EXPECT_OK(comm, pm->ownWindow(bytes, &base, &shared.range[rank]));
      EXPECT_GE(shared.range[rank].bytes, bytes);
      const std::vector<unsigned char> mine = pattern(bytes, rank + int(bytes));
      std::memcpy(base, mine.data(), bytes);
      barrier(comm);
      const char* theirs = nullptr;
      ZCOLL_EXPECT_OK(comm, pm->mapWindow(peer, shared.range[peer], &theirs));
      ASSERT_NE(theirs, nullptr);
      const std::vector<unsigned char> expected = pattern(bytes, peer + int(bytes));
      EXPECT_EQ(std::memcmp(theirs, expected.data(), bytes), 0) << bytes;
      barrier(comm);  // read before the next size rewrites it
    }
  });
}

TEST(PeerMemoryChoice, AGroupGetsPeerMemoryOnlyWhenEveryPeerIsReachedThroughOne) {
  {
    ScopedEnv ucx("ZCOLL_TRANSPORT", "ucx");
    runRanks(twoRanks(), [&](int, zcollComm_t comm) {
      EXPECT_EQ(hostPeerMemory(comm), nullptr) << "ucx offers no peer memory";
      EXPECT_EQ(peerMemoryOf(comm, worldGroup(comm), MemKind::kDevice), nullptr)
          << "no device: no device routes";
    });
  }
  ScopedEnv shm("ZCOLL_TRANSPORT", "shm");
  runRanks(twoRanks(), [&](int rank, zcollComm_t comm) {
    EXPECT_EQ(hostPeerMemory(comm), comm->transportNamed("shm")->peerMemory());
    // A group of this rank alone needs no peer: nothing reaches anyone.
    EXPECT_EQ(peerMemoryOf(comm, makeGroup(comm, {rank}), MemKind::kHost), nullptr);
  });
}

// ---- cuda_ipc, on the stand-in device ---------------------------------------------------------

PeerMemory* devicePeerMemory(zcollComm_t comm) {
  return peerMemoryOf(comm, worldGroup(comm), MemKind::kDevice);
}

// Two ranks on the stand-in device, each with its own arena in scope, given its comm's device
// PeerMemory (the test fails at once where there is none).
void runDeviceRanks(
    const std::function<void(int, zcollComm_t, FakeDeviceArena&, PeerMemory*)>& body) {
  FakeDevice device;
  runRanks(twoRanks(), [&](int rank, zcollComm_t comm) {
    FakeDeviceArena arena;
    FakeDeviceArena::Scope scope(&arena);
    PeerMemory* pm = devicePeerMemory(comm);
    ASSERT_NE(pm, nullptr);
    body(rank, comm, arena, pm);
  });
}

TEST(CudaIpcPeerMemory, CallerBuffersAreNotExposedAndNothingIsReadUnmapped) {
  Shared shared;
  runDeviceRanks([&](int rank, zcollComm_t comm, FakeDeviceArena& arena, PeerMemory* pm) {
    EXPECT_EQ(pm, comm->transportNamed("cuda_ipc")->peerMemory());
    EXPECT_FALSE(pm->exposesCallerBuffers());
    EXPECT_FALSE(pm->readsUnmapped());
    // A range travels as {registration, offset}: the peers mapped the handle beforehand.
    EXPECT_EQ(rangeWireBytes(*pm), offsetof(ExposedRange, handle) + 16);
    void* buf = arena.alloc(4096);
    ZCOLL_EXPECT_OK(comm, pm->expose(buf, 4096, &shared.range[rank]));
    EXPECT_EQ(shared.range[rank].mappable, 0u);
    barrier(comm);
    const int peer = 1 - rank;
    const int opensBefore = FakeIpc::opens;
    PeerView view;
    ZCOLL_EXPECT_OK(comm, pm->map(peer, shared.range[peer], false, &view));
    EXPECT_EQ(view.at, nullptr);
    EXPECT_EQ(FakeIpc::opens, opensBefore) << "a call must open no mapping";
    char host[16];
    EXPECT_FAILS_WITH(nullptr, zcollUnsupported, "only be read mapped",
                      pm->read(peer, shared.range[peer], 0, host, sizeof(host)));
    barrier(comm);
  });
}

// Each rank's window is made and mapped by its peers at init; a call writes its own and reads
// the peers' with its kernels, opening nothing. It is fixed: asking for more than the node's
// smallest window fails (the algorithms check windowLimit first).
TEST(CudaIpcPeerMemory, WindowsAreMappedAtInitAndFixedInSize) {
  ScopedEnv window("ZCOLL_DEVICE_WINDOW_BYTES", "262144");
  Shared shared;
  runDeviceRanks([&](int rank, zcollComm_t comm, FakeDeviceArena& arena, PeerMemory* pm) {
    const std::vector<int> both = {0, 1};
    EXPECT_EQ(pm->windowLimit(both), 262144u);
    EXPECT_TRUE(pm->pairsConnected(both));
    const int peer = 1 - rank;
    const int opensBefore = FakeIpc::opens;
    const size_t bytes = 200000;
    char* base = nullptr;
    ZCOLL_EXPECT_OK(comm, pm->ownWindow(bytes, &base, &shared.range[rank]));
    EXPECT_EQ(shared.range[rank].mappable, 1u);
    char* again = nullptr;
    ExposedRange ref;
    EXPECT_FAILS_WITH(nullptr, zcollInternalError, "made at init",
                      pm->ownWindow(262145, &again, &ref));
    test::FakeDeviceExecutor exec;  // the rank's device writes its window
    void* staged = arena.alloc(bytes);
    arena.upload(staged, pattern(bytes, rank));
    ZCOLL_EXPECT_OK(comm, exec.copy(base, staged, bytes));
    ZCOLL_EXPECT_OK(comm, exec.flush());
    barrier(comm);
    const char* theirs = nullptr;
    ZCOLL_EXPECT_OK(comm, pm->mapWindow(peer, shared.range[peer], &theirs));
    void* copy = arena.alloc(bytes);
    ZCOLL_EXPECT_OK(comm, exec.copy(copy, theirs, bytes));
    ZCOLL_EXPECT_OK(comm, exec.flush());
    EXPECT_EQ(arena.download(copy, bytes), pattern(bytes, peer));
    EXPECT_EQ(FakeIpc::opens, opensBefore) << "a window is mapped at init, not by a call";
    barrier(comm);
  });
}

// Caller memory is exposed inside registrations only (zcollCommWindowRegister): a range in one
// travels as {registration, offset} and the peer finds it mapped at registration; a range
// outside every registration is not mappable; after deregistration nothing is exposed.
TEST(CudaIpcPeerMemory, RegisteredMemoryIsExposedAndFoundMappedWithoutOpeningAnything) {
  Shared shared;
  runDeviceRanks([&](int rank, zcollComm_t comm, FakeDeviceArena& arena, PeerMemory* pm) {
    char* buf = static_cast<char*>(arena.alloc(8192));
    arena.upload(buf, pattern(8192, rank));
    zcollWindow_t win = nullptr;
    ZCOLL_EXPECT_OK(comm, zcollCommWindowRegister(comm, buf, 8192, &win, ZCOLL_WIN_DEFAULT));
    EXPECT_TRUE(pm->exposesCallerBuffers());
    ZCOLL_EXPECT_OK(comm, pm->expose(buf + 1000, 4096, &shared.range[rank]));
    EXPECT_EQ(shared.range[rank].mappable, 1u);
    ExposedRange outside;
    ZCOLL_EXPECT_OK(comm, pm->expose(buf + 8000, 4096, &outside));  // runs past the window
    EXPECT_EQ(outside.mappable, 0u);
    barrier(comm);
    const int peer = 1 - rank;
    const int opensBefore = FakeIpc::opens;
    PeerView view;
    ZCOLL_EXPECT_OK(comm, pm->map(peer, shared.range[peer], true, &view));
    ASSERT_NE(view.at, nullptr);
    EXPECT_EQ(FakeIpc::opens, opensBefore) << "a registered range is mapped already";
    void* mine = arena.alloc(4096);
    test::FakeDeviceExecutor exec;
    ZCOLL_EXPECT_OK(comm, exec.copy(mine, view.at, 4096));
    ZCOLL_EXPECT_OK(comm, exec.flush());
    const std::vector<unsigned char> theirs = pattern(8192, peer);
    EXPECT_EQ(arena.download(mine, 4096),
              std::vector<unsigned char>(theirs.begin() + 1000, theirs.begin() + 5096));
    barrier(comm);
    ZCOLL_EXPECT_OK(comm, zcollCommWindowDeregister(comm, win));
    EXPECT_FALSE(pm->exposesCallerBuffers());
  });
}

TEST(CudaIpcPeerMemory, NoWindowMeansAWindowLimitOfZero) {
  ScopedEnv window("ZCOLL_DEVICE_WINDOW_BYTES", "0");
  FakeDevice device;
  runRanks(twoRanks(), [&](int, zcollComm_t comm) {
    PeerMemory* pm = devicePeerMemory(comm);
    ASSERT_NE(pm, nullptr);
    EXPECT_EQ(pm->windowLimit({0, 1}), 0u);
    char* base = nullptr;
    ExposedRange ref;
    EXPECT_FAILS_WITH(nullptr, zcollInternalError, "made at init", pm->ownWindow(1, &base, &ref));
  });
}

}  // namespace
}  // namespace zcoll::test
