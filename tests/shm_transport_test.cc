// The shm transport (src/transport/shm_transport.h): its protocol at the edges (eager and
// rendezvous sizes, a full ring, more large sends than rendezvous states, messages that arrive
// before their receive, a size mismatch on a rendezvous), the algorithms that read peers in
// place, and every collective, standard and ZeRO++, giving the same bits over shm only, ucx only
// and both mixed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sched.h>
#include <sys/resource.h>

#include <csignal>

#include "coll/in_place.h"
#include "core/comm.h"
#include "support/ranks.h"
#include "transport/host_memory.h"
#include "transport/shm_segment.h"
#include "transport/shm_transport.h"
#include "transport/shm_window.h"

namespace zcoll::test {
namespace {

// The comm's shm transport (the tests below use its windows and mapping counts).
ShmTransport* shmOf(zcollComm_t comm) {
  return static_cast<ShmTransport*>(comm->transportNamed("shm"));
}

constexpr size_t kEager = shm::kEagerBytes;  // the largest message copied through a ring
static_assert(shm::kSlots < 200 && shm::kRndvSlots < 100, "the overflow test must overflow");
constexpr size_t kPiece = shm::kSlotPayload;  // one ring slot's share of an eager message
static_assert(20000 * sizeof(float) > kEager, "the collectives must use rendezvous");
static_assert(16384 * sizeof(float) > kEager, "the mismatch test must use a rendezvous");
static_assert(shm::eagerSlots(3 * kPiece + 7) == 4 && 50 * 4 > shm::kSlots,
              "the overflow test must overflow with multi-slot messages");

std::vector<uint8_t> pattern(size_t bytes, int salt) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>(i * 131 + salt * 17 + (i >> 9));
  return v;
}

RankSetup oneNode(int nranks) {
  RankSetup s;
  s.nranks = nranks;
  s.timeoutSec = 30;
  return s;
}

// Emulated nodes, ranks not node-contiguous (ranks dealt to the nodes in turn).
RankSetup cyclicNodes(int nranks, int nodes) {
  RankSetup s = oneNode(nranks);
  s.nodes = nodes;
  s.placement = Placement::kCyclic;
  return s;
}

TEST(ShmProtocol, EverySizeAroundTheEagerLimitBothWays) {
  ScopedEnv shmOnly("ZCOLL_TRANSPORT", "shm");
  runRanks(oneNode(2), [](int rank, zcollComm_t comm) {
    for (size_t bytes : {size_t{0}, size_t{1}, kPiece - 1, kPiece, kPiece + 1, 2 * kPiece + 5,
                         kEager - 1, kEager, kEager + 1, size_t{1} << 20, (size_t{5} << 20) + 3}) {
      std::vector<uint8_t> out = pattern(bytes, rank), in(bytes, 0xEE);
      ASSERT_EQ(zcollGroupStart(), zcollSuccess);
      ZCOLL_EXPECT_OK(comm, zcollSend(out.data(), bytes, zcollUint8, 1 - rank, comm, nullptr));
      ZCOLL_EXPECT_OK(comm, zcollRecv(in.data(), bytes, zcollUint8, 1 - rank, comm, nullptr));
      ZCOLL_EXPECT_OK(comm, zcollGroupEnd());
      EXPECT_EQ(in, pattern(bytes, 1 - rank)) << bytes << " bytes";
    }
  });
}

// 200 small messages (more than a ring's entries), 50 eager ones of 4 slots each, and 100
// large ones (more than the rendezvous states) sent before the receiver posts anything: the sender queues what does not
// fit, the receiver keeps what arrives early, and every message lands in order.
TEST(ShmProtocol, MoreMessagesThanRingEntriesAndRendezvousStates) {
  ScopedEnv shmOnly("ZCOLL_TRANSPORT", "shm");
  runRanks(oneNode(2), [](int rank, zcollComm_t comm) {
    for (size_t bytes : {size_t{8}, 3 * kPiece + 7, 3 * kEager}) {
      const int n = bytes == 8 ? 200 : bytes < kEager ? 50 : 100;
      std::vector<std::vector<uint8_t>> bufs(n);
      if (rank == 0) {
        ASSERT_EQ(zcollGroupStart(), zcollSuccess);
        for (int i = 0; i < n; ++i) {
          bufs[i] = pattern(bytes, i);
          ZCOLL_EXPECT_OK(comm, zcollSend(bufs[i].data(), bytes, zcollUint8, 1, comm, nullptr));
        }
        ZCOLL_EXPECT_OK(comm, zcollGroupEnd());
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let the sender fill up
        ASSERT_EQ(zcollGroupStart(), zcollSuccess);
        for (int i = 0; i < n; ++i) {
          bufs[i].assign(bytes, 0);
          ZCOLL_EXPECT_OK(comm, zcollRecv(bufs[i].data(), bytes, zcollUint8, 0, comm, nullptr));
        }
        ZCOLL_EXPECT_OK(comm, zcollGroupEnd());
        for (int i = 0; i < n; ++i) EXPECT_EQ(bufs[i], pattern(bytes, i)) << "message " << i;
      }
    }
  });
}

// A rendezvous whose receive has another size fails the receive only: the sender's buffer was
// never read, and its send completed, as over ucx.
TEST(ShmProtocol, RendezvousOfAnotherSizeFailsTheReceive) {
  ScopedEnv shmOnly("ZCOLL_TRANSPORT", "shm");
  RankSetup s = oneNode(2);
  s.timeoutSec = 5;
  runRanks(s, [](int rank, zcollComm_t comm) {
    std::vector<float> buf(32768, 1.f);
    if (rank == 0) {
      ZCOLL_EXPECT_OK(comm, zcollSend(buf.data(), 16384, zcollFloat32, 1, comm, nullptr));
    } else {
      EXPECT_FAILS_WITH(comm, zcollInvalidUsage, "a message of 65536 bytes from rank 0",
                        zcollRecv(buf.data(), 32768, zcollFloat32, 0, comm, nullptr));
    }
  });
}

// ---- Waiting: spin only where a spinning rank does not take a CPU from a peer ----------------

int usableCpus() {
  cpu_set_t cpus;
  return sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 0;
}

TEST(Waiting, SpinsOnlyWhenTheMachineHasACpuPerRank) {
  const int cpus = usableCpus();
  ASSERT_GT(cpus, 0);
  for (int nranks : {1, cpus, cpus + 1}) {
    runRanks(oneNode(nranks), [&](int, zcollComm_t comm) {
      EXPECT_EQ(comm->spinCount, nranks > cpus ? 0 : 2000) << nranks << " ranks, " << cpus
                                                             << " CPUs";
      zcollComm_t half = nullptr;  // a split decides again, for its own ranks
      ZCOLL_EXPECT_OK(comm, zcollCommSplit(comm, comm->rank % 2, 0, &half, nullptr));
      EXPECT_EQ(half->spinCount, half->nranks > cpus ? 0 : 2000);
      zcollCommDestroy(half);
    });
  }
}

TEST(Waiting, AnExplicitSpinCountIsKeptAndInherited) {
  ScopedEnv spin("ZCOLL_SPIN_COUNT", "7");
  runRanks(oneNode(3), [](int, zcollComm_t comm) {
    EXPECT_EQ(comm->spinCount, 7);
    zcollComm_t copy = nullptr;
    ZCOLL_EXPECT_OK(comm, zcollCommSplit(comm, 0, 0, &copy, nullptr));
    EXPECT_EQ(copy->spinCount, 7);
    zcollCommDestroy(copy);
  });
}

TEST(Waiting, ASpinCountBelowMinusOneIsRefused) {
  ScopedEnv spin("ZCOLL_SPIN_COUNT", "-2");
  zcollUniqueId id;
  ASSERT_EQ(zcollGetUniqueId(&id), zcollSuccess);
  zcollComm_t comm = nullptr;
  EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "ZCOLL_SPIN_COUNT=-2",
                    zcollCommInitRank(&comm, 1, id, 0));
  EXPECT_EQ(comm, nullptr);
}

