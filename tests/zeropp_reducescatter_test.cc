// qgZ (zcollQuantizedReduceScatter) over real transports, ranks as threads on emulated nodes:
// layouts 1x1, 1x4, 4x1, 2x2, 2x3, 3x2, cyclic 2x3 and unequal 3-on-2 (flat fallback); counts
// 0, 1, odd, not a block multiple, ~1M in all; fp32/fp16/bf16; INT8/INT4 per hop, asymmetric,
// stochastic, pipelined; in place and out of place. Every output element is checked against an
// fp64 reference with the error bound of docs/ZEROPP.md "qgZ" composed over both hops:
//
//   |out - sum_s x_s| <= F * sum_s A_s  (+ fp32 slack + one unit of the output dtype)
//   A_s = max |x_s| over the quantization block (of the destination chunk) holding the element
//   F   = ei + (1 + ei) / (2 qe)   two hops (N > 1, L > 1)
//       = ei                       N = 1 (intra hop only, intra bits)
//       = 1/(2 qe)                 L = 1, or the flat fallback (inter bits)
//   ei = 1/(2 qi) at intraBits 4 or 8; at intraBits 16, 2^-8 for fp32 (bf16) and 0 for fp16/bf16
//   q = 2^(bits-1) - 1 (7 for INT4, 127 for INT8); stochastic rounding doubles each 1/(2q).
// intraBits 16 on one node with fp16/bf16 inputs is exact: the output equals the fp32 sum in rank
// order rounded once (checked bit for bit).
// Avg: the same bound divided by W. Also: Avg == Sum / W, determinism (run to run, and across
// pipeline depths), the byte counters against the documented formula, and bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "coll/coll.h"
#include "coll/in_place.h"
#include "transport/host_memory.h"
#include "quant/quant.h"
#include "support/qgz_reference.h"
#include "support/ranks.h"
#include "support/values.h"
#include "support/wire_notices.h"

using namespace zcoll::test;

