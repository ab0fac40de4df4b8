// zcollQuantizedAllReduce over real transports, ranks as threads on emulated nodes: layouts 1x1,
// 1x4, 2x2, 2x1 and unequal 3-on-2 (qgZ's flat algorithm); counts 0, 1, odd, not a multiple of
// the rank count or of the block; fp32/fp16/bf16; Sum and Avg; in place and out of place.
// Every output element is checked against an fp64 reference with the bound of docs/ZEROPP.md
// "Quantized all-reduce":
//
//   |out - sum_s x_s| <= (F + k/qg * (1 + F)) * sum_s A_s  (+ fp32 slack + output dtype units)
//   F  = qgZ's factor for the layout (tests/support/qgz_reference.h), k = 1/2 (nearest) or
//        1 (stochastic), qg = 2^(bits-1) - 1 for the gather's quantization at `bits`;
//   A_s = max |x_s| over the block (of the element's chunk) holding the element.
// The count mod W tail is exact. Also: every rank's output byte for byte identical; in place ==
// out of place; the byte counters against the documented formula; the exact fallback below the
// threshold bit-identical to zcollAllReduce; error feedback makes the running mean of repeated
// calls converge to the exact sum (~1/K) where without it the bias stays; bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/qgz_reference.h"
#include "support/ranks.h"
#include "support/values.h"

using namespace zcoll::test;