// Bytes by path since the last stats reset.
struct PathBytes {
  uint64_t intraSent = 0, intraRecv = 0, interSent = 0;
};

PathBytes pathBytes(zcollComm_t comm) {
  zcollStats_t st{};
  st.size = sizeof(st);
  ZCOLL_EXPECT_OK(comm, zcollCommGetStats(comm, &st));
  return {st.bytesSent[zcollPathIntra], st.bytesRecv[zcollPathIntra], st.bytesSent[zcollPathInter]};
}

// ---- shm_read: the reduce-scatter that reads its peers in place ------------------------------

// What a shm range (a published buffer, a window) costs on the wire: the fixed fields and the
// handle shm uses (transport/peer_memory.h).
constexpr uint64_t kShmRange = offsetof(ExposedRange, handle) + sizeof(shm::RegionRef);
// What a read in place costs in messages per peer: the published buffer and the release token.
constexpr uint64_t kNotices = kShmRange + 1;

struct RsResult {
  std::vector<uint16_t> out;
  PathBytes bytes;
};

// bf16 sum (where the order of additions shows in the bits), 3 pieces and a bit per chunk.
std::vector<RsResult> reduceScatterWith(const char* algo, int nranks) {
  ScopedEnv force("ZCOLL_ALGO_REDUCESCATTER", algo);
  const size_t n = 3 * 65536 + 77;
  std::vector<RsResult> results(nranks);
  runRanks(oneNode(nranks), [&](int rank, zcollComm_t comm) {
    std::vector<uint16_t> in(n * nranks);
    for (size_t i = 0; i < in.size(); ++i)  // bf16 values of mixed magnitude and sign
      in[i] = static_cast<uint16_t>(0x3c00 + ((i * 2654435761u + rank * 97u) % 0x0900)) |
              static_cast<uint16_t>((i + rank) % 3 == 0 ? 0x8000 : 0);
    RsResult& r = results[rank];
    r.out.assign(n, 0);
    ZCOLL_EXPECT_OK(comm, zcollCommResetStats(comm));
    ZCOLL_EXPECT_OK(comm, zcollReduceScatter(in.data(), r.out.data(), n, zcollBfloat16, zcollSum,
                                             comm, nullptr));
    r.bytes = pathBytes(comm);
  });
  return results;
}

TEST(ShmRead, ReduceScatterHasTheDirectAlgorithmsBitsAndBytes) {
  for (int nranks : {2, 3}) {
    auto direct = reduceScatterWith("direct", nranks);
    auto read = reduceScatterWith("shm_read", nranks);
    for (int r = 0; r < nranks; ++r) {
      EXPECT_TRUE(read[r].out == direct[r].out) << nranks << " ranks, rank " << r;
      // Each peer's chunk crosses once each way: as much as the direct algorithm sends, plus
      // the published buffers and 1-byte tokens the reads need.
      uint64_t chunk = (3 * 65536 + 77) * 2 * uint64_t(nranks - 1);
      EXPECT_EQ(direct[r].bytes.intraSent, chunk);
      EXPECT_EQ(read[r].bytes.intraSent, chunk + kNotices * uint64_t(nranks - 1));
      EXPECT_EQ(read[r].bytes.intraRecv, chunk + kNotices * uint64_t(nranks - 1));
    }
  }
}

// All-reduce shm_read: chunk i of every rank's result is what reduce-scatter shm_read gives
// rank i (reduced in rank order by its owner, then copied: the direct algorithm's bits), in
// place and out of place. Uneven counts: collectives_test.
TEST(ShmRead, AllReduceIsTheReduceScatterGathered) {
  const int w = 3;
  const size_t chunk = 87382, n = w * chunk;
  auto input = [&](int rank) {
    std::vector<uint16_t> in(n);
    for (size_t i = 0; i < n; ++i)
      in[i] = static_cast<uint16_t>(0x3c00 + ((i * 40503u + rank * 131u) % 0x0900)) |
              static_cast<uint16_t>((i + rank) % 3 == 0 ? 0x8000 : 0);
    return in;
  };
  std::vector<uint16_t> want(n);
  {
    ScopedEnv force("ZCOLL_ALGO_REDUCESCATTER", "shm_read");
    runRanks(oneNode(w), [&](int rank, zcollComm_t comm) {
      std::vector<uint16_t> in = input(rank);
      ZCOLL_EXPECT_OK(comm, zcollReduceScatter(in.data(), want.data() + rank * chunk, chunk,
                                               zcollBfloat16, zcollSum, comm, nullptr));
    });
  }
  ScopedEnv force("ZCOLL_ALGO_ALLREDUCE", "shm_read");
  for (bool inPlace : {false, true}) {
    runRanks(oneNode(w), [&](int rank, zcollComm_t comm) {
      std::vector<uint16_t> in = input(rank), out(n, 0);
      std::vector<uint16_t>& result = inPlace ? in : out;
      ZCOLL_EXPECT_OK(comm, zcollAllReduce(in.data(), result.data(), n, zcollBfloat16, zcollSum,
                                           comm, nullptr));
      EXPECT_TRUE(result == want) << "rank " << rank << " in place " << inPlace;
    });
  }
}

