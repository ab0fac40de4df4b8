// qwZ (zcollQuantizedAllGather) and hpZ (zcollAllGatherHier, zcollAllGatherFromSecondary) over
// real transports, ranks as threads on emulated nodes: layouts 1x1, 1x4, 4x1, 2x2, 2x3, 3x2 and
// a cyclic (non node-contiguous) placement; fp32/fp16/bf16; INT8/INT4; symmetric/asymmetric;
// nearest/stochastic rounding; counts 0, 1, odd, ~1M; in place and out of place.
// Checks: the documented per-element bound against an fp64 reference, identical bits on every
// rank and run to run, hpZ forward == backward, hpZ exact == zcollAllGather, hpZ quantized ==
// qwZ, inter-node byte counters equal the formulas of docs/ZEROPP.md, and bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "support/ranks.h"
#include "support/values.h"
#include "support/wire_notices.h"

using namespace zcoll::test;

namespace {

// ---- Inputs and the fp64 reference ----------------------------------------------------------

uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Seeded values in [-1, 1) times a per-block magnitude (2^-6 .. 2^6); every 7th block is zero.
double inputValue(int rank, size_t i) {
  uint64_t h = mix((uint64_t(rank) << 40) ^ i);
  size_t block = i / 64;
  if (block % 7 == 3) return 0.0;
  double mag = std::ldexp(1.0, int(mix(block * 131 + rank) % 13) - 6);
  return mag * (double(h >> 11) * 0x1.0p-53 * 2 - 1);
}

void fillShard(void* buf, zcollDataType_t t, int rank, size_t count) {
  for (size_t i = 0; i < count; ++i) setElement(buf, t, i, inputValue(rank, i));
}

// Relative half-ulp of the output dtype.
double dtypeEps(zcollDataType_t t) {
  return t == zcollBfloat16 ? 0x1p-8 : t == zcollFloat16 ? 0x1p-11 : 0x1p-24;
}

struct Quant {
  int bits = 8;
  int blockSize = 256;
  bool symmetric = true;
  bool stochastic = false;
  unsigned long long seed = 0;

  zcollQuantConfig_t config() const {
    zcollQuantConfig_t c = ZCOLL_QUANT_CONFIG_INITIALIZER;
    c.bits = bits;
    c.blockSize = blockSize;
    c.mode = symmetric ? zcollQuantSymmetric : zcollQuantAsymmetric;
    c.rounding = stochastic ? zcollRoundStochastic : zcollRoundNearestEven;
    c.seed = seed;
    return c;
  }
  // Bytes of one quantized shard: Q(C) of docs/ZEROPP.md.
  size_t wireBytes(size_t n) const { return documentedWireBytes(n, blockSize, bits, symmetric); }
};

// Counts elements of rank r's shard (as read back from `got`) outside the documented bound:
// |x - x'| <= scale/2 (scale for stochastic rounding) + fp32 slack + output dtype rounding.
size_t countOutOfBound(const void* got, zcollDataType_t t, int rank, size_t count, size_t first,
                       const Quant& q) {
  const double levels = q.symmetric ? std::ldexp(1.0, q.bits - 1) - 1 : std::ldexp(1.0, q.bits) - 1;
  auto x = makeBuffer(t, count);
  fillShard(x.data(), t, rank, count);
  size_t bad = 0;
  for (size_t b0 = 0; b0 < count; b0 += q.blockSize) {
    size_t b1 = std::min(count, b0 + q.blockSize);
    double lo = 0, hi = 0, absmax = 0;
    for (size_t i = b0; i < b1; ++i) {
      double v = getElement(x.data(), t, i);
      lo = i == b0 ? v : std::min(lo, v);
      hi = i == b0 ? v : std::max(hi, v);
      absmax = std::max(absmax, std::fabs(v));
    }
    double scale = (q.symmetric ? absmax : hi - lo) / levels;
    double allowed = scale * (q.stochastic ? 1.0 : 0.5) * (1 + 1e-5);
    for (size_t i = b0; i < b1; ++i) {
      double v = getElement(x.data(), t, i), w = getElement(got, t, first + i);
      double tol = allowed + dtypeEps(t) * (std::fabs(v) + scale) + 1e-30;
      bad += !(std::fabs(v - w) <= tol);
    }
  }
  return bad;
}

// ---- Helpers over ranks ---------------------------------------------------------------------

uint64_t hashBytes(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
  return h;
}

// True when `buf` holds the same bytes on every rank.
bool sameOnAllRanks(zcollComm_t comm, int nranks, const void* buf, size_t bytes) {
  uint64_t mine = hashBytes(buf, bytes);
  std::vector<uint64_t> all(nranks);
  EXPECT_EQ(zcollAllGather(&mine, all.data(), 1, zcollUint64, comm, nullptr), zcollSuccess);
  return std::all_of(all.begin(), all.end(), [&](uint64_t h) { return h == mine; });
}

struct Bytes {
  uint64_t inter = 0, intra = 0;
};

Bytes sentSince(zcollComm_t comm, const zcollStats_t& before) {
  zcollStats_t now{};
  now.size = sizeof(now);
  EXPECT_EQ(zcollCommGetStats(comm, &now), zcollSuccess);
  return {now.bytesSent[zcollPathInter] - before.bytesSent[zcollPathInter],
          now.bytesSent[zcollPathIntra] - before.bytesSent[zcollPathIntra]};
}

zcollStats_t statsNow(zcollComm_t comm) {
  zcollStats_t s{};
  s.size = sizeof(s);
  EXPECT_EQ(zcollCommGetStats(comm, &s), zcollSuccess);
  return s;
}

// The layout as zcoll numbers it: nodes by lowest rank, ranks ascending within a node.
struct Layout {
  std::vector<std::vector<int>> members;
  std::vector<int> nodeOf, localOf;