namespace {

const RankSetup kCases[] = {
    {1, 1, Placement::kContiguous}, {4, 1, Placement::kContiguous},  // W = 1; N = 1
    {4, 4, Placement::kContiguous}, {4, 2, Placement::kContiguous},  // L = 1; 2x2
    {6, 2, Placement::kContiguous}, {6, 3, Placement::kContiguous},  // 2x3; 3x2
    {6, 2, Placement::kCyclic},     {3, 2, Placement::kContiguous},  // cyclic; unequal
};

// ---- Configurations -------------------------------------------------------------------------

struct Cfg {
  const char* name;
  bool null;  // pass NULL (defaults: INT4 both hops, block 256)
  int bits, intraBits, blockSize, mode, rounding, depth;
};

const Cfg kDefault = {"default", true, 0, 0, 0, 0, 0, 0};
const Cfg kCfgs[] = {
    kDefault,
    {"int8-intra-int4-inter", false, 4, 8, 0, zcollQuantSymmetric, zcollRoundNearestEven, 0},
    {"int8-block32-depth3", false, 8, 8, 32, zcollQuantSymmetric, zcollRoundNearestEven, 3},
    {"int4-asym-block64-depth2", false, 4, 4, 64, zcollQuantAsymmetric, zcollRoundNearestEven, 2},
    {"stochastic-int4-intra-int8-inter", false, 8, 4, 128, zcollQuantSymmetric,
     zcollRoundStochastic, 2},
    {"16bit-intra-int4-inter", false, 4, 16, 0, zcollQuantSymmetric, zcollRoundNearestEven, 0},
    {"16bit-intra-int8-asym-stochastic-depth2", false, 8, 16, 64, zcollQuantAsymmetric,
     zcollRoundStochastic, 2},
};

zcollQuantConfig_t makeConfig(const Cfg& c) {
  zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
  q.bits = c.bits;
  q.intraBits = c.intraBits;
  q.blockSize = c.blockSize;
  q.mode = c.mode;
  q.rounding = c.rounding;
  q.seed = 1234;
  q.pipelineDepth = c.depth;
  return q;
}

int interBits(const Cfg& c) { return c.bits ? c.bits : 4; }
int intraBits(const Cfg& c) { return c.intraBits ? c.intraBits : 4; }
int blockOf(const Cfg& c) { return c.blockSize ? c.blockSize : 256; }

// F of the header comment (support/qgz_reference.h).
double boundFactor(const LayoutShape& sh, const Cfg& c, zcollDataType_t t) {
  return qgzBoundFactor(sh, intraBits(c), interBits(c), c.rounding, t);
}

// ---- Inputs -----------------------------------------------------------------------------------

// Element i of rank src's input, already rounded to t. Magnitudes change every 97 elements
// (0, 0.05, 1, 4: blocks with different scales, some all zero).
double inputAt(uint64_t seed, int src, size_t i, zcollDataType_t t) {
  return seededInputAt(seed, src, i, t, 97);
}

using Call = QuantCall<Cfg>;

// Runs one call on this rank; returns the output (count elements of c.t).
std::vector<unsigned char> runCall(int rank, int w, zcollComm_t comm, const Call& c) {
  auto send = makeBuffer(c.t, c.count * w);
  for (size_t i = 0; i < c.count * w; ++i)
    setElement(send.data(), c.t, i, inputAt(c.seed, rank, i, c.t));
  auto out = makeBuffer(c.t, c.count);
  void* recv = c.inPlace ? send.data() + rank * c.count * typeSize(c.t) : out.data();
  zcollQuantConfig_t q = makeConfig(*c.cfg);
  ZCOLL_EXPECT_OK(comm, zcollQuantizedReduceScatter(send.data(), recv, c.count, c.t, c.op,
                                                    c.cfg->null ? nullptr : &q, comm, nullptr));
  if (c.inPlace) std::memcpy(out.data(), recv, c.count * typeSize(c.t));
  return out;
}

// Checks every element of this rank's output against the reference and the bound, block by
// block of the destination chunk (blocks never straddle pipeline pieces).
void checkOutput(const LayoutShape& sh, int rank, const Call& c,
                 const std::vector<unsigned char>& out) {
  const size_t b = blockOf(*c.cfg), n = c.count;
  const double f = boundFactor(sh, *c.cfg, c.t), div = c.op == zcollAvg ? sh.w : 1;
  std::vector<double> x(sh.w * b);
  size_t bad = 0;
  std::string first;
  for (size_t b0 = 0; b0 < n; b0 += b) {
    const size_t len = std::min(b, n - b0);
    double sumA = 0;
    for (int s = 0; s < sh.w; ++s) {
      double a = 0;
      for (size_t e = 0; e < len; ++e) {
        x[s * b + e] = inputAt(c.seed, s, rank * n + b0 + e, c.t);
        a = std::max(a, std::fabs(x[s * b + e]));
      }
      sumA += a;
    }
    for (size_t e = 0; e < len; ++e) {
      double exact = 0;
      for (int s = 0; s < sh.w; ++s) exact += x[s * b + e];
      exact /= div;
      double err = (f * sumA * (1 + 0x1.0p-10) + 0x1.0p-16 * sumA) / div;
      double bound = err + ulpOf(std::fabs(exact) + err, c.t) + 0x1.0p-140;
      double got = getElement(out.data(), c.t, b0 + e);
      if (!(std::fabs(got - exact) <= bound) && bad++ == 0)
        first = "element " + std::to_string(b0 + e) + " got " + std::to_string(got) +
                " exact " + std::to_string(exact) + " bound " + std::to_string(bound);
    }
  }
  EXPECT_EQ(bad, 0u) << "rank " << rank << " " << describe(c) << ": " << first;
}

class Qgz : public LayoutTest {};

// ---- Error bound over every configuration, dtype, op, count ---------------------------------

TEST_P(Qgz, WithinComposedErrorBound) {
  const LayoutShape sh = shapeOf(setup());
  const size_t large = (size_t(1) << 20) / sh.w + 3;  // ~1M elements in all, odd
  runRanks(setup(), [&](int rank, zcollComm_t comm) {
    uint64_t seed = 1;
    for (const Cfg& cfg : kCfgs)
      for (zcollDataType_t t : {zcollFloat32, zcollFloat16, zcollBfloat16})
        for (size_t count : {size_t(0), size_t(1), size_t(13), size_t(1000)})
          for (zcollRedOp_t op : {zcollSum, zcollAvg}) {
            Call c{&cfg, t, op, count, (seed & 1) == 0, ++seed};
            checkOutput(sh, rank, c, runCall(rank, sh.w, comm, c));
          }
    // ~1M elements with the defaults (default pipeline depth > 1), in and out of place.
    for (bool inPlace : {false, true}) {
      Call c{&kDefault, zcollBfloat16, zcollSum, large, inPlace, 99};
      checkOutput(sh, rank, c, runCall(rank, sh.w, comm, c));
    }
  });
}

// ---- Avg == Sum / W; deterministic; pipeline depth does not change the bits ---------------

TEST_P(Qgz, AvgIsSumOverWorldSizeAndBitsAreDeterministic) {
  const LayoutShape sh = shapeOf(setup());
  runRanks(setup(), [&](int rank, zcollComm_t comm) {
    for (zcollDataType_t t : {zcollFloat32, zcollBfloat16}) {
      const size_t n = 5000;
      Call sum{&kCfgs[1], t, zcollSum, n, false, 7};
      Call avg = sum;
      avg.op = zcollAvg;
      auto s1 = runCall(rank, sh.w, comm, sum), a1 = runCall(rank, sh.w, comm, avg);
      for (size_t i = 0; i < n; ++i) {
        double s = getElement(s1.data(), t, i), a = getElement(a1.data(), t, i);
        ASSERT_LE(std::fabs(a * sh.w - s), (ulpOf(a, t) + ulpOf(s, t) / sh.w) * sh.w)
            << "rank " << rank << " element " << i << " sum " << s << " avg " << a;
      }
      // Run to run, and across pipeline depths (piece boundaries are block boundaries).
      auto s2 = runCall(rank, sh.w, comm, sum);
      EXPECT_EQ(s1, s2) << "rank " << rank << ": two identical calls differ";
      for (const Cfg& cfg : {kCfgs[2], kCfgs[4]}) {
        Cfg deep = cfg;
        Call c{&deep, t, zcollSum, n, false, 11};
        auto d1 = runCall(rank, sh.w, comm, c);
        deep.depth = 1;
        auto d2 = runCall(rank, sh.w, comm, c);
        deep.depth = 7;
        c.inPlace = true;
        auto d3 = runCall(rank, sh.w, comm, c);
        EXPECT_EQ(d1, d2) << "rank " << rank << " " << cfg.name << ": depth 1 differs";
        EXPECT_EQ(d1, d3) << "rank " << rank << " " << cfg.name << ": depth 7 differs";
      }
    }
  });
}

// ---- intraBits 16 on one node: fp16/bf16 inputs are carried exactly ---------------------------

TEST(Qgz16, OneNodeWithHalfInputsIsTheFp32SumRoundedOnce) {
  const RankSetup s{4, 1, Placement::kContiguous};
  const LayoutShape sh = shapeOf(s);
  const Cfg cfg = {"16bit-intra", false, 4, 16, 64, zcollQuantSymmetric, zcollRoundNearestEven, 2};
  runRanks(s, [&](int rank, zcollComm_t comm) {
    for (zcollDataType_t t : {zcollFloat16, zcollBfloat16})
      for (zcollRedOp_t op : {zcollSum, zcollAvg})
        for (size_t count : {size_t(1), size_t(333), size_t(5000)}) {
          Call c{&cfg, t, op, count, count == 333, 21};
          auto out = runCall(rank, sh.w, comm, c);
          auto want = makeBuffer(t, count);
          const float scale = op == zcollAvg ? 1.0f / float(sh.w) : 1.0f;
          for (size_t e = 0; e < count; ++e) {
            float acc = 0.0f;  // the local ranks' values in local-index (= rank) order, in fp32
            for (int src = 0; src < sh.w; ++src)
              acc += float(inputAt(c.seed, src, rank * count + e, t));
            setElement(want.data(), t, e, double(acc * scale));
          }
          EXPECT_EQ(0, std::memcmp(out.data(), want.data(), count * typeSize(t)))
              << "rank " << rank << " " << describe(c);
        }
  });
}

// ---- Byte counters ----------------------------------------------------------------------------

// Q summed over the pipeline pieces: piece = ceil(C/D) rounded up to whole blocks.
size_t pieceElems(size_t count, int depth, int block) {
  size_t per = (count + depth - 1) / depth;
  return std::max<size_t>(block, (per + block - 1) / block * block);
}

uint64_t piecedBytes(size_t count, int depth, int bits, int block, bool symmetric) {
  const size_t piece = pieceElems(count, depth, block);
  uint64_t total = 0;
  for (size_t k0 = 0; k0 < count; k0 += piece)
    total += documentedWireBytes(std::min(piece, count - k0), block, bits, symmetric);
  return total;
}

// The hop inside the node reads the peers' windows in place (two_hop_shm_read, the default
// when every local peer is on shm): a window reference per piece (a shm range: 56 bytes on the
// wire, transport/peer_memory.h) and a 1-byte release token per call go to every local peer on
// top of the quantized pieces they read (support/wire_notices.h, checked against
// docs/ZEROPP.md's numbers by zeropp_doc_test.cc).
bool readsInPlace(zcollComm_t comm) {
  const zcollComm* c = comm;
  return zcoll::peerMemoryOf(c, zcoll::makeGroup(c, c->layout.nodeGroup(c->rank)),
                             zcoll::MemKind::kHost) != nullptr;
}

uint64_t windowControlBytes(size_t count, int depth, int block) {
  const size_t piece = pieceElems(count, depth, block);
  return kHostRangeBytes * ((count + piece - 1) / piece) + kTokenBytes;
}

TEST_P(Qgz, ByteCountersMatchTheDocumentedFormula) {
  const LayoutShape sh = shapeOf(setup());
  runRanks(setup(), [&](int rank, zcollComm_t comm) {
    for (int mode : {zcollQuantSymmetric, zcollQuantAsymmetric})
    for (int depth : {1, 3})
    for (int intra : {8, 16})
      for (size_t count : {size_t(1), size_t(100), size_t(1000), size_t(4099)}) {
        Cfg cfg = {"counters", false, 4, intra, 64, mode, zcollRoundNearestEven, depth};
        const bool sym = mode == zcollQuantSymmetric;
        const int l = sh.perNode[sh.nodeOf[rank]], n = sh.nodes;
        uint64_t inter, intra;
        if (!sh.uniform()) {  // flat: one inter-bit chunk to every other rank
          uint64_t q = piecedBytes(count, 1, interBits(cfg), 64, sym);
          inter = (sh.w - l) * q;
          intra = (l - 1) * q;
        } else {
          const int firstBits = (l == 1 && n > 1) ? interBits(cfg) : intraBits(cfg);
          inter = (n - 1) * piecedBytes(count, depth, interBits(cfg), 64, sym);
          intra = uint64_t(l - 1) * n * piecedBytes(count, depth, firstBits, 64, sym);
          if (l > 1 && readsInPlace(comm)) intra += (l - 1) * windowControlBytes(count, depth, 64);
        }
        ZCOLL_EXPECT_OK(comm, zcollBarrier(comm, nullptr));
        ZCOLL_EXPECT_OK(comm, zcollCommResetStats(comm));
        Call c{&cfg, zcollBfloat16, zcollAvg, count, false, 3};
        checkOutput(sh, rank, c, runCall(rank, sh.w, comm, c));
        zcollStats_t st;
        std::memset(&st, 0, sizeof(st));
        st.size = sizeof(st);
        ZCOLL_EXPECT_OK(comm, zcollCommGetStats(comm, &st));
        EXPECT_EQ(st.bytesSent[zcollPathInter], inter) << "rank " << rank << " count " << count;
        EXPECT_EQ(st.bytesSent[zcollPathIntra], intra) << "rank " << rank << " count " << count;
        EXPECT_EQ(st.bytesRecv[zcollPathInter], inter) << "rank " << rank << " count " << count;
        EXPECT_EQ(st.opCount, 1u);
      }
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, Qgz, testing::ValuesIn(kCases), layoutName);

// ---- The registry's two algorithms, forced ------------------------------------------------------

TEST(QgzAlgorithms, FlatForcedOnEqualNodesIsWithinItsBoundAndSendsItsBytes) {
  const RankSetup s{4, 2, Placement::kContiguous};
  ScopedEnv force("ZCOLL_ALGO_QUANTIZED_REDUCESCATTER", "flat");
  LayoutShape sh = shapeOf(s);
  sh.forcedFlat = true;
  runRanks(s, [&](int rank, zcollComm_t comm) {
    uint64_t seed = 7;
    for (const Cfg& cfg : kCfgs)
      for (zcollDataType_t t : {zcollFloat32, zcollBfloat16})
        for (size_t count : {size_t(13), size_t(1000)}) {
          Call c{&cfg, t, zcollSum, count, (seed & 1) == 0, ++seed};
          checkOutput(sh, rank, c, runCall(rank, sh.w, comm, c));
        }
    // Flat sends one inter-bit chunk to every other rank, none of them re-quantized.
    const Cfg cfg = {"counters", false, 4, 8, 64, zcollQuantSymmetric, zcollRoundNearestEven, 1};
    ZCOLL_EXPECT_OK(comm, zcollBarrier(comm, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollCommResetStats(comm));
    Call c{&cfg, zcollBfloat16, zcollSum, 1000, false, 3};
    checkOutput(sh, rank, c, runCall(rank, sh.w, comm, c));
    zcollStats_t st;
    std::memset(&st, 0, sizeof(st));
    st.size = sizeof(st);
    ZCOLL_EXPECT_OK(comm, zcollCommGetStats(comm, &st));
    const uint64_t q = piecedBytes(1000, 1, interBits(cfg), 64, true);
    EXPECT_EQ(st.bytesSent[zcollPathInter], 2 * q) << "rank " << rank;
    EXPECT_EQ(st.bytesSent[zcollPathIntra], 1 * q) << "rank " << rank;
  });
}

TEST(QgzAlgorithms, TwoHopForcedOnUnequalNodesFailsOnEveryRank) {
  const RankSetup s{3, 2, Placement::kContiguous};
  ScopedEnv force("ZCOLL_ALGO_QUANTIZED_REDUCESCATTER", "two_hop");
  runRanks(s, [&](int, zcollComm_t comm) {
    std::vector<float> in(3 * 64, 1.0f), out(64);
    EXPECT_FAILS_WITH(comm, zcollInvalidUsage, "same number of ranks on every node",
                      zcollQuantizedReduceScatter(in.data(), out.data(), 64, zcollFloat32,
                                                  zcollSum, nullptr, comm, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollBarrier(comm, nullptr));  // the comm still works
  });
}

// ---- Bad arguments (one rank: nothing communicates) -------------------------------------------

TEST(QgzArguments, BadArgumentsFailWithSpecificMessages) {
  RankSetup s;
  runRanks(s, [&](int, zcollComm_t comm) {
    std::vector<float> in(64), out(64);
    const zcollDataType_t f32 = zcollFloat32;
    auto call = [&](const void* sb, void* rb, size_t n, zcollDataType_t t, zcollRedOp_t op,
                    const zcollQuantConfig_t* q, zcollComm_t c, zcollStream_t st) {
      return zcollQuantizedReduceScatter(sb, rb, n, t, op, q, c, st);
    };
    EXPECT_EQ(call(in.data(), out.data(), 8, f32, zcollSum, nullptr, nullptr, nullptr),
              zcollInvalidArgument);
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "sendbuff",
                     call(nullptr, out.data(), 8, f32, zcollSum, nullptr, comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "recvbuff",
                     call(in.data(), nullptr, 8, f32, zcollSum, nullptr, comm, nullptr));
    for (zcollDataType_t t : {zcollInt32, zcollFloat64, zcollDataType_t(99)})
      EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "datatype",
                       call(in.data(), out.data(), 8, t, zcollSum, nullptr, comm, nullptr));
    for (zcollRedOp_t op : {zcollProd, zcollMax, zcollMin, zcollRedOp_t(77)})
      EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "op",
                       call(in.data(), out.data(), 8, f32, op, nullptr, comm, nullptr));
    auto badCfg = [&](const char* needle, void (*spoil)(zcollQuantConfig_t*)) {
      zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
      spoil(&q);
      EXPECT_FAILS_WITH(comm, zcollInvalidArgument, needle,
                       call(in.data(), out.data(), 8, f32, zcollSum, &q, comm, nullptr));
    };
    badCfg("ZCOLL_QUANT_CONFIG_INITIALIZER", [](zcollQuantConfig_t* q) { q->magic = 1; });
    badCfg("bits", [](zcollQuantConfig_t* q) { q->bits = 5; });
    badCfg("intraBits = 2, must be 4, 8 or 16", [](zcollQuantConfig_t* q) { q->intraBits = 2; });
    badCfg("intraBits = 12, must be 4, 8 or 16",
           [](zcollQuantConfig_t* q) { q->intraBits = 12; });
    badCfg("bits = 16, must be 4 or 8", [](zcollQuantConfig_t* q) { q->bits = 16; });
    badCfg("blockSize", [](zcollQuantConfig_t* q) { q->blockSize = 48; });
    badCfg("mode", [](zcollQuantConfig_t* q) { q->mode = 7; });
    badCfg("rounding", [](zcollQuantConfig_t* q) { q->rounding = 3; });
    badCfg("pipelineDepth", [](zcollQuantConfig_t* q) { q->pipelineDepth = 65; });
    badCfg("pipelineDepth", [](zcollQuantConfig_t* q) { q->pipelineDepth = -1; });
    int dummy = 0;
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "stream",
                     call(in.data(), out.data(), 8, f32, zcollSum, nullptr, comm,
                          reinterpret_cast<zcollStream_t>(&dummy)));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "overlap",
                     call(in.data(), in.data() + 4, 8, f32, zcollSum, nullptr, comm, nullptr));
    // NULL buffers with count 0, and in place (recvbuff == sendbuff + rank*count), succeed.
    EXPECT_EQ(call(nullptr, nullptr, 0, f32, zcollSum, nullptr, comm, nullptr), zcollSuccess);
    EXPECT_EQ(call(in.data(), in.data(), 8, f32, zcollAvg, nullptr, comm, nullptr), zcollSuccess)
        << zcollGetLastError(comm);
  });
}

}  // namespace