// ---- qgZ two_hop_shm_read: the intra hop reads the peers' windows in place ------------------

struct QgzRun {
  std::vector<uint8_t> out;  // every call's output, appended
  PathBytes bytes;
};

// Several qgZ calls (bf16, INT4 both hops, stochastic rounding: the bits show any difference)
// with a pipeline of 3 pieces (3 at each count, with 256-element blocks), growing sizes (the window grows between calls), in and out of
// place, forced to `algo` over `transport`.
std::vector<QgzRun> qgzRuns(const RankSetup& s, const char* algo, const char* transport) {
  ScopedEnv forced("ZCOLL_TRANSPORT", transport);
  ScopedEnv force("ZCOLL_ALGO_QUANTIZED_REDUCESCATTER", algo);
  std::vector<QgzRun> runs(s.nranks);
  runRanks(s, [&](int rank, zcollComm_t comm) {
    QgzRun& r = runs[rank];
    zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
    q.rounding = zcollRoundStochastic;
    q.pipelineDepth = 3;
    q.blockSize = 256;
    ZCOLL_EXPECT_OK(comm, zcollCommResetStats(comm));
    for (size_t count : {size_t(3000), size_t(70001), size_t(300000)})
      for (bool inPlace : {false, true}) {
        std::vector<uint16_t> in(count * s.nranks), out(count);
        for (size_t i = 0; i < in.size(); ++i)
          in[i] = static_cast<uint16_t>(0x3c00 + ((i * 2654435761u + rank * 97u) % 0x0900)) |
                  static_cast<uint16_t>((i + rank) % 3 == 0 ? 0x8000 : 0);
        uint16_t* result = inPlace ? in.data() + rank * count : out.data();
        ZCOLL_EXPECT_OK(comm, zcollQuantizedReduceScatter(in.data(), result, count,
                                                          zcollBfloat16, zcollSum, &q, comm,
                                                          nullptr));
        const uint8_t* b = reinterpret_cast<const uint8_t*>(result);
        r.out.insert(r.out.end(), b, b + count * 2);
      }
    r.bytes = pathBytes(comm);
  });
  return runs;
}

// Same bits as two_hop's exchange; the quantized pieces are counted as read from the peers
// (as many bytes as the exchange moves), plus the window references (kShmRange bytes per piece
// and local peer: 3 pieces x 3 calls x 2 places) and one release token per call and local peer.
void expectShmReadMatchesExchange(const RankSetup& s, int localPeers) {
  auto exchange = qgzRuns(s, "two_hop", "");
  auto read = qgzRuns(s, "two_hop_shm_read", "");
  const uint64_t extra = uint64_t(localPeers) * (3 * 6 * kShmRange + 6);
  for (int r = 0; r < s.nranks; ++r) {
    ASSERT_FALSE(read[r].out.empty());
    EXPECT_TRUE(read[r].out == exchange[r].out) << "rank " << r;
    EXPECT_EQ(read[r].bytes.intraSent, exchange[r].bytes.intraSent + extra) << "rank " << r;
    EXPECT_EQ(read[r].bytes.intraRecv, exchange[r].bytes.intraRecv + extra) << "rank " << r;
    EXPECT_EQ(read[r].bytes.interSent, exchange[r].bytes.interSent) << "rank " << r;
  }
}

TEST(QgzShmRead, SameBitsAsTheExchangeOnOneNode) { expectShmReadMatchesExchange(oneNode(3), 2); }

TEST(QgzShmRead, SameBitsAsTheExchangeOnTwoNodesCyclic) {
  expectShmReadMatchesExchange(cyclicNodes(4, 2), 1);
}

// Without shm to the local peers it falls back to the exchange, bits and bytes alike.
TEST(QgzShmRead, OverUcxItIsTheExchange) {
  RankSetup s = oneNode(2);
  auto exchange = qgzRuns(s, "two_hop", "ucx");
  auto read = qgzRuns(s, "two_hop_shm_read", "ucx");
  for (int r = 0; r < s.nranks; ++r) {
    EXPECT_TRUE(read[r].out == exchange[r].out) << "rank " << r;
    EXPECT_EQ(read[r].bytes.intraSent, exchange[r].bytes.intraSent) << "rank " << r;
  }
}

// ---- hpZ's node stage read in place ---------------------------------------------------------

struct HpzRun {
  std::vector<float> forward, backward;
  PathBytes bytes;
};

// hpZ forward (INT8 rail) and backward, with the node stage forced to `forward` / `backward`.
std::vector<HpzRun> hpzRuns(const RankSetup& s, const char* forward, const char* backward) {
  ScopedEnv fwd("ZCOLL_ALGO_ALLGATHER_HIER", forward);
  ScopedEnv bwd("ZCOLL_ALGO_ALLGATHER_FROM_SECONDARY", backward);
  const size_t count = 30001;  // odd, and over the eager limit
  std::vector<HpzRun> runs(s.nranks);
  runRanks(s, [&](int rank, zcollComm_t comm) {
    HpzRun& r = runs[rank];
    std::vector<float> send(count);
    for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>((i * 7 + rank * 13) % 101) - 50.f;
    size_t secCount = 0;
    ZCOLL_EXPECT_OK(comm, zcollSecondaryShardCount(comm, count, &secCount));
    std::vector<float> secondary(secCount);
    r.forward.assign(count * s.nranks, 0.f);
    r.backward.assign(count * s.nranks, 0.f);
    zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
    q.bits = 8;
    ZCOLL_EXPECT_OK(comm, zcollCommResetStats(comm));
    ZCOLL_EXPECT_OK(comm, zcollAllGatherHier(send.data(), r.forward.data(), secondary.data(),
                                             count, zcollFloat32, &q, comm, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollAllGatherFromSecondary(secondary.data(), r.backward.data(), count,
                                                      zcollFloat32, comm, nullptr));
    r.bytes = pathBytes(comm);
  });
  return runs;
}

// Same results as the exchange, the same shard bytes (read instead of sent) plus a published
// buffer and a 1-byte token per local peer and call; nothing more between nodes.
TEST(HpzShmRead, SameResultsAndBytesAsTheExchange) {
  for (Placement placement : {Placement::kContiguous, Placement::kCyclic}) {
    RankSetup s = cyclicNodes(6, 2);
    s.placement = placement;
    auto exchange = hpzRuns(s, "rail_then_node", "node");
    auto read = hpzRuns(s, "rail_then_node_shm_read", "node_shm_read");
    for (int r = 0; r < s.nranks; ++r) {
      ASSERT_FALSE(read[r].forward.empty());
      EXPECT_TRUE(read[r].forward == exchange[r].forward) << "rank " << r;
      EXPECT_TRUE(read[r].backward == exchange[r].backward) << "rank " << r;
      EXPECT_TRUE(read[r].backward == read[r].forward) << "rank " << r;
      EXPECT_EQ(read[r].bytes.intraSent, exchange[r].bytes.intraSent + 2 * 2 * kNotices)
          << "rank " << r;
      EXPECT_EQ(read[r].bytes.intraRecv, exchange[r].bytes.intraRecv + 2 * 2 * kNotices)
          << "rank " << r;
      EXPECT_EQ(read[r].bytes.interSent, exchange[r].bytes.interSent) << "rank " << r;
    }
  }
}

// ---- Short of shared memory: a clear error, never a SIGBUS ----------------------------------

// RLIMIT_FSIZE caps how far this process may size a memfd (ftruncate and fallocate fail with
// EFBIG; SIGXFSZ is ignored meanwhile), standing in for a machine without the memory: every
// reservation must fail with a message before anything maps memory that is not there.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    oldHandler_ = std::signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &saved_);
    rlimit r = saved_;
    r.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &r);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, oldHandler_);
  }

 private:
  rlimit saved_{};
  void (*oldHandler_)(int) = SIG_DFL;
};