  explicit Layout(const RankSetup& s) : nodeOf(s.nranks), localOf(s.nranks) {
    std::vector<int> seen;  // emulated node ids in order of first rank
    for (int r = 0; r < s.nranks; ++r) {
      int host = nodeOfRank(s, r);
      auto it = std::find(seen.begin(), seen.end(), host);
      if (it == seen.end()) {
        seen.push_back(host);
        members.emplace_back();
        it = seen.end() - 1;
      }
      int m = int(it - seen.begin());
      nodeOf[r] = m;
      localOf[r] = int(members[m].size());
      members[m].push_back(r);
    }
  }
  int nodes() const { return int(members.size()); }
  int localSize() const { return int(members[0].size()); }
  // qwZ's ring successor: the next rank in node-major order.
  int ringNext(int r) const {
    std::vector<int> ring;
    for (const auto& m : members) ring.insert(ring.end(), m.begin(), m.end());
    size_t k = std::find(ring.begin(), ring.end(), r) - ring.begin();
    return ring[(k + 1) % ring.size()];
  }
};

// ---- Cases ----------------------------------------------------------------------------------

const RankSetup kCases[] = {
    {1, 1, Placement::kContiguous}, {4, 1, Placement::kContiguous},
    {4, 4, Placement::kContiguous}, {4, 2, Placement::kContiguous},
    {6, 2, Placement::kContiguous}, {6, 3, Placement::kContiguous},
    {6, 2, Placement::kCyclic},
};

const zcollDataType_t kTypes[] = {zcollFloat32, zcollFloat16, zcollBfloat16};

class ZeroppAllGather : public LayoutTest {
 protected:
  size_t largeCount() const { return (size_t(1) << 20) / GetParam().nranks + 3; }
};

// One qwZ call, checked: bound, same bits on all ranks, run to run, inter-node bytes.
// Returns the output (for comparisons with hpZ).
std::vector<unsigned char> checkQwz(const RankSetup& s, int rank, zcollComm_t comm,
                                    zcollDataType_t t, size_t count, const Quant& q,
                                    bool inPlace) {
  const int w = s.nranks;
  const size_t es = typeSize(t);
  auto recv = makeBuffer(t, count * w), own = makeBuffer(t, count);
  void* send = inPlace ? recv.data() + rank * count * es : own.data();
  zcollQuantConfig_t cfg = q.config();
  std::vector<unsigned char> first;
  for (int run = 0; run < 2; ++run) {
    fillShard(send, t, rank, count);
    zcollStats_t before = statsNow(comm);
    ZCOLL_EXPECT_OK(comm, zcollQuantizedAllGather(send, recv.data(), count, t, &cfg, comm, nullptr));
    Bytes sent = sentSince(comm, before);
    Layout lay(s);
    bool crosses = lay.nodeOf[lay.ringNext(rank)] != lay.nodeOf[rank];
    EXPECT_EQ(sent.inter, crosses ? (w - 1) * q.wireBytes(count) : 0u) << "rank " << rank;
    EXPECT_EQ(sent.inter + sent.intra, (w - 1) * q.wireBytes(count));
    if (run == 0) first = recv;
  }
  EXPECT_EQ(first, recv) << "run to run, rank " << rank;
  EXPECT_TRUE(sameOnAllRanks(comm, w, recv.data(), recv.size())) << "rank " << rank;
  for (int r = 0; r < w; ++r)
    EXPECT_EQ(countOutOfBound(recv.data(), t, r, count, r * count, q), 0u)
        << "shard " << r << " on rank " << rank << " count " << count << " bits " << q.bits;
  return recv;
}

TEST_P(ZeroppAllGather, QuantizedAllGather) {
  runRanks(setup(), [&](int rank, zcollComm_t comm) {
    for (zcollDataType_t t : kTypes)
      for (size_t count : {size_t(0), size_t(1), size_t(13), size_t(1000)})
        for (int bits : {8, 4})
          for (bool inPlace : {false, true}) {
            SCOPED_TRACE("dtype " + std::to_string(t) + " count " + std::to_string(count));
            Quant q;
            q.bits = bits;
            q.symmetric = !inPlace || count != 1000;  // some asymmetric cases
            checkQwz(setup(), rank, comm, t, count, q, inPlace);
          }
    Quant big;
    checkQwz(setup(), rank, comm, zcollBfloat16, largeCount(), big, false);
  });
}

// qwZ's byte counters equal the documented Q(C) in both modes, for block counts that are not
// multiples of 4 (where padding the scale and zero sections separately matters).
TEST_P(ZeroppAllGather, AsymmetricAndSymmetricBytesFollowTheFormula) {
  runRanks(setup(), [&](int rank, zcollComm_t comm) {
    for (bool symmetric : {false, true})
      for (size_t count : {size_t(100), size_t(300), size_t(700), size_t(1200), size_t(1500)}) {
        Quant q;
        q.symmetric = symmetric;
        q.bits = count % 3 == 0 ? 4 : 8;
        checkQwz(setup(), rank, comm, zcollFloat32, count, q, false);
      }
  });
}

TEST_P(ZeroppAllGather, StochasticRoundingIsDeterministicPerSeed) {
  runRanks(setup(), [&](int rank, zcollComm_t comm) {
    Quant q;
    q.bits = 4;
    q.blockSize = 64;
    q.stochastic = true;
    q.seed = 7;
    auto a = checkQwz(setup(), rank, comm, zcollFloat32, 999, q, false);
    q.seed = 8;
    auto b = checkQwz(setup(), rank, comm, zcollFloat32, 999, q, true);
    EXPECT_NE(a, b) << "another seed should give other bits";
  });
}

// hpZ: one forward (Hier) and one backward (FromSecondary) call, checked. `readBytes`: what
// stage B adds per local peer (read in place: kHpzHostReadBytes; by messages: 0).
void checkHpz(const RankSetup& s, int rank, zcollComm_t comm, zcollDataType_t t, size_t count,
              const Quant* q, bool inPlace, bool userSecondary, uint64_t readBytes = 0) {
  const Layout lay(s);
  const int w = s.nranks, n = lay.nodes(), l = lay.localSize();
  const size_t es = typeSize(t);
  size_t secCount = 0;
  ZCOLL_EXPECT_OK(comm, zcollSecondaryShardCount(comm, count, &secCount));
  EXPECT_EQ(secCount, n * count);
  auto recv = makeBuffer(t, count * w), own = makeBuffer(t, count), sec = makeBuffer(t, secCount);
  void* send = inPlace ? recv.data() + rank * count * es : own.data();
  fillShard(send, t, rank, count);
  zcollQuantConfig_t cfg = q ? q->config() : zcollQuantConfig_t{};
  void* secPtr = userSecondary ? sec.data() : nullptr;
  zcollStats_t before = statsNow(comm);
  ZCOLL_EXPECT_OK(comm, zcollAllGatherHier(send, recv.data(), secPtr, count, t, q ? &cfg : nullptr,
                                           comm, nullptr));
  Bytes fwd = sentSince(comm, before);
  size_t shardWire = q ? q->wireBytes(count) : count * es;
  EXPECT_EQ(fwd.inter, (n - 1) * shardWire) << "stage A: N-1 shards per rank across nodes";
  const uint64_t stageB = count == 0 ? 0 : (l - 1) * (n * count * es + readBytes);
  EXPECT_EQ(fwd.intra, stageB) << "stage B: N shards to each local peer";
  EXPECT_TRUE(sameOnAllRanks(comm, w, recv.data(), recv.size()));
  // Reference: exact all-gather, or qwZ with the same settings (same bits: same quantizer).
  auto want = makeBuffer(t, count * w);
  if (q != nullptr) {
    want = checkQwz(s, rank, comm, t, count, *q, false);
  } else {
    fillShard(own.data(), t, rank, count);
    ZCOLL_EXPECT_OK(comm, zcollAllGather(own.data(), want.data(), count, t, comm, nullptr));
  }
  EXPECT_EQ(recv, want) << "rank " << rank << " count " << count;
  if (!userSecondary) return;
  for (int m = 0; m < n; ++m)  // the secondary holds the rail's shards in node order
    EXPECT_EQ(0, std::memcmp(sec.data() + m * count * es,
                             want.data() + lay.members[m][lay.localOf[rank]] * count * es,
                             count * es));
  auto back = makeBuffer(t, count * w);
  before = statsNow(comm);
  ZCOLL_EXPECT_OK(comm, zcollAllGatherFromSecondary(sec.data(), back.data(), count, t, comm,
                                                    nullptr));
  Bytes bwd = sentSince(comm, before);
  EXPECT_EQ(bwd.inter, 0u) << "backward sends nothing across nodes";
  EXPECT_EQ(bwd.intra, stageB);
  EXPECT_EQ(back, recv) << "forward and backward differ on rank " << rank;
}

TEST_P(ZeroppAllGather, HierarchicalAllGather) {
  runRanks(setup(), [&](int rank, zcollComm_t comm) {
    Quant int8, int4;
    int4.bits = 4;
    int4.blockSize = 32;
    for (zcollDataType_t t : kTypes)
      for (size_t count : {size_t(0), size_t(1), size_t(13), size_t(1000)})
        for (const Quant* q : std::vector<const Quant*>{nullptr, &int8, &int4})
          for (bool inPlace : {false, true}) {
            SCOPED_TRACE("dtype " + std::to_string(t) + " count " + std::to_string(count) +
                         " quant " + (q ? std::to_string(q->bits) : "none"));
            checkHpz(setup(), rank, comm, t, count, q, inPlace, !inPlace || count == 13);
          }
    checkHpz(setup(), rank, comm, zcollBfloat16, largeCount(), &int8, false, true);
  });
}

// Stage B read in place (both *_shm_read algorithms forced; every local peer is on shm): the
// shard bytes of the exchange, counted as sent by their owner, plus docs/ZEROPP.md's
// `(L-1) * 57`: a published secondary (an ExposedRange with shm's handle) and a release token
// per local peer, from the structures themselves (support/wire_notices.h).
TEST_P(ZeroppAllGather, HierarchicalReadInPlaceAddsTheDocumentedBytes) {
  ScopedEnv fwd("ZCOLL_ALGO_ALLGATHER_HIER", "rail_then_node_shm_read");
  ScopedEnv bwd("ZCOLL_ALGO_ALLGATHER_FROM_SECONDARY", "node_shm_read");
  runRanks(setup(), [&](int rank, zcollComm_t comm) {
    Quant int8;
    for (size_t count : {size_t(1), size_t(13), size_t(1000)})
      for (const Quant* q : std::vector<const Quant*>{nullptr, &int8}) {
        SCOPED_TRACE("count " + std::to_string(count) + (q ? " int8" : " exact"));
        checkHpz(setup(), rank, comm, zcollFloat32, count, q, false, true, kHpzHostReadBytes);
      }
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, ZeroppAllGather, testing::ValuesIn(kCases), layoutName);

// ---- Bad arguments --------------------------------------------------------------------------

#define EXPECT_CODE(comm, code, expr)                                                  \
  do {                                                                                 \
    zcollResult_t zr_ = (expr);                                                        \
    EXPECT_EQ(zr_, code) << #expr << ": " << zcollGetLastError(comm);                  \
    EXPECT_STRNE(zcollGetLastError(comm), "") << #expr;                                \
  } while (0)

TEST(ZeroppAllGatherArgs, BadArgumentsAndNonUniformLayout) {
  RankSetup s;
  s.nranks = 3;
  s.nodes = 2;  // 2 + 1 ranks: not uniform
  runRanks(s, [&](int rank, zcollComm_t comm) {
    const size_t c = 8;
    std::vector<float> send(c), recv(c * 3), sec(c * 2);
    float* r = recv.data();
    auto* stream = reinterpret_cast<zcollStream_t>(0x10);
    zcollQuantConfig_t bad = ZCOLL_QUANT_CONFIG_INITIALIZER;
    bad.bits = 5;
    zcollQuantConfig_t noMagic = ZCOLL_QUANT_CONFIG_INITIALIZER;
    noMagic.magic = 0;
    zcollQuantConfig_t badBlock = ZCOLL_QUANT_CONFIG_INITIALIZER;
    badBlock.blockSize = 33;
    const zcollResult_t kArg = zcollInvalidArgument;
    EXPECT_CODE(nullptr, kArg, zcollQuantizedAllGather(send.data(), r, c, zcollFloat32, nullptr,
                                                       nullptr, nullptr));
    EXPECT_CODE(comm, kArg, zcollQuantizedAllGather(nullptr, r, c, zcollFloat32, nullptr, comm,
                                                    nullptr));
    EXPECT_CODE(comm, kArg, zcollQuantizedAllGather(send.data(), nullptr, c, zcollFloat32, nullptr,
                                                    comm, nullptr));
    EXPECT_CODE(comm, kArg, zcollQuantizedAllGather(send.data(), r, c, zcollInt32, nullptr, comm,
                                                    nullptr));
    EXPECT_CODE(comm, kArg, zcollQuantizedAllGather(send.data(), r, c, zcollFloat64, nullptr, comm,
                                                    nullptr));
    for (zcollQuantConfig_t* cfg : {&bad, &noMagic, &badBlock})
      EXPECT_CODE(comm, kArg, zcollQuantizedAllGather(send.data(), r, c, zcollFloat32, cfg, comm,
                                                      nullptr));
    EXPECT_CODE(comm, kArg, zcollQuantizedAllGather(send.data(), r, c, zcollFloat32, nullptr, comm,
                                                    stream));
    EXPECT_CODE(comm, kArg, zcollQuantizedAllGather(r + 1 + rank * c, r, c, zcollFloat32, nullptr,
                                                    comm, nullptr));  // overlap, not in place
    EXPECT_CODE(comm, kArg, zcollSecondaryShardCount(comm, c, nullptr));
    EXPECT_CODE(nullptr, kArg, zcollAllGatherFromSecondary(sec.data(), r, c, zcollFloat32,
                                                           nullptr, nullptr));
    // hpZ refuses a non-uniform layout with zcollInvalidUsage; qwZ works there.
    EXPECT_CODE(comm, zcollInvalidUsage, zcollAllGatherHier(send.data(), r, sec.data(), c,
                                                            zcollFloat32, nullptr, comm, nullptr));
    EXPECT_CODE(comm, zcollInvalidUsage, zcollAllGatherFromSecondary(sec.data(), r, c,
                                                                     zcollFloat32, comm, nullptr));
    EXPECT_NE(std::string(zcollGetLastError(comm)).find("same number of ranks"), std::string::npos);
    Quant q;
    checkQwz(s, rank, comm, zcollFloat32, 77, q, false);
    // Zero elements: NULL buffers are fine.
    ZCOLL_EXPECT_OK(comm, zcollQuantizedAllGather(nullptr, nullptr, 0, zcollFloat32, nullptr, comm,
                                                  nullptr));
  });
}

TEST(ZeroppAllGatherArgs, HierBufferRules) {
  RankSetup s;
  s.nranks = 2;
  s.nodes = 2;
  runRanks(s, [&](int rank, zcollComm_t comm) {
    const size_t c = 8;
    std::vector<float> send(c), recv(c * 2), sec(c * 2);
    const zcollResult_t kArg = zcollInvalidArgument;
    float* r = recv.data();
    EXPECT_CODE(comm, kArg, zcollAllGatherHier(send.data(), r, r + 4, c, zcollFloat32, nullptr,
                                               comm, nullptr));  // secondary overlaps recv
    EXPECT_CODE(comm, kArg, zcollAllGatherHier(send.data(), r, send.data(), c, zcollFloat32,
                                               nullptr, comm, nullptr));  // ... or send
    zcollQuantConfig_t q8 = ZCOLL_QUANT_CONFIG_INITIALIZER;  // int8 cannot be quantized
    EXPECT_CODE(comm, kArg, zcollAllGatherHier(send.data(), r, sec.data(), c, zcollInt8, &q8,
                                               comm, nullptr));
    EXPECT_CODE(comm, kArg, zcollAllGatherFromSecondary(nullptr, r, c, zcollFloat32, comm,
                                                        nullptr));
    EXPECT_CODE(comm, kArg, zcollAllGatherFromSecondary(r, r, c, zcollFloat32, comm, nullptr));
    EXPECT_CODE(comm, kArg, zcollAllGatherFromSecondary(sec.data(), r, c, zcollFloat32, comm,
                                                        reinterpret_cast<zcollStream_t>(0x10)));
    // The comm is still healthy: a good call works and counts as one op.
    zcollStats_t before = statsNow(comm);
    for (size_t i = 0; i < c; ++i) send[i] = float(rank * 100 + i);
    ZCOLL_EXPECT_OK(comm, zcollAllGatherHier(send.data(), r, sec.data(), c, zcollFloat32, nullptr,
                                             comm, nullptr));
    EXPECT_EQ(statsNow(comm).opCount, before.opCount + 1);
    for (size_t i = 0; i < 2 * c; ++i) EXPECT_EQ(recv[i], float((i / c) * 100 + i % c));
  });
}

// Unquantized hpZ is exact and takes every dtype: 64-bit integers with values no float could
// carry, forward (rail + node stages) and backward (from the secondary shard).
TEST(ZeroppAllGatherArgs, UnquantizedHierTakesEveryDtype) {
  RankSetup s;
  s.nranks = 4;
  s.nodes = 2;
  s.placement = Placement::kCyclic;
  runRanks(s, [&](int rank, zcollComm_t comm) {
    const size_t c = 37;
    auto value = [](int r, size_t i) { return (int64_t{1} << 60) + int64_t(r) * 1000003 + int64_t(i); };
    std::vector<int64_t> send(c), recv(c * 4, -1), back(c * 4, -1), sec(c * 2, -1);
    for (size_t i = 0; i < c; ++i) send[i] = value(rank, i);
    ZCOLL_EXPECT_OK(comm, zcollAllGatherHier(send.data(), recv.data(), sec.data(), c, zcollInt64,
                                             nullptr, comm, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollAllGatherFromSecondary(sec.data(), back.data(), c, zcollInt64, comm,
                                                      nullptr));
    for (size_t i = 0; i < 4 * c; ++i) {
      ASSERT_EQ(recv[i], value(int(i / c), i % c)) << "rank " << rank << " element " << i;
      ASSERT_EQ(back[i], recv[i]) << "rank " << rank << " element " << i;
    }
  });
}

// A failure reported through two layers reads with one code prefix, then the function's name.
TEST(ZeroppAllGatherArgs, MessageHasOneCodePrefix) {
  RankSetup s;
  s.nranks = 1;
  runRanks(s, [&](int, zcollComm_t comm) {
    std::vector<float> x(64), y(64);
    zcollQuantConfig_t badBlock = ZCOLL_QUANT_CONFIG_INITIALIZER;
    badBlock.blockSize = 33;
    EXPECT_EQ(zcollQuantizedAllGather(x.data(), y.data(), 64, zcollFloat32, &badBlock, comm,
                                      nullptr),
              zcollInvalidArgument);
    std::string msg = zcollGetLastError(comm);
    EXPECT_EQ(msg.rfind("zcollInvalidArgument: zcollQuantizedAllGather: ", 0), 0u) << msg;
    EXPECT_EQ(msg.find("zcollInvalidArgument", 1), std::string::npos) << msg;
    EXPECT_NE(msg.find("blockSize = 33"), std::string::npos) << msg;
  });
}

}  // namespace