namespace {

const RankSetup kCases[] = {
    {1, 1, Placement::kContiguous}, {4, 1, Placement::kContiguous},  // W = 1; 1 node x 4
    {4, 2, Placement::kContiguous}, {2, 2, Placement::kContiguous},  // 2 x 2; 2 x 1
    {3, 2, Placement::kContiguous},                                  // unequal: flat qgZ
};

struct Cfg {
  const char* name;
  bool null;  // NULL config: INT8 everywhere, block 256
  int bits, intraBits, blockSize, rounding;
};
const Cfg kDefault = {"default", true, 0, 0, 0, 0};
const Cfg kCfgs[] = {
    kDefault,
    {"int8-intra-int4-inter", false, 4, 8, 64, zcollRoundNearestEven},
    {"int4-int4-block32", false, 4, 4, 32, zcollRoundNearestEven},
    {"stochastic-int8", false, 8, 8, 128, zcollRoundStochastic},
    {"16bit-intra-int4", false, 4, 16, 64, zcollRoundNearestEven},
};

zcollQuantConfig_t makeConfig(const Cfg& c) {
  zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
  q.bits = c.bits;
  q.intraBits = c.intraBits;
  q.blockSize = c.blockSize;
  q.rounding = c.rounding;
  q.seed = 77;
  return q;
}
int bitsOf(const Cfg& c) { return c.bits ? c.bits : 8; }
int intraOf(const Cfg& c) { return c.intraBits ? c.intraBits : 8; }
int blockOf(const Cfg& c) { return c.blockSize ? c.blockSize : 256; }

// The whole bound factor of the header comment: qgZ's F, then the gather's quantization at
// `bits` of the reduced chunk (at most (1 + F) * sum_s A_s in magnitude).
double boundFactor(const LayoutShape& sh, const Cfg& c, zcollDataType_t t) {
  const double f = qgzBoundFactor(sh, intraOf(c), bitsOf(c), c.rounding, t);
  return f + quantStep(bitsOf(c), c.rounding) * (1 + f);
}

// Element i of rank src's input, rounded to t; magnitudes change every 61 elements (blocks
// with different scales, some all zero).
double inputAt(uint64_t seed, int src, size_t i, zcollDataType_t t) {
  return seededInputAt(seed, src, i, t, 61);
}

using Call = QuantCall<Cfg>;

std::vector<unsigned char> inputOf(int rank, const Call& c) {
  auto in = makeBuffer(c.t, c.count);
  for (size_t i = 0; i < c.count; ++i) setElement(in.data(), c.t, i, inputAt(c.seed, rank, i, c.t));
  return in;
}

std::vector<unsigned char> runCall(int rank, zcollComm_t comm, const Call& c) {
  auto in = inputOf(rank, c);
  auto out = makeBuffer(c.t, c.count);
  void* recv = c.inPlace ? in.data() : out.data();
  zcollQuantConfig_t q = makeConfig(*c.cfg);
  ZCOLL_EXPECT_OK(comm, zcollQuantizedAllReduce(in.data(), recv, c.count, c.t, c.op,
                                                c.cfg->null ? nullptr : &q, comm, nullptr));
  if (c.inPlace) std::memcpy(out.data(), in.data(), c.count * typeSize(c.t));
  EXPECT_TRUE(guardIntact(out)) << describe(c);
  return out;
}

// Every element against the reference and the bound, block by block of each chunk.
void checkOutput(const LayoutShape& sh, int rank, const Call& c,
                 const std::vector<unsigned char>& out) {
  const size_t b = blockOf(*c.cfg), chunk = c.count / sh.w;
  const double f = boundFactor(sh, *c.cfg, c.t), div = c.op == zcollAvg ? sh.w : 1;
  size_t bad = 0;
  std::string first;
  auto check = [&](size_t i, double exact, double err) {
    const double bound = err + 2 * ulpOf(std::fabs(exact) + err, c.t) + 0x1.0p-140;
    const double got = getElement(out.data(), c.t, i);
    if (!(std::fabs(got - exact) <= bound) && bad++ == 0)
      first = "element " + std::to_string(i) + " got " + std::to_string(got) + " exact " +
              std::to_string(exact) + " bound " + std::to_string(bound);
  };
  for (int t = 0; t < sh.w; ++t)
    for (size_t b0 = 0; b0 < chunk; b0 += b) {
      const size_t len = std::min(b, chunk - b0), at = t * chunk + b0;
      double sumA = 0;
      for (int s = 0; s < sh.w; ++s) {
        double a = 0;
        for (size_t e = 0; e < len; ++e) a = std::max(a, std::fabs(inputAt(c.seed, s, at + e, c.t)));
        sumA += a;
      }
      for (size_t e = 0; e < len; ++e) {
        double exact = 0;
        for (int s = 0; s < sh.w; ++s) exact += inputAt(c.seed, s, at + e, c.t);
        check(at + e, exact / div, (f * sumA * (1 + 0x1.0p-10) + 0x1.0p-15 * sumA) / div);
      }
    }
  for (size_t i = chunk * sh.w; i < c.count; ++i) {  // the tail: exact
    double exact = 0, sumA = 0;
    for (int s = 0; s < sh.w; ++s) {
      exact += inputAt(c.seed, s, i, c.t);
      sumA += std::fabs(inputAt(c.seed, s, i, c.t));
    }
    check(i, exact / div, 0x1.0p-20 * sumA / div);
  }
  EXPECT_EQ(bad, 0u) << "rank " << rank << " " << describe(c) << ": " << first;
}

class Qar : public LayoutTest {};

// Every rank's outputs, by rank, for the byte-for-byte comparison after the ranks joined.
struct Outputs {
  std::mutex mu;
  std::vector<std::vector<std::vector<unsigned char>>> byRank;
  explicit Outputs(int w) : byRank(w) {}
  void add(int rank, std::vector<unsigned char> out) {
    std::lock_guard<std::mutex> lock(mu);
    byRank[rank].push_back(std::move(out));
  }
  void expectIdentical() {
    for (size_t r = 1; r < byRank.size(); ++r) {
      ASSERT_EQ(byRank[r].size(), byRank[0].size());
      for (size_t k = 0; k < byRank[0].size(); ++k)
        EXPECT_EQ(byRank[r][k], byRank[0][k]) << "call " << k << ": rank " << r << " differs";
    }
  }
};

TEST_P(Qar, WithinBoundAndIdenticalBitsOnEveryRank) {
  ScopedEnv force("ZCOLL_ALGO_QUANTIZED_ALLREDUCE", "qgz_then_qwz");  // small counts too
  const LayoutShape sh = shapeOf(setup());
  Outputs outs(sh.w);
  runRanks(setup(), [&](int rank, zcollComm_t comm) {
    uint64_t seed = 1;
    for (const Cfg& cfg : kCfgs)
      for (zcollDataType_t t : {zcollFloat32, zcollFloat16, zcollBfloat16})
        for (size_t count : {size_t(0), size_t(1), size_t(13), size_t(4 * 301 + 3)})
          for (zcollRedOp_t op : {zcollSum, zcollAvg}) {
            Call c{&cfg, t, op, count, (seed & 1) == 0, ++seed};
            auto out = runCall(rank, comm, c);
            checkOutput(sh, rank, c, out);
            outs.add(rank, std::move(out));
          }
    // ~256K elements with the defaults (pipelined qgZ); in place and out of place agree.
    Call c{&kDefault, zcollBfloat16, zcollSum, (size_t(1) << 18) + 5, false, 99};
    auto outOfPlace = runCall(rank, comm, c);
    checkOutput(sh, rank, c, outOfPlace);
    c.inPlace = true;
    EXPECT_EQ(runCall(rank, comm, c), outOfPlace) << "rank " << rank << ": in place differs";
    outs.add(rank, std::move(outOfPlace));
  });
  outs.expectIdentical();
}

// ---- Byte counters --------------------------------------------------------------------------

TEST_P(Qar, ByteCountersMatchTheDocumentedFormula) {
  const LayoutShape sh = shapeOf(setup());
  if (!sh.uniform()) GTEST_SKIP() << "two_hop is forced below: equal nodes only";
  // qgZ's exchange (no window references) and the quantized path at every size.
  ScopedEnv rs("ZCOLL_ALGO_QUANTIZED_REDUCESCATTER", "two_hop");
  ScopedEnv force("ZCOLL_ALGO_QUANTIZED_ALLREDUCE", "qgz_then_qwz");
  runRanks(setup(), [&](int rank, zcollComm_t comm) {
    for (int mode : {zcollQuantSymmetric, zcollQuantAsymmetric})
      for (size_t chunk : {size_t(1), size_t(100), size_t(4099)}) {
        const size_t count = chunk * sh.w;  // no tail: its exact all-reduce is not counted here
        const bool sym = mode == zcollQuantSymmetric;
        const int l = sh.perNode[0], n = sh.nodes;
        const int firstBits = (l == 1 && n > 1) ? 4 : 8;
        const uint64_t qe = documentedWireBytes(chunk, 64, 4, sym);
        const uint64_t qa = documentedWireBytes(chunk, 64, firstBits, sym);
        const bool lastOfNode = rank % l == l - 1;  // contiguous placement
        const uint64_t gather = uint64_t(sh.w - 1) * qe;  // the gather runs at `bits`
        const uint64_t inter = (n - 1) * qe + (n > 1 && lastOfNode ? gather : 0);
        const uint64_t intra = uint64_t(l - 1) * n * qa + (n > 1 && lastOfNode ? 0 : gather);
        zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
        q.bits = 4;
        q.intraBits = 8;
        q.blockSize = 64;
        q.mode = mode;
        q.pipelineDepth = 1;
        std::vector<float> in(count, 0.25f * (rank + 1)), out(count);
        ZCOLL_EXPECT_OK(comm, zcollBarrier(comm, nullptr));
        ZCOLL_EXPECT_OK(comm, zcollCommResetStats(comm));
        ZCOLL_EXPECT_OK(comm, zcollQuantizedAllReduce(in.data(), out.data(), count, zcollFloat32,
                                                      zcollSum, &q, comm, nullptr));
        zcollStats_t st;
        std::memset(&st, 0, sizeof(st));
        st.size = sizeof(st);
        ZCOLL_EXPECT_OK(comm, zcollCommGetStats(comm, &st));
        EXPECT_EQ(st.bytesSent[zcollPathInter], inter) << "rank " << rank << " chunk " << chunk;
        EXPECT_EQ(st.bytesSent[zcollPathIntra], intra) << "rank " << rank << " chunk " << chunk;
        EXPECT_EQ(st.opCount, 1u);
      }
  });
}

// ---- The exact fallback ---------------------------------------------------------------------

TEST_P(Qar, BelowThresholdBitIdenticalToAllReduceAboveQuantized) {
  const LayoutShape sh = shapeOf(setup());
  runRanks(setup(), [&](int rank, zcollComm_t comm) {
    for (zcollDataType_t t : {zcollFloat32, zcollBfloat16})
      for (zcollRedOp_t op : {zcollSum, zcollAvg}) {
        const size_t below = 256 * 1024 / typeSize(t) - 1;  // 1 element under 256 KiB per rank
        for (size_t count : {size_t(1), size_t(999), below, below + 1}) {
          Call c{&kDefault, t, op, count, false, 5};
          auto in = inputOf(rank, c);
          auto exact = makeBuffer(t, count);
          ZCOLL_EXPECT_OK(comm, zcollAllReduce(in.data(), exact.data(), count, t, op, comm,
                                               nullptr));
          auto out = runCall(rank, comm, c);
          if (count <= below) {
            EXPECT_EQ(out, exact) << "rank " << rank << " " << describe(c);
          } else {  // from 256 KiB: quantized, so some element differs, within the bound
            EXPECT_NE(out, exact) << "rank " << rank << " " << describe(c);
            checkOutput(sh, rank, c, out);
          }
        }
      }
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, Qar, testing::ValuesIn(kCases), layoutName);

// ---- Error feedback -------------------------------------------------------------------------

// Max over elements of |mean of K outputs - exact sum|, and of the single-call bound.
struct MeanError {
  double err = 0, bound = 0;
  std::vector<unsigned char> last;  // the last call's output
};

MeanError meanErrorAfter(int rank, zcollComm_t comm, const LayoutShape& sh, int k,
                         bool feedback) {
  const Cfg cfg = {"ef", false, 4, 4, 64, zcollRoundNearestEven};
  const size_t count = 1000 * sh.w;
  Call c{&cfg, zcollFloat32, zcollSum, count, false, 17};
  auto in = inputOf(rank, c);
  std::vector<float> out(count);
  std::vector<double> sum(count, 0.0);
  zcollQuantConfig_t q = makeConfig(cfg);
  size_t bytes = 0;
  EXPECT_EQ(zcollQuantizedAllReduceResidualSize(count, c.t, &q, comm, &bytes), zcollSuccess);
  std::vector<float> residual(bytes / sizeof(float), 0.0f);
  for (int i = 0; i < k; ++i) {
    if (feedback)
      ZCOLL_EXPECT_OK(comm, zcollQuantizedAllReduceWithResidual(
                                in.data(), out.data(), count, c.t, c.op, &q, residual.data(),
                                bytes, comm, nullptr));
    else
      ZCOLL_EXPECT_OK(comm, zcollQuantizedAllReduce(in.data(), out.data(), count, c.t, c.op, &q,
                                                    comm, nullptr));
    for (size_t e = 0; e < count; ++e) sum[e] += out[e];
  }
  MeanError m;
  m.last.resize(count * sizeof(float));
  std::memcpy(m.last.data(), out.data(), m.last.size());
  const double f = boundFactor(sh, cfg, c.t);
  for (size_t e = 0; e < count; ++e) {
    double exact = 0, sumA = 0;
    for (int s = 0; s < sh.w; ++s) {
      exact += inputAt(c.seed, s, e, c.t);
      double a = 0;
      // Blocks start at each chunk (1000 elements, not a block multiple).
      const size_t chunkStart = e / 1000 * 1000, blk = chunkStart + (e - chunkStart) / 64 * 64;
      for (size_t j = blk; j < std::min(blk + 64, chunkStart + 1000); ++j)
        a = std::max(a, std::fabs(inputAt(c.seed, s, j, c.t)));
      sumA += a;
    }
    m.err = std::max(m.err, std::fabs(sum[e] / k - exact));
    m.bound = std::max(m.bound, f * sumA);
  }
  return m;
}

class QarFeedback : public LayoutTest {};

TEST_P(QarFeedback, RunningMeanConvergesWithFeedbackAndKeepsItsBiasWithout) {
  const LayoutShape sh = shapeOf(setup());
  ScopedEnv force("ZCOLL_ALGO_QUANTIZED_ALLREDUCE", "qgz_then_qwz");  // 16 KB per rank
  Outputs outs(sh.w);
  runRanks(setup(), [&](int rank, zcollComm_t comm) {
    const MeanError one = meanErrorAfter(rank, comm, sh, 1, false);
    const MeanError ef16 = meanErrorAfter(rank, comm, sh, 16, true);
    const MeanError ef64 = meanErrorAfter(rank, comm, sh, 64, true);
    const MeanError plain64 = meanErrorAfter(rank, comm, sh, 64, false);
    ASSERT_GT(one.err, 0.0);
    // With feedback the K outputs sum to K times the exact sum minus the last residuals: the
    // mean's error is at most about the one-call bound over K.
    EXPECT_LE(ef16.err * 16, 2 * ef16.bound) << "rank " << rank;
    EXPECT_LE(ef64.err * 64, 2 * ef64.bound) << "rank " << rank;
    EXPECT_LT(ef64.err, ef16.err / 2) << "rank " << rank << ": the mean's error must shrink";
    // Without it every call rounds the same way: the mean keeps the one-call error.
    EXPECT_GT(plain64.err * 64, 2 * plain64.bound) << "rank " << rank;
    EXPECT_GE(plain64.err, 0.5 * one.err) << "rank " << rank;
    outs.add(rank, ef16.last);  // with feedback, too, every rank the same bits
    outs.add(rank, ef64.last);
  });
  outs.expectIdentical();
}

INSTANTIATE_TEST_SUITE_P(Layouts, QarFeedback,
                         testing::Values(RankSetup{4, 1, Placement::kContiguous},
                                         RankSetup{4, 2, Placement::kContiguous},
                                         RankSetup{2, 2, Placement::kContiguous},
                                         RankSetup{3, 2, Placement::kContiguous}),
                         layoutName);

TEST(QarFeedback, ResidualSizeIsDocumented) {
  for (RankSetup s : {RankSetup{4, 2, Placement::kContiguous}, RankSetup{4, 1, Placement::kContiguous},
                      RankSetup{2, 2, Placement::kContiguous}}) {
    const LayoutShape sh = shapeOf(s);
    runRanks(s, [&](int, zcollComm_t comm) {
      for (size_t count : {size_t(0), size_t(3), size_t(1001), size_t(1 << 20)}) {
        size_t bytes = 0;
        ZCOLL_EXPECT_OK(comm, zcollQuantizedAllReduceResidualSize(count, zcollBfloat16, nullptr,
                                                                  comm, &bytes));
        const size_t c = count / sh.w;
        const bool twoHop = sh.nodes > 1 && sh.perNode[0] > 1;
        EXPECT_EQ(bytes, 4 * c * (sh.w + (twoHop ? sh.nodes : 0) + 1)) << "count " << count;
      }
    });
  }
}

// The size query does not wait for the comm's queued calls: rank 0 asks it while its receive
// from rank 1 is queued, and rank 1 sends only once rank 0 has its answer (or after 10 s).
TEST(QarFeedback, ResidualSizeReturnsWhileCallsAreQueued) {
  std::atomic<bool> answered{false};
  runRanks(RankSetup{2, 1, Placement::kContiguous}, [&](int rank, zcollComm_t comm) {
    std::vector<float> buf(1000, float(rank));
    if (rank == 1) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!answered.load() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      EXPECT_TRUE(answered.load()) << "the size query waited for the queued receive";
      ZCOLL_EXPECT_OK(comm, zcollSend(buf.data(), buf.size(), zcollFloat32, 0, comm, nullptr));
      return;
    }
    zcollRequest_t req = nullptr;
    ASSERT_EQ(zcollGroupStart(), zcollSuccess);
    ZCOLL_EXPECT_OK(comm, zcollRecv(buf.data(), buf.size(), zcollFloat32, 1, comm, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollGroupEndNonBlocking(&req));
    size_t bytes = 0;
    ZCOLL_EXPECT_OK(comm, zcollQuantizedAllReduceResidualSize(1 << 20, zcollFloat32, nullptr,
                                                              comm, &bytes));
    answered = true;
    EXPECT_GT(bytes, 0u);
    ZCOLL_EXPECT_OK(comm, zcollRequestFree(req));  // waits for it
    EXPECT_EQ(buf.back(), 1.0f);
  });
}

// ---- Bad arguments ----------------------------------------------------------------------------

TEST(QarArguments, BadArgumentsFailOnEveryRankAndLeaveTheOutputAndCommAlone) {
  const RankSetup s{2, 2, Placement::kContiguous};
  runRanks(s, [&](int rank, zcollComm_t comm) {
    const size_t n = 64 * 1024;  // 256 KiB, the threshold: the quantized path
    std::vector<float> in(n, 1.0f), out(n, -7.0f);
    size_t rbytes = 0;
    ZCOLL_EXPECT_OK(comm, zcollQuantizedAllReduceResidualSize(n, zcollFloat32, nullptr, comm,
                                                              &rbytes));
    std::vector<float> residual(rbytes / 4, 0.0f);
    auto untouched = [&]() {
      return std::all_of(out.begin(), out.end(), [](float v) { return v == -7.0f; });
    };
    auto call = [&](size_t count, zcollDataType_t t, zcollRedOp_t op,
                    const zcollQuantConfig_t* q) {
      return zcollQuantizedAllReduce(in.data(), out.data(), count, t, op, q, comm, nullptr);
    };
    for (zcollDataType_t t : {zcollInt32, zcollInt8, zcollFloat64})
      EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "datatype", call(n, t, zcollSum, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "sendbuff",
                      zcollQuantizedAllReduce(nullptr, out.data(), n, zcollFloat32, zcollSum,
                                              nullptr, comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "recvbuff",
                      zcollQuantizedAllReduce(in.data(), nullptr, n, zcollFloat32, zcollSum,
                                              nullptr, comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "op prod", call(n, zcollFloat32, zcollProd, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "op max", call(n, zcollFloat32, zcollMax, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "op min", call(n, zcollFloat32, zcollMin, nullptr));
    for (int bits : {2, 5, 16}) {
      zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
      q.bits = bits;
      EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "must be 4 or 8",
                        call(n, zcollFloat32, zcollSum, &q));
      if (bits == 16) continue;  // intraBits 16: the 16-bit float hop
      q.bits = 0;
      q.intraBits = bits;
      EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "must be 4, 8 or 16",
                        call(n, zcollFloat32, zcollSum, &q));
    }
    zcollQuantConfig_t q12 = ZCOLL_QUANT_CONFIG_INITIALIZER;
    q12.intraBits = 12;
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "intraBits = 12, must be 4, 8 or 16",
                      call(n, zcollFloat32, zcollSum, &q12));
    const char* fb = "zcollQuantizedAllReduceWithResidual";
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "residual is NULL",
                      zcollQuantizedAllReduceWithResidual(in.data(), out.data(), n, zcollFloat32,
                                                          zcollSum, nullptr, nullptr, rbytes,
                                                          comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "residualBytes is",
                      zcollQuantizedAllReduceWithResidual(in.data(), out.data(), n, zcollFloat32,
                                                          zcollSum, nullptr, residual.data(),
                                                          rbytes - 4, comm, nullptr));
    EXPECT_NE(std::string(zcollGetLastError(comm)).find(fb), std::string::npos);
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "overlap",
                      zcollQuantizedAllReduceWithResidual(in.data(), out.data(), n, zcollFloat32,
                                                          zcollSum, nullptr, out.data(), rbytes,
                                                          comm, nullptr));
    EXPECT_FAILS_WITH(comm, zcollInvalidArgument, "overlap",
                      zcollQuantizedAllReduce(in.data(), in.data() + 1, n - 1, zcollFloat32,
                                              zcollSum, nullptr, comm, nullptr));
    EXPECT_TRUE(untouched()) << "rank " << rank << ": a refused call wrote the output";
    // The communicator works afterwards.
    ZCOLL_EXPECT_OK(comm, zcollQuantizedAllReduceWithResidual(in.data(), out.data(), n,
                                                              zcollFloat32, zcollAvg, nullptr,
                                                              residual.data(), rbytes, comm,
                                                              nullptr));
    EXPECT_NEAR(out[0], 1.0f, 0.01f);
  });
}

TEST(QarArguments, CountThatDiffersBetweenRanksFailsOnEveryRankUnderCheckCalls) {
  ScopedEnv check("ZCOLL_CHECK_CALLS", "on");
  const RankSetup s{4, 2, Placement::kContiguous};
  runRanks(s, [&](int rank, zcollComm_t comm) {
    const size_t n = 64 * 1024;
    std::vector<float> in(n, 1.0f), out(n, -7.0f);
    EXPECT_FAILS_WITH(comm, zcollInvalidUsage, "mismatched",
                      zcollQuantizedAllReduce(in.data(), out.data(), rank == 2 ? n - 8 : n,
                                              zcollFloat32, zcollSum, nullptr, comm, nullptr));
    EXPECT_NE(std::string(zcollGetLastError(comm)).find("zcollQuantizedAllReduce"),
              std::string::npos);
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float v) { return v == -7.0f; }))
        << "rank " << rank << ": a refused call wrote the output";
    ZCOLL_EXPECT_OK(comm, zcollQuantizedAllReduce(in.data(), out.data(), n, zcollFloat32,
                                                  zcollSum, nullptr, comm, nullptr));
    EXPECT_NEAR(out[n - 1], 4.0f, 0.05f);
  });
}

}  // namespace