TEST(ShmMemory, ASegmentThatCannotBeReservedFailsInitOnEveryRank) {
  ScopedEnv shmOnly("ZCOLL_TRANSPORT", "shm");
  FileSizeLimit limit(shm::segmentBytes(2) / 2);
  zcollUniqueId id;
  ASSERT_EQ(zcollGetUniqueId(&id), zcollSuccess);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      zcollConfig_t config = ZCOLL_CONFIG_INITIALIZER;
      config.timeoutSec = 20;
      zcollComm_t comm = nullptr;
      EXPECT_FAILS_WITH(nullptr, zcollSystemError, "cannot reserve",
                        zcollCommInitRankConfig(&comm, 2, id, r, &config));
      EXPECT_EQ(comm, nullptr);
    });
  for (std::thread& t : ranks) t.join();
}

// qgZ's window grows with the call. Rank 0's is grown beforehand, so only rank 1 cannot grow
// its own: rank 1 fails with the reason, rank 0 (waiting for rank 1's window reference) learns
// at once rather than at its timeout, and the comm is broken on both.
TEST(ShmMemory, AWindowThatCannotGrowOnOneRankFailsTheCallOnEveryRank) {
  ScopedEnv shmOnly("ZCOLL_TRANSPORT", "shm");
  ScopedEnv force("ZCOLL_ALGO_QUANTIZED_REDUCESCATTER", "two_hop_shm_read");
  RankSetup s = oneNode(2);
  s.timeoutSec = 60;
  std::unique_ptr<FileSizeLimit> limit;
  runRanks(s, [&](int rank, zcollComm_t comm) {
    if (rank == 0) {
      char* base = nullptr;
      ExposedRange ref;
      ASSERT_EQ(shmOf(comm)->peerMemory()->ownWindow(size_t(32) << 20, &base, &ref), zcollSuccess);
    }
    ZCOLL_EXPECT_OK(comm, zcollBarrier(comm, nullptr));
    if (rank == 0) limit = std::make_unique<FileSizeLimit>(4u << 20);  // a window of 8 MiB: no
    ZCOLL_EXPECT_OK(comm, zcollBarrier(comm, nullptr));
    zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
    q.pipelineDepth = 1;
    const size_t count = size_t(4) << 20;  // 2 x Q(4M elements) ~ 4.1 MiB per region
    std::vector<uint16_t> in(2 * count, 0x3c00), out(count);
    auto start = std::chrono::steady_clock::now();
    if (rank == 1)
      EXPECT_FAILS_WITH(comm, zcollSystemError, "shm window: cannot reserve",
                        zcollQuantizedReduceScatter(in.data(), out.data(), count, zcollBfloat16,
                                                    zcollSum, &q, comm, nullptr));
    else
      EXPECT_FAILS_WITH(comm, zcollRemoteError, "rank 1",
                        zcollQuantizedReduceScatter(in.data(), out.data(), count, zcollBfloat16,
                                                    zcollSum, &q, comm, nullptr));
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    EXPECT_NE(zcollBarrier(comm, nullptr), zcollSuccess);  // the comm is broken
  });
  limit.reset();
}

// ---- Registered host memory (zcollMemAllocHost): peers map it and read it with loads -------

TEST(HostMemory, AllocAndFreeValidateTheirArguments) {
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "ptr is NULL", zcollMemAllocHost(nullptr, 64));
  EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "size is 0", zcollMemAllocHost(&p, 0));
  EXPECT_EQ(p, nullptr);
  EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "too large", zcollMemAllocHost(&p, SIZE_MAX));
  ASSERT_EQ(zcollMemAllocHost(&p, 5000), zcollSuccess);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  const std::vector<uint8_t> zeros(8192, 0);
  EXPECT_EQ(std::memcmp(p, zeros.data(), 8192), 0);  // zero-filled, whole pages
  std::memset(p, 7, 5000);
  EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "was not returned by zcollMemAllocHost",
                    zcollMemFreeHost(static_cast<char*>(p) + 8));
  int onStack = 0;
  EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "was not returned", zcollMemFreeHost(&onStack));
  EXPECT_EQ(zcollMemFreeHost(p), zcollSuccess);
  EXPECT_FAILS_WITH(nullptr, zcollInvalidArgument, "freed already", zcollMemFreeHost(p));
  EXPECT_EQ(zcollMemFreeHost(nullptr), zcollSuccess);
}

TEST(HostMemory, MemoryTheMachineCannotReserveFailsTheAllocationWithAMessage) {
  FileSizeLimit limit(1 << 20);
  void* p = nullptr;
  EXPECT_FAILS_WITH(nullptr, zcollSystemError, "cannot reserve 4194304 bytes of shared memory",
                    zcollMemAllocHost(&p, 4 << 20));
  EXPECT_EQ(p, nullptr);
}

TEST(HostMemory, ABufferIsRegisteredOnlyWhenOneAllocationHoldsAllOfIt) {
  char* a = nullptr;
  ASSERT_EQ(zcollMemAllocHost(reinterpret_cast<void**>(&a), 10000), zcollSuccess);
  const size_t whole = 12288;  // 3 pages
  EXPECT_EQ(shm::findHostMemory(a, whole).offset, 0u);
  EXPECT_GE(shm::findHostMemory(a, whole).fd, 0);
  EXPECT_EQ(shm::findHostMemory(a + 4100, 100).offset, 4100u);
  EXPECT_LT(shm::findHostMemory(a + 4100, whole).fd, 0);  // runs past the end
  EXPECT_LT(shm::findHostMemory(a + whole, 1).fd, 0);
  std::vector<char> ordinary(100);
  EXPECT_LT(shm::findHostMemory(ordinary.data(), 100).fd, 0);
  ASSERT_EQ(zcollMemFreeHost(a), zcollSuccess);
  EXPECT_LT(shm::findHostMemory(a, 1).fd, 0);  // forgotten once freed
}

TEST(HostMemory, APeerViewShowsTheBytesAtItsOffsetAndRefusesMore) {
  char* a = nullptr;
  ASSERT_EQ(zcollMemAllocHost(reinterpret_cast<void**>(&a), 3 * 4096), zcollSuccess);
  for (int i = 0; i < 3 * 4096; ++i) a[i] = static_cast<char>(i * 7 + 3);
  shm::RegionRef ref = shm::findHostMemory(a + 5001, 7000);
  shm::PeerRegions regions;
  std::shared_ptr<const shm::PeerMapping> held;
  const char* at = nullptr;
  ASSERT_EQ(regions.view(getpid(), ref, 7000, false, &held, &at), zcollSuccess)
      << zcollGetLastError(nullptr);
  ASSERT_NE(at, nullptr);
  EXPECT_NE(at, a + 5001);  // a second mapping of the same memory
  EXPECT_EQ(std::memcmp(at, a + 5001, 7000), 0);
  a[6000] = 42;  // shared: the mapping sees later writes
  EXPECT_EQ(at[999], 42);
  EXPECT_FAILS_WITH(nullptr, zcollRemoteError, "smaller",
                    regions.view(getpid(), ref, 3 * 4096, false, &held, &at));
  ASSERT_EQ(zcollMemFreeHost(a), zcollSuccess);
}

// The inode of the memfd mapped at `p` in this process (from /proc/self/maps), 0 if none.
unsigned long inodeMappedAt(const void* p) {
  std::ifstream maps("/proc/self/maps");
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  for (std::string line; std::getline(maps, line);) {
    unsigned long lo = 0, hi = 0, inode = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx %*s %*s %*s %lu", &lo, &hi, &inode) == 3 && lo <= at &&
        at < hi)
      return inode;
  }
  return 0;
}

// How many mappings of inode `inode` this process has.
int mappingsOf(unsigned long inode) {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) {
    unsigned long ino = 0;
    if (std::sscanf(line.c_str(), "%*s %*s %*s %*s %lu", &ino) == 1 && ino == inode) ++n;
  }
  return n;
}

TEST(HostMemory, APeerMapsAnAllocationOnceAndDropsItAfterTheOwnerFreesOne) {
  shm::PeerRegions regions;
  std::shared_ptr<const shm::PeerMapping> held;
  const char *first = nullptr, *again = nullptr;
  char* a = nullptr;
  ASSERT_EQ(zcollMemAllocHost(reinterpret_cast<void**>(&a), 8192), zcollSuccess);
  const unsigned long inodeA = inodeMappedAt(a);
  ASSERT_NE(inodeA, 0u);
  std::memset(a, 1, 8192);
  ASSERT_EQ(regions.view(getpid(), shm::findHostMemory(a, 8192), 8192, false, &held, &first), 0);
  ASSERT_EQ(regions.view(getpid(), shm::findHostMemory(a + 4096, 10), 10, false, &held, &again),
            0);
  EXPECT_EQ(again, first + 4096);  // the same mapping: no new one
  EXPECT_EQ(regions.mapped(), 1u);
  EXPECT_EQ(mappingsOf(inodeA), 2);  // the owner's and the peer's
  held.reset();

  // Freed and replaced: likely the same descriptor number, perhaps the same address.
  ASSERT_EQ(zcollMemFreeHost(a), zcollSuccess);
  EXPECT_EQ(mappingsOf(inodeA), 1) << "the peer's kept mapping holds the freed pages until its "
                                      "next view of the owner";
  char* b = nullptr;
  ASSERT_EQ(zcollMemAllocHost(reinterpret_cast<void**>(&b), 8192), zcollSuccess);
  std::memset(b, 2, 8192);
  const char* viewB = nullptr;
  ASSERT_EQ(regions.view(getpid(), shm::findHostMemory(b, 8192), 8192, false, &held, &viewB), 0);
  EXPECT_EQ(viewB[0], 2) << "read through the freed allocation's mapping";
  EXPECT_EQ(viewB[8191], 2);
  EXPECT_EQ(mappingsOf(inodeA), 0) << "the freed allocation is still mapped";
  EXPECT_EQ(regions.kept(), 1u);
  EXPECT_EQ(regions.mapped(), 2u);
  ASSERT_EQ(zcollMemFreeHost(b), zcollSuccess);
}

TEST(HostMemory, AnOrdinaryBuffersCountOfFreesDropsTheFreedMappingToo) {
  shm::PeerRegions regions;
  char* a = nullptr;
  ASSERT_EQ(zcollMemAllocHost(reinterpret_cast<void**>(&a), 4096), zcollSuccess);
  const unsigned long inodeA = inodeMappedAt(a);
  std::shared_ptr<const shm::PeerMapping> held;
  const char* at = nullptr;
  ASSERT_EQ(regions.view(getpid(), shm::findHostMemory(a, 4096), 4096, false, &held, &at), 0);
  held.reset();
  ASSERT_EQ(zcollMemFreeHost(a), zcollSuccess);
  std::vector<char> ordinary(64);
  const shm::RegionRef plain = shm::findHostMemory(ordinary.data(), 64);
  ASSERT_LT(plain.fd, 0);
  regions.noteFrees(getpid(), plain.frees);
  EXPECT_EQ(regions.kept(), 0u);
  EXPECT_EQ(mappingsOf(inodeA), 0);
}

TEST(HostMemory, AWritableViewWritesTheOwnersMemoryAndReplacesAReadOnlyOne) {
  shm::PeerRegions regions;
  char* a = nullptr;
  ASSERT_EQ(zcollMemAllocHost(reinterpret_cast<void**>(&a), 4096), zcollSuccess);
  std::shared_ptr<const shm::PeerMapping> readOnly, writable;
  const char* at = nullptr;
  ASSERT_EQ(regions.view(getpid(), shm::findHostMemory(a, 4096), 4096, false, &readOnly, &at), 0);
  EXPECT_EQ(readOnly->writableBase(), nullptr);
  ASSERT_EQ(regions.view(getpid(), shm::findHostMemory(a, 4096), 4096, true, &writable, &at), 0);
  ASSERT_NE(writable->writableBase(), nullptr);
  writable->writableBase()[100] = 9;
  EXPECT_EQ(a[100], 9);
  EXPECT_EQ(readOnly->base()[100], 9);  // the replaced mapping lives on with its holder
  EXPECT_EQ(regions.mapped(), 2u);
  EXPECT_EQ(regions.kept(), 1u);
  ASSERT_EQ(regions.view(getpid(), shm::findHostMemory(a, 4096), 4096, false, &readOnly, &at), 0);
  EXPECT_EQ(regions.mapped(), 2u);  // a writable mapping serves readers too
  ASSERT_EQ(zcollMemFreeHost(a), zcollSuccess);
}

TEST(HostMemory, AViewHeldByACallOutlivesItsDropFromTheCache) {
  shm::PeerRegions regions;
  char *a = nullptr, *b = nullptr;
  ASSERT_EQ(zcollMemAllocHost(reinterpret_cast<void**>(&a), 4096), zcollSuccess);
  ASSERT_EQ(zcollMemAllocHost(reinterpret_cast<void**>(&b), 4096), zcollSuccess);
  std::memset(a, 7, 4096);
  std::shared_ptr<const shm::PeerMapping> heldA, heldB;
  const char *viewA = nullptr, *viewB = nullptr;
  ASSERT_EQ(regions.view(getpid(), shm::findHostMemory(a, 4096), 4096, false, &heldA, &viewA), 0);
  char* c = nullptr;  // a free elsewhere in the owner, mid-call: the cache drops a's mapping
  ASSERT_EQ(zcollMemAllocHost(reinterpret_cast<void**>(&c), 4096), zcollSuccess);
  ASSERT_EQ(zcollMemFreeHost(c), zcollSuccess);
  ASSERT_EQ(regions.view(getpid(), shm::findHostMemory(b, 4096), 4096, false, &heldB, &viewB), 0);
  EXPECT_EQ(regions.kept(), 1u);
  EXPECT_EQ(viewA[4095], 7);  // still mapped: the call holds it
  ASSERT_EQ(zcollMemFreeHost(a), zcollSuccess);
  ASSERT_EQ(zcollMemFreeHost(b), zcollSuccess);
}

TEST(HostMemory, APeerKeepsAtMostItsBoundOfMappingsPerOwner) {
  shm::PeerRegions regions;
  std::vector<void*> allocations(shm::PeerRegions::kMaxPerPeer + 5);
  std::shared_ptr<const shm::PeerMapping> held;
  const char* at = nullptr;
  for (void*& p : allocations) {
    ASSERT_EQ(zcollMemAllocHost(&p, 4096), zcollSuccess);
    ASSERT_EQ(regions.view(getpid(), shm::findHostMemory(p, 1), 1, false, &held, &at), 0);
  }
  EXPECT_EQ(regions.kept(), shm::PeerRegions::kMaxPerPeer);
  for (void* p : allocations) ASSERT_EQ(zcollMemFreeHost(p), zcollSuccess);
}

// Buffers for one rank: registered when `registered`, ordinary otherwise.
class RankBuffer {
 public:
  RankBuffer(size_t bytes, bool registered) : registered_(registered) {
    if (registered) {
      EXPECT_EQ(zcollMemAllocHost(&reg_, bytes), zcollSuccess);
    } else {
      ordinary_.resize(bytes);
    }
  }
  ~RankBuffer() { zcollMemFreeHost(reg_); }
  template <typename T>
  T* as() { return static_cast<T*>(registered_ ? reg_ : static_cast<void*>(ordinary_.data())); }

 private:
  bool registered_;
  void* reg_ = nullptr;
  std::vector<char> ordinary_;
};

// Every shm_read algorithm's outputs (all-gather, bf16 reduce-scatter and all-reduce, in and
// out of place, above and below the streaming-copy size), with the buffers of rank r in
// registered memory when bit r of `registeredRanks` is set.
std::vector<std::vector<uint8_t>> shmReadOutputs(int nranks, unsigned registeredRanks) {
  ScopedEnv ag("ZCOLL_ALGO_ALLGATHER", "shm_read");
  ScopedEnv rs("ZCOLL_ALGO_REDUCESCATTER", "shm_read");
  ScopedEnv ar("ZCOLL_ALGO_ALLREDUCE", "shm_read");
  std::vector<std::vector<uint8_t>> outputs(nranks);
  runRanks(oneNode(nranks), [&](int rank, zcollComm_t comm) {
    const bool reg = (registeredRanks >> rank) & 1;
    for (size_t count : {size_t(7001), size_t(600000)}) {  // 14 KB and 1.2 MB per rank
      const size_t total = count * nranks;
      for (bool inPlace : {false, true}) {
        RankBuffer in(total * 2, reg), out(total * 2, reg);
        uint16_t* x = in.as<uint16_t>();
        for (size_t i = 0; i < total; ++i)
          x[i] = static_cast<uint16_t>(0x3c00 + ((i * 2654435761u + rank * 97u) % 0x0900)) |
                 static_cast<uint16_t>((i + rank) % 3 == 0 ? 0x8000 : 0);
        auto keep = [&](const uint16_t* p, size_t n) {
          const uint8_t* b = reinterpret_cast<const uint8_t*>(p);
          outputs[rank].insert(outputs[rank].end(), b, b + n * 2);
        };
        uint16_t* y = out.as<uint16_t>();
        uint16_t* mine = inPlace ? x + rank * count : y;
        ZCOLL_EXPECT_OK(comm, zcollReduceScatter(x, mine, count, zcollBfloat16, zcollSum, comm,
                                                 nullptr));
        keep(mine, count);
        ZCOLL_EXPECT_OK(comm, zcollAllReduce(x, inPlace ? x : y, total, zcollBfloat16, zcollSum,
                                             comm, nullptr));
        keep(inPlace ? x : y, total);
        uint16_t* gathered = inPlace ? x : y;
        ZCOLL_EXPECT_OK(comm, zcollAllGather(inPlace ? x + rank * count : x + 5, gathered, count,
                                             zcollBfloat16, comm, nullptr));
        keep(gathered, total);
      }
    }
  });
  return outputs;
}

TEST(ShmRead, RegisteredBuffersGiveTheSameBitsAsOrdinaryOnes) {
  const int w = 3;
  auto ordinary = shmReadOutputs(w, 0);
  auto registered = shmReadOutputs(w, 0b111);
  auto mixed = shmReadOutputs(w, 0b101);
  for (int r = 0; r < w; ++r) {
    ASSERT_FALSE(ordinary[r].empty());
    EXPECT_TRUE(registered[r] == ordinary[r]) << "rank " << r;
    EXPECT_TRUE(mixed[r] == ordinary[r]) << "rank " << r;
  }
}

// Float all-reduce and reduce-scatter over shm_read at 4 ranks give the rank-order reduction's
// exact bits, ((x0 op x1) op x2) op x3 in float, for every op that reduces in the output (sum,
// prod, max, min) and for avg (through the accumulator), in and out of place (in place, ranks 2
// and 3 own a chunk of an input that is also their output), on registered buffers (written into
// every output) and ordinary ones (gathered).
TEST(ShmRead, FloatReductionsHaveTheRankOrderBitsInAndOutOfPlace) {
  ScopedEnv ar("ZCOLL_ALGO_ALLREDUCE", "shm_read");
  ScopedEnv rs("ZCOLL_ALGO_REDUCESCATTER", "shm_read");
  const int w = 4;
  const size_t count = 4 * 40000 + 3;  // uneven chunks, several 128 KiB pieces each
  auto value = [](int rank, size_t i) {
    const float mag = static_cast<float>(1u << ((i * 7 + rank * 3) % 23));
    return (((i * 2654435761u + rank * 97u) % 1000) / 997.0f - 0.4f) * mag;
  };
  for (zcollRedOp_t op : {zcollSum, zcollProd, zcollMax, zcollMin, zcollAvg}) {
    std::vector<float> want(count);
    for (size_t i = 0; i < count; ++i) {
      float acc = value(0, i);
      for (int r = 1; r < w; ++r) {
        const float x = value(r, i);
        switch (op) {
          case zcollProd: acc = acc * x; break;
          case zcollMax: acc = std::max(acc, x); break;
          case zcollMin: acc = std::min(acc, x); break;
          default: acc = acc + x; break;
        }
      }
      want[i] = op == zcollAvg ? acc / static_cast<float>(w) : acc;
    }
    for (bool reg : {false, true}) {
      runRanks(oneNode(w), [&](int rank, zcollComm_t comm) {
        for (bool inPlace : {false, true}) {
          RankBuffer in(count * 4, reg), out(count * 4, reg);
          float* x = in.as<float>();
          for (size_t i = 0; i < count; ++i) x[i] = value(rank, i);
          float* y = inPlace ? x : out.as<float>();
          ZCOLL_EXPECT_OK(comm, zcollAllReduce(x, y, count, zcollFloat32, op, comm, nullptr));
          EXPECT_EQ(std::memcmp(y, want.data(), count * 4), 0)
              << "all-reduce, op " << op << (reg ? ", registered" : "") << (inPlace ? ", in place" : "")
              << ", rank " << rank;
          const size_t n = count / w;
          for (size_t i = 0; i < count; ++i) x[i] = value(rank, i);
          float* mine = inPlace ? x + rank * n : out.as<float>();
          ZCOLL_EXPECT_OK(comm, zcollReduceScatter(x, mine, n, zcollFloat32, op, comm, nullptr));
          EXPECT_EQ(std::memcmp(mine, want.data() + rank * n, n * 4), 0)
              << "reduce-scatter, op " << op << (reg ? ", registered" : "")
              << (inPlace ? ", in place" : "") << ", rank " << rank;
        }
      });
    }
  }
}

TEST(ShmRead, RegisteredBuffersAreMappedOnceAcrossCallsAndSeeNewBytes) {
  ScopedEnv ag("ZCOLL_ALGO_ALLGATHER", "shm_read");
  const int w = 3;
  const size_t count = 50000;
  runRanks(oneNode(w), [&](int rank, zcollComm_t comm) {
    RankBuffer in(count * 4, true), out(count * 4 * w, true);
    uint64_t mappedAfterFirst = 0;
    for (int call = 0; call < 4; ++call) {
      for (size_t i = 0; i < count; ++i) in.as<int32_t>()[i] = int32_t(i * 31 + rank * 7 + call);
      ZCOLL_EXPECT_OK(comm, zcollAllGather(in.as<int32_t>(), out.as<int32_t>(), count, zcollInt32,
                                           comm, nullptr));
      for (int r = 0; r < w; ++r)
        for (size_t i : {size_t(0), count / 2, count - 1})
          ASSERT_EQ(out.as<int32_t>()[r * count + i], int32_t(i * 31 + r * 7 + call))
              << "call " << call << " rank " << r << " element " << i;
      const uint64_t mapped = shmOf(comm)->peerRegions().mapped();
      if (call == 0) mappedAfterFirst = mapped;
      EXPECT_EQ(mapped, mappedAfterFirst) << "call " << call << " mapped its peers' buffers again";
    }
    EXPECT_GT(mappedAfterFirst, 0u);
  });
}

TEST(ShmRead, AllGatherHasTheRingsResult) {
  const int w = 3;
  const size_t count = 300001;  // over the streaming-copy size per block
  std::vector<std::vector<float>> got[2];
  for (int algo = 0; algo < 2; ++algo) {
    ScopedEnv force("ZCOLL_ALGO_ALLGATHER", algo == 0 ? "ring" : "shm_read");
    got[algo].resize(w);
    runRanks(oneNode(w), [&](int rank, zcollComm_t comm) {
      RankBuffer in(count * 4, rank == 1);
      float* x = in.as<float>();
      for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>(i % 977) * 0.5f + rank;
      got[algo][rank].assign(count * w, -1.f);
      ZCOLL_EXPECT_OK(comm, zcollAllGather(x, got[algo][rank].data(), count, zcollFloat32, comm,
                                           nullptr));
    });
  }
  for (int r = 0; r < w; ++r) {
    EXPECT_TRUE(got[1][r] == got[0][r]) << "rank " << r;
    EXPECT_EQ(got[1][r][2 * count + 5], 5 * 0.5f + 2) << "rank " << r;
  }
}

// hpZ's backward reading registered secondary shards in place: the exchange's result.
TEST(HpzShmRead, ARegisteredSecondaryGivesTheSameResult) {
  RankSetup s = cyclicNodes(4, 2);
  const size_t count = 300001;
  std::vector<std::vector<float>> got[2];
  for (int algo = 0; algo < 2; ++algo) {
    ScopedEnv bwd("ZCOLL_ALGO_ALLGATHER_FROM_SECONDARY", algo == 0 ? "node" : "node_shm_read");
    got[algo].resize(s.nranks);
    runRanks(s, [&](int rank, zcollComm_t comm) {
      size_t secCount = 0;
      ZCOLL_EXPECT_OK(comm, zcollSecondaryShardCount(comm, count, &secCount));
      RankBuffer sec(secCount * 4, true);
      std::vector<float> send(count), out(count * s.nranks);
      for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>((i * 7 + rank) % 101);
      ZCOLL_EXPECT_OK(comm, zcollAllGatherHier(send.data(), out.data(), sec.as<float>(), count,
                                               zcollFloat32, nullptr, comm, nullptr));
      got[algo][rank].assign(count * s.nranks, -1.f);
      ZCOLL_EXPECT_OK(comm, zcollAllGatherFromSecondary(sec.as<float>(), got[algo][rank].data(),
                                                        count, zcollFloat32, comm, nullptr));
      EXPECT_TRUE(got[algo][rank] == out) << "rank " << rank;
    });
  }
  for (int r = 0; r < s.nranks; ++r) EXPECT_TRUE(got[1][r] == got[0][r]) << "rank " << r;
}

// ---- Every collective, same bits over every transport -------------------------------------

// Runs every collective once on `comm` and appends all their outputs to `out`.
void runEveryCollective(int rank, zcollComm_t comm, std::vector<uint8_t>* out) {
  int n = 0;
  zcollCommCount(comm, &n);
  const size_t count = 20000;  // 80000-byte float pieces: rendezvous over shm
  auto input = [&](size_t elems, int salt) {
    std::vector<float> v(elems);
    for (size_t i = 0; i < elems; ++i)
      v[i] = static_cast<float>((i * 7 + salt * 13) % 101) * 0.37f - 17.f + 0.001f * rank;
    return v;
  };
  auto keep = [&](const std::vector<float>& v) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(v.data());
    out->insert(out->end(), p, p + v.size() * sizeof(float));
  };
  std::vector<float> send = input(count * n, 1), recv(count * n);
  ZCOLL_EXPECT_OK(comm, zcollAllGather(send.data(), recv.data(), count, zcollFloat32, comm, nullptr));
  keep(recv);
  std::vector<float> shard(count);
  ZCOLL_EXPECT_OK(comm, zcollReduceScatter(send.data(), shard.data(), count, zcollFloat32,
                                           zcollSum, comm, nullptr));
  keep(shard);
  ZCOLL_EXPECT_OK(comm, zcollAllReduce(send.data(), recv.data(), count * n, zcollFloat32, zcollSum,
                                       comm, nullptr));
  keep(recv);
  ZCOLL_EXPECT_OK(comm, zcollAllToAll(send.data(), recv.data(), count, zcollFloat32, comm, nullptr));
  keep(recv);
  std::vector<float> root = input(count, 2);
  ZCOLL_EXPECT_OK(comm, zcollBroadcast(root.data(), root.data(), count, zcollFloat32, n - 1, comm,
                                       nullptr));
  keep(root);
  zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
  q.bits = 8;
  ZCOLL_EXPECT_OK(comm, zcollQuantizedAllGather(send.data(), recv.data(), count, zcollFloat32, &q,
                                                comm, nullptr));
  keep(recv);
  size_t secCount = 0;
  ZCOLL_EXPECT_OK(comm, zcollSecondaryShardCount(comm, count, &secCount));
  std::vector<float> secondary(secCount), again(count * n);
  ZCOLL_EXPECT_OK(comm, zcollAllGatherHier(send.data(), recv.data(), secondary.data(), count,
                                           zcollFloat32, &q, comm, nullptr));
  keep(recv);
  ZCOLL_EXPECT_OK(comm, zcollAllGatherFromSecondary(secondary.data(), again.data(), count,
                                                    zcollFloat32, comm, nullptr));
  keep(again);
  zcollQuantConfig_t g = ZCOLL_QUANT_CONFIG_INITIALIZER;
  ZCOLL_EXPECT_OK(comm, zcollQuantizedReduceScatter(send.data(), shard.data(), count, zcollFloat32,
                                                    zcollSum, &g, comm, nullptr));
  keep(shard);
}

// Per rank, the outputs of runEveryCollective under `transport` ("" = chosen per peer).
std::vector<std::vector<uint8_t>> outputsOver(const RankSetup& s, const char* transport) {
  ScopedEnv forced("ZCOLL_TRANSPORT", transport);
  std::vector<std::vector<uint8_t>> outputs(s.nranks);
  runRanks(s, [&](int rank, zcollComm_t comm) { runEveryCollective(rank, comm, &outputs[rank]); });
  return outputs;
}

TEST(ShmCollectives, SameBitsOverShmAndUcxOnOneNode) {
  RankSetup s = oneNode(4);
  auto shm = outputsOver(s, "shm");
  auto ucx = outputsOver(s, "ucx");
  for (int r = 0; r < s.nranks; ++r) {
    ASSERT_FALSE(shm[r].empty());
    EXPECT_TRUE(shm[r] == ucx[r]) << "rank " << r;
  }
}

// Emulated 2x2 nodes, ranks not node-contiguous: local peers over shm, the others over ucx.
TEST(ShmCollectives, SameBitsMixedAndUcxOnTwoNodesCyclic) {
  RankSetup s = cyclicNodes(4, 2);
  auto mixed = outputsOver(s, "");
  auto ucx = outputsOver(s, "ucx");
  for (int r = 0; r < s.nranks; ++r) {
    ASSERT_FALSE(mixed[r].empty());
    EXPECT_TRUE(mixed[r] == ucx[r]) << "rank " << r;
  }
}

}  // namespace
}  // namespace zcoll::test
