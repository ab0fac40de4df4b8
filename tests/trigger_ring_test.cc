// Stream-triggered device calls (ZCOLL_DEVICE_CALLS=stream, src/trigger/ring.h) on the CPU
// stand-in device: ranks are threads, each on its own device ordinal (as one process driving
// several GPUs, or one process per GPU), all of one node. A triggered all-gather, reduce-scatter
// or all-reduce must give the host path's bytes, return with its stream still blocked by work
// queued before it (everything submitted at call time), submit nothing from any thread but the
// caller's (no progress thread), and never leave a stream waiting: an abort releases it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/dtype.h"
#include "core/comm.h"
#include "exec/gate.h"
#include "support/fake_device.h"
#include "support/ranks.h"
#include "support/values.h"
#include "trigger/ring.h"

namespace zcoll {
namespace {

using test::FakeDevice;
using test::FakeDeviceArena;
using test::FakeHardware;
using Bytes = std::vector<unsigned char>;

// What each rank thread of a triggered test gets: its device (an arena on ordinal `rank`,
// current for the thread), and its communicator, made on that device.
struct RankEnv {
  int rank;
  FakeDeviceArena& arena;
  zcollComm_t comm;
};

// Runs body on `n` rank threads, each with its own device ordinal (or all on device 0 with
// sameDevice), ZCOLL_DEVICE_CALLS=stream and 1 MiB windows (so a few hundred KB take several
// steps), on one node or on `nodes` emulated ones (contiguous ranks: ZCOLL's host id per rank);
// the comm is destroyed after body unless `destroy` is false. No thread but the ranks' may make
// a CUDA call (the stand-in counts them): no progress thread, and a proxy makes none.
void onOwnDevices(int n, const std::function<void(RankEnv&)>& body, bool sameDevice = false,
                  bool destroy = true, int nodes = 1) {
  const int cudaCallsBefore = FakeHardware::cudaCallsOffCallers.load();
  test::ScopedEnv stream("ZCOLL_DEVICE_CALLS", "stream");
  test::ScopedEnv window("ZCOLL_DEVICE_WINDOW_BYTES", "1048576");
  FakeDevice device;
  zcollUniqueId id;
  ASSERT_EQ(zcollGetUniqueId(&id), zcollSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      FakeHardware::callerThread = true;
      FakeDeviceArena arena;
      arena.device = sameDevice ? 0 : r;
      FakeDeviceArena::Scope scope(&arena);
      zcollComm_t comm = nullptr;
      const std::string host = "emulated-node-" + std::to_string(r * nodes / n);
      zcollConfig_t config = ZCOLL_CONFIG_INITIALIZER;
      if (nodes > 1) config.hostId = host.c_str();
      ASSERT_EQ(zcollCommInitRankConfig(&comm, n, id, r, &config), zcollSuccess)
          << zcollGetLastError(nullptr);
      RankEnv env{r, arena, comm};
      body(env);
      EXPECT_EQ(arena.stream()->synchronize(), zcollSuccess);
      if (destroy) ZCOLL_EXPECT_OK(comm, zcollCommDestroy(comm));
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(FakeHardware::submitsOffCallers.load(), 0)
      << "a thread other than a caller's submitted work to a stream (the progress thread?)";
  EXPECT_EQ(FakeHardware::cudaCallsOffCallers.load(), cudaCallsBefore)
      << "a thread other than a caller's made a CUDA call (the proxy?)";
}

// onOwnDevices for calls that must run on the ring: every rank has one, and the calls queued
// stream memory waits (they did not run synchronously).
void onRingTriggered(int n, const std::function<void(RankEnv&)>& body, int nodes = 1) {
  const int waitsBefore = test::FakeDeviceExecutor::waitsQueued.load();
  onOwnDevices(n, [&](RankEnv& e) {
    ASSERT_NE(e.comm->trigger, nullptr) << e.comm->triggerWhy;
    EXPECT_EQ(e.comm->trigger->spansNodes(), nodes > 1);
    body(e);
  }, /*sameDevice=*/false, /*destroy=*/true, nodes);
  EXPECT_GT(test::FakeDeviceExecutor::waitsQueued.load(), waitsBefore)
      << "the calls queued no stream memory wait: they did not run triggered";
}

// One quantized call's settings in the tests below (intraBits 0: the call's default).
struct QuantCase {
  zcollDataType_t dtype;
  size_t count;
  int bits, intraBits, blockSize, mode, rounding;
  zcollRedOp_t op;
  zcollQuantConfig_t config(uint64_t seed) const {
    zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
    q.bits = bits;
    q.intraBits = intraBits;
    q.blockSize = blockSize;
    q.mode = mode;
    q.rounding = rounding;
    q.seed = seed;
    return q;
  }
};

Bytes inputOf(int rank, size_t elems, zcollDataType_t t) {
  Bytes b(elems * dtypeSize(t));
  for (size_t i = 0; i < elems; ++i)
    test::setElement(b.data(), t, i, test::inputValue(t, zcollSum, rank, 8, i) / 4);
  return b;
}

// Values whose sums depend on their order (mantissas full, magnitudes 2^-8..2^8): the host
// path's bits come out only when its summation order and roundings are followed.
Bytes orderSensitiveInputOf(int rank, size_t elems, zcollDataType_t t) {
  Bytes b(elems * dtypeSize(t));
  uint64_t h = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank + 1);
  for (size_t i = 0; i < elems; ++i) {
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    const double unit = static_cast<double>(h >> 11) / 9007199254740992.0;  // [0, 1)
    const double scale = std::ldexp(1.0, static_cast<int>(h % 17) - 8);
    test::setElement(b.data(), t, i, (2 * unit - 1) * scale);
  }
  return b;
}

// A call on (send, recv) pointers, run once on host buffers and once on device buffers.
using Call = std::function<zcollResult_t(const void* send, void* recv, zcollStream_t stream)>;

// Runs `call` on host buffers, then on device buffers whose stream is blocked (a kernel still
// running, queued before the call) until the call returned: the call must return with nothing
// run, and the device output must then equal the host's.
void expectTriggeredGivesHostBytes(RankEnv& e, const Bytes& in, size_t outBytes, const Call& call,
                                   const char* what, bool inPlace = false,
                                   size_t inPlaceOffset = 0) {
  Bytes host(inPlace ? in : Bytes(outBytes));
  Bytes hostIn = in;
  void* hostSend = inPlace ? host.data() + inPlaceOffset : hostIn.data();
  ASSERT_EQ(call(hostSend, host.data(), nullptr), zcollSuccess)
      << what << " (host): " << zcollGetLastError(e.comm);

  char* dev = static_cast<char*>(e.arena.alloc(std::max(outBytes, in.size())));
  char* devIn = inPlace ? dev : static_cast<char*>(e.arena.alloc(in.size()));
  e.arena.upload(devIn, in);
  auto kernel = std::make_shared<Gate>();
  e.arena.stream()->submit([kernel] { return kernel->wait(); }, false);
  const zcollResult_t r = call(devIn + (inPlace ? inPlaceOffset : 0), dev, e.arena.handle());
  EXPECT_FALSE(e.arena.stream()->idle()) << what << ": the call waited for its stream";
  kernel->open(zcollSuccess);
  ASSERT_EQ(r, zcollSuccess) << what << " (device): " << zcollGetLastError(e.comm);
  EXPECT_EQ(e.arena.download(dev, host.size()), host) << what << " differs on rank " << e.rank;
}

// Runs `call` synchronously on device buffers (the ring set aside: the path every device call
// of a communicator without one takes, as with ZCOLL_DEVICE_CALLS=sync), then triggered on
// other device buffers whose stream is blocked until the call returned: the triggered output
// must be those bytes. The reference for what zcoll.h promises (the synchronous path's bits):
// on device buffers the host algorithms can pick other orders than on host buffers (shm_read
// reads only registered device memory in place, else it runs the ring).
void expectTriggeredGivesSyncBytes(RankEnv& e, const Bytes& in, size_t outBytes, const Call& call,
                                   const std::string& what) {
  char* syncIn = static_cast<char*>(e.arena.alloc(in.size()));
  char* syncOut = static_cast<char*>(e.arena.alloc(outBytes));
  e.arena.upload(syncIn, in);
  // The synchronous algorithms use the cuda_ipc windows the ring's slots are cut from: every
  // rank's ring drained (its peers read its last slots) before, every rank done after.
  std::shared_ptr<TriggerRing> ring = std::move(e.comm->trigger);
  EXPECT_EQ(ring->drain(10000), zcollSuccess);
  const zcollResult_t synced = call(syncIn, syncOut, e.arena.handle());
  EXPECT_EQ(e.arena.stream()->synchronize(), zcollSuccess);
  ZCOLL_EXPECT_OK(e.comm, zcollBarrier(e.comm, nullptr));
  e.comm->trigger = std::move(ring);
  ASSERT_EQ(synced, zcollSuccess) << what << " (sync): " << zcollGetLastError(e.comm);
  const Bytes expected = e.arena.download(syncOut, outBytes);

  char* dev = static_cast<char*>(e.arena.alloc(outBytes));
  char* devIn = static_cast<char*>(e.arena.alloc(in.size()));
  e.arena.upload(devIn, in);
  auto kernel = std::make_shared<Gate>();
  e.arena.stream()->submit([kernel] { return kernel->wait(); }, false);
  const zcollResult_t r = call(devIn, dev, e.arena.handle());
  EXPECT_FALSE(e.arena.stream()->idle()) << what << ": the call waited for its stream";
  kernel->open(zcollSuccess);
  ASSERT_EQ(r, zcollSuccess) << what << " (triggered): " << zcollGetLastError(e.comm);
  EXPECT_EQ(e.arena.download(dev, outBytes), expected) << what << " differs on rank " << e.rank;
}

TEST(TriggeredCalls, AllGatherReduceScatterAndAllReduceGiveTheHostBytes) {
  const int n = 3;
  onRingTriggered(n, [&](RankEnv& e) {
    zcollComm_t comm = e.comm;
    for (zcollDataType_t t : {zcollFloat32, zcollBfloat16}) {
      const size_t es = dtypeSize(t);
      // 120001 elements: several slots' worth per rank, not a multiple of anything.
      const size_t count = 120001;
      expectTriggeredGivesHostBytes(e, inputOf(e.rank, count, t), count * n * es,
          [&](const void* s, void* r, zcollStream_t st) {
            return zcollAllGather(s, r, count, t, comm, st);
          }, "all-gather");
      expectTriggeredGivesHostBytes(e, inputOf(e.rank, count * n, t), count * es,
          [&](const void* s, void* r, zcollStream_t st) {
            return zcollReduceScatter(s, r, count, t, zcollSum, comm, st);
          }, "reduce-scatter");
      for (zcollRedOp_t op : {zcollSum, zcollAvg, zcollMax})
        expectTriggeredGivesHostBytes(e, inputOf(e.rank, count, t), count * es,
            [&](const void* s, void* r, zcollStream_t st) {
              return zcollAllReduce(s, r, count, t, op, comm, st);
            }, "all-reduce");
      // In place, and counts smaller than the ranks (empty segments).
      expectTriggeredGivesHostBytes(e, inputOf(e.rank, count * n, t), count * n * es,
          [&](const void* s, void* r, zcollStream_t st) {
            return zcollAllGather(s, r, count, t, comm, st);
          }, "all-gather in place", true, e.rank * count * es);
      expectTriggeredGivesHostBytes(e, inputOf(e.rank, count * n, t), count * n * es,
          [&](const void* s, void* r, zcollStream_t st) {
            return zcollReduceScatter(s, static_cast<char*>(r) + e.rank * count * es, count, t,
                                      zcollSum, comm, st);
          }, "reduce-scatter in place", true);
      for (size_t small : {size_t{1}, size_t{2}, size_t{5}})
        expectTriggeredGivesHostBytes(e, inputOf(e.rank, small, t), small * es,
            [&](const void*, void* r, zcollStream_t st) {
              return zcollAllReduce(r, r, small, t, zcollSum, comm, st);
            }, "all-reduce in place", true);
    }
  });
}

// The reduce-scatters and all-reduces of `counts` on `n` ranks, triggered, against the
// synchronous path's bytes, for values whose sums depend on the order.
void expectReductionsGiveTheSyncBytes(RankEnv& e, int n, const std::vector<size_t>& counts,
                                      const std::vector<zcollDataType_t>& types) {
  for (zcollDataType_t t : types) {
    const size_t es = dtypeSize(t);
    for (size_t count : counts) {
      const std::string what = std::to_string(count) + " " + dtypeName(t);
      expectTriggeredGivesSyncBytes(e, orderSensitiveInputOf(e.rank, count * n, t), count * es,
          [&](const void* s, void* r, zcollStream_t st) {
            return zcollReduceScatter(s, r, count, t, zcollSum, e.comm, st);
          }, "reduce-scatter of " + what);
      for (zcollRedOp_t op : {zcollSum, zcollAvg})
        expectTriggeredGivesSyncBytes(e, orderSensitiveInputOf(e.rank, count, t), count * es,
            [&](const void* s, void* r, zcollStream_t st) {
              return zcollAllReduce(s, r, count, t, op, e.comm, st);
            }, std::string("all-reduce (") + (op == zcollSum ? "sum" : "avg") + ") of " + what);
    }
  }
}

// The reductions follow the synchronous path's order and roundings, whatever algorithm it picks
// for the size: direct sums in rank order, ring from the chunk's owner + 1 round to the owner
// (fp32 partials for bf16), recursive doubling as a balanced tree (4 ranks: not rank order).
TEST(TriggeredCalls, ReductionsFollowTheSyncPathsOrderForEverySize) {
  const int n = 4;
  onRingTriggered(n, [&](RankEnv& e) {
    // direct / recursive doubling; ring
    expectReductionsGiveTheSyncBytes(e, n, {1000, 120001}, {zcollFloat32, zcollBfloat16});
  });
}

// And for the orders picked by settings: ring partials rounded to bf16 at every hop
// (ZCOLL_REDUCE_PARTIALS=dtype); shm_read, which on unregistered device buffers runs the ring.
TEST(TriggeredCalls, ReductionsFollowTheOrdersSettingsPick) {
  const int n = 3;
  {
    test::ScopedEnv partials("ZCOLL_REDUCE_PARTIALS", "dtype");
    onRingTriggered(n, [&](RankEnv& e) {
      expectReductionsGiveTheSyncBytes(e, n, {120001}, {zcollBfloat16});
    });
  }
  test::ScopedEnv rs("ZCOLL_ALGO_REDUCESCATTER", "shm_read");
  test::ScopedEnv ar("ZCOLL_ALGO_ALLREDUCE", "shm_read");
  onRingTriggered(n, [&](RankEnv& e) {
    expectReductionsGiveTheSyncBytes(e, n, {120001}, {zcollFloat32});
  });
}

// An order a triggered step cannot take (the hierarchical reduce-scatter, forced) leaves the
// call to the synchronous path: the same bytes, and no stream memory wait queued.
TEST(TriggeredCalls, AReductionInAnOrderTheStepsCannotTakeRunsSynchronously) {
  const int n = 4;
  test::ScopedEnv rs("ZCOLL_ALGO_REDUCESCATTER", "hierarchical");
  const int waitsBefore = test::FakeDeviceExecutor::waitsQueued.load();
  onOwnDevices(n, [&](RankEnv& e) {
    ASSERT_NE(e.comm->trigger, nullptr) << e.comm->triggerWhy;
    const size_t count = 5000;
    const Bytes in = orderSensitiveInputOf(e.rank, count * n, zcollFloat32);
    Bytes host(count * 4);
    ZCOLL_EXPECT_OK(e.comm, zcollReduceScatter(in.data(), host.data(), count, zcollFloat32,
                                               zcollSum, e.comm, nullptr));
    char* devIn = static_cast<char*>(e.arena.alloc(in.size()));
    char* dev = static_cast<char*>(e.arena.alloc(host.size()));
    e.arena.upload(devIn, in);
    ZCOLL_EXPECT_OK(e.comm, zcollReduceScatter(devIn, dev, count, zcollFloat32, zcollSum, e.comm,
                                               e.arena.handle()));
    EXPECT_TRUE(e.arena.stream()->idle()) << "the call returned before its work ran";
    EXPECT_EQ(e.arena.download(dev, host.size()), host);
  });
  EXPECT_EQ(test::FakeDeviceExecutor::waitsQueued.load(), waitsBefore)
      << "a reduction the steps cannot order ran triggered";
}

// qgZ and the quantized all-reduce (its exact tail too) on 4 ranks with values whose sums depend
// on the order: the synchronous path's bits (their fp32 sums of dequantized parts follow the
// host's two-hop node stage, rank order).
TEST(TriggeredCalls, QuantizedReductionsGiveTheSyncBytesForOrderSensitiveValues) {
  const int n = 4;
  onRingTriggered(n, [&](RankEnv& e) {
    const QuantCase cases[] = {
        {zcollFloat32, 300007, 8, 8, 256, zcollQuantSymmetric, zcollRoundNearestEven, zcollSum},
        {zcollBfloat16, 400001, 4, 4, 64, zcollQuantAsymmetric, zcollRoundStochastic, zcollAvg},
        {zcollFloat16, 70001, 8, 16, 32, zcollQuantSymmetric, zcollRoundNearestEven, zcollSum}};
    for (const QuantCase& c : cases) {
      const zcollQuantConfig_t q = c.config(11);
      const size_t es = dtypeSize(c.dtype);
      expectTriggeredGivesSyncBytes(
          e, orderSensitiveInputOf(e.rank, c.count * n, c.dtype), c.count * es,
          [&](const void* s, void* r, zcollStream_t st) {
            return zcollQuantizedReduceScatter(s, r, c.count, c.dtype, c.op, &q, e.comm, st);
          }, "qgZ of " + std::to_string(c.count));
      expectTriggeredGivesSyncBytes(
          e, orderSensitiveInputOf(e.rank, c.count, c.dtype), c.count * es,
          [&](const void* s, void* r, zcollStream_t st) {
            return zcollQuantizedAllReduce(s, r, c.count, c.dtype, c.op, &q, e.comm, st);
          }, "quantized all-reduce of " + std::to_string(c.count));
    }
  });
}

TEST(TriggeredCalls, QuantizedAllGatherGivesTheHostBytes) {
  // qwZ in gather steps of whole blocks: the host path's bits (each shard quantized once with
  // its global element offset, the owner's copy dequantized too) at INT8 and INT4, symmetric and
  // not, nearest and stochastic; 800017 fp32 elements take 3 steps of a 1 MiB window at INT8.
  const int n = 3;
  onRingTriggered(n, [&](RankEnv& e) {
    const QuantCase cases[] = {
        {zcollFloat32, 800017, 8, 0, 256, zcollQuantSymmetric, zcollRoundNearestEven, zcollSum},
        {zcollBfloat16, 120001, 4, 0, 128, zcollQuantAsymmetric, zcollRoundStochastic, zcollSum},
        {zcollFloat16, 5, 8, 0, 32, zcollQuantSymmetric, zcollRoundStochastic, zcollSum}};
    for (const QuantCase& c : cases) {
      const zcollQuantConfig_t q = c.config(7);
      const size_t es = dtypeSize(c.dtype);
      auto qwz = [&](const void* s, void* r, zcollStream_t st) {
        return zcollQuantizedAllGather(s, r, c.count, c.dtype, &q, e.comm, st);
      };
      expectTriggeredGivesHostBytes(e, inputOf(e.rank, c.count, c.dtype), c.count * n * es, qwz,
                                    "qwZ");
      expectTriggeredGivesHostBytes(e, inputOf(e.rank, c.count * n, c.dtype), c.count * n * es,
                                    qwz, "qwZ in place", true, e.rank * c.count * es);
    }
  });
}

TEST(TriggeredCalls, QuantizedReduceScatterGivesTheHostBytes) {
  // qgZ inside a node in quantized reduce steps of whole blocks: the host path's bits (each
  // chunk quantized once at the intra-node bits, fp32 sums in rank order, scaled, rounded once)
  // at 8, 4 and 16 intra bits, Sum and Avg, in place; 300007 fp32 elements take 3 steps of a
  // 1 MiB window at INT8.
  const int n = 3;
  onRingTriggered(n, [&](RankEnv& e) {
    const QuantCase cases[] = {
        {zcollFloat32, 300007, 8, 8, 256, zcollQuantSymmetric, zcollRoundNearestEven, zcollSum},
        {zcollBfloat16, 50001, 8, 4, 64, zcollQuantAsymmetric, zcollRoundStochastic, zcollAvg},
        {zcollFloat16, 7, 8, 16, 32, zcollQuantSymmetric, zcollRoundNearestEven, zcollSum}};
    for (const QuantCase& c : cases) {
      const zcollQuantConfig_t q = c.config(11);
      const size_t es = dtypeSize(c.dtype);
      expectTriggeredGivesHostBytes(e, inputOf(e.rank, c.count * n, c.dtype), c.count * es,
          [&](const void* s, void* r, zcollStream_t st) {
            return zcollQuantizedReduceScatter(s, r, c.count, c.dtype, c.op, &q, e.comm, st);
          }, "qgZ");
      expectTriggeredGivesHostBytes(e, inputOf(e.rank, c.count * n, c.dtype), c.count * n * es,
          [&](const void* s, void* r, zcollStream_t st) {
            return zcollQuantizedReduceScatter(s, static_cast<char*>(r) + e.rank * c.count * es,
                                               c.count, c.dtype, c.op, &q, e.comm, st);
          }, "qgZ in place", true);
    }
  });
}

// hpZ's forward call (exact, and quantized as qwZ) gives the host path's output and secondary
// shard, and the backward call from the device's secondaries the host's output, with no byte
// across nodes; each returns with its stream still blocked by earlier work.
void expectHpzGivesTheHostBytes(RankEnv& e, int n, int nodes) {
  zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
  q.bits = 4;
  q.blockSize = 128;
  q.rounding = zcollRoundStochastic;
  q.seed = 3;
  for (const zcollQuantConfig_t* quant : {static_cast<const zcollQuantConfig_t*>(nullptr),
                                          static_cast<const zcollQuantConfig_t*>(&q)}) {
    const char* what = quant ? "hpZ quantized" : "hpZ exact";
    const size_t count = 300001;
    const zcollDataType_t t = zcollBfloat16;
    const size_t es = dtypeSize(t);
    size_t secCount = 0;
    ASSERT_EQ(zcollSecondaryShardCount(e.comm, count, &secCount), zcollSuccess);
    ASSERT_EQ(secCount, count * nodes) << "the secondary is one shard per node";
    const Bytes in = inputOf(e.rank, count, t);
    Bytes hostOut(count * n * es), hostSec(secCount * es), hostBack(count * n * es);
    ASSERT_EQ(zcollAllGatherHier(in.data(), hostOut.data(), hostSec.data(), count, t, quant,
                                 e.comm, nullptr), zcollSuccess) << zcollGetLastError(e.comm);
    ASSERT_EQ(zcollAllGatherFromSecondary(hostSec.data(), hostBack.data(), count, t, e.comm,
                                          nullptr), zcollSuccess) << zcollGetLastError(e.comm);
    char* devIn = static_cast<char*>(e.arena.alloc(in.size()));
    char* devOut = static_cast<char*>(e.arena.alloc(hostOut.size()));
    char* devSec = static_cast<char*>(e.arena.alloc(hostSec.size()));
    char* devBack = static_cast<char*>(e.arena.alloc(hostBack.size()));
    e.arena.upload(devIn, in);
    auto kernel = std::make_shared<Gate>();
    e.arena.stream()->submit([kernel] { return kernel->wait(); }, false);
    const zcollResult_t forward =
        zcollAllGatherHier(devIn, devOut, devSec, count, t, quant, e.comm, e.arena.handle());
    const zcollResult_t backward =
        zcollAllGatherFromSecondary(devSec, devBack, count, t, e.comm, e.arena.handle());
    EXPECT_FALSE(e.arena.stream()->idle()) << what << ": the calls waited for their stream";
    kernel->open(zcollSuccess);
    ASSERT_EQ(forward, zcollSuccess) << what << ": " << zcollGetLastError(e.comm);
    ASSERT_EQ(backward, zcollSuccess) << what << ": " << zcollGetLastError(e.comm);
    EXPECT_EQ(e.arena.download(devOut, hostOut.size()), hostOut) << what << ", rank " << e.rank;
    EXPECT_EQ(e.arena.download(devSec, hostSec.size()), hostSec) << what << " secondary";
    EXPECT_EQ(e.arena.download(devBack, hostBack.size()), hostBack) << what << " backward";
    EXPECT_EQ(hostBack, hostOut) << what << ": the backward call's bits are the forward's";
    // The backward call again, alone: no byte leaves the node.
    zcollStats_t before{}, after{};
    before.size = after.size = sizeof(zcollStats_t);
    ZCOLL_EXPECT_OK(e.comm, zcollCommGetStats(e.comm, &before));
    ZCOLL_EXPECT_OK(e.comm, zcollAllGatherFromSecondary(devSec, devBack, count, t, e.comm,
                                                        e.arena.handle()));
    EXPECT_EQ(e.arena.stream()->synchronize(), zcollSuccess);
    ZCOLL_EXPECT_OK(e.comm, zcollCommGetStats(e.comm, &after));
    EXPECT_EQ(after.bytesSent[zcollPathInter], before.bytesSent[zcollPathInter])
        << what << ": the backward call sent bytes across nodes";
  }
}

TEST(TriggeredCalls, HierarchicalAllGatherAndItsBackwardGiveTheHostBytes) {
  onRingTriggered(3, [&](RankEnv& e) { expectHpzGivesTheHostBytes(e, 3, 1); });
}

// Across nodes the forward call goes by rail, then node (hpZ's own route), and the backward
// call stays inside each node: two nodes of two ranks, three of two.
TEST(TriggeredCalls, AcrossNodesHierarchicalAllGatherAndItsBackwardGiveTheHostBytes) {
  onRingTriggered(4, [&](RankEnv& e) { expectHpzGivesTheHostBytes(e, 4, 2); }, 2);
  onRingTriggered(6, [&](RankEnv& e) { expectHpzGivesTheHostBytes(e, 6, 3); }, 3);
}

TEST(TriggeredCalls, QuantizedAllReduceGivesTheHostBytes) {
  // zcollQuantizedAllReduce inside a node: qgZ's steps on the W chunks, the owners' quantized
  // gather, the tail exact (count % W elements): the host path's bits; below the size at which
  // it quantizes (256 KiB), the exact all-reduce's. 300002 fp32 elements: 100000-element chunks
  // (each 1 step per phase at INT8 in a 1 MiB window), a 2-element tail.
  const int n = 3;
  onRingTriggered(n, [&](RankEnv& e) {
    const QuantCase cases[] = {
        {zcollFloat32, 300002, 8, 8, 256, zcollQuantSymmetric, zcollRoundNearestEven, zcollSum},
        {zcollBfloat16, 400001, 4, 4, 64, zcollQuantAsymmetric, zcollRoundStochastic, zcollAvg},
        {zcollFloat16, 7, 8, 8, 32, zcollQuantSymmetric, zcollRoundNearestEven, zcollSum}};
    for (const QuantCase& c : cases) {
      const zcollQuantConfig_t q = c.config(13);
      const size_t bytes = c.count * dtypeSize(c.dtype);
      auto qar = [&](const void* s, void* r, zcollStream_t st) {
        return zcollQuantizedAllReduce(s, r, c.count, c.dtype, c.op, &q, e.comm, st);
      };
      expectTriggeredGivesHostBytes(e, inputOf(e.rank, c.count, c.dtype), bytes, qar,
                                    "quantized all-reduce");
      expectTriggeredGivesHostBytes(e, inputOf(e.rank, c.count, c.dtype), bytes, qar,
                                    "quantized all-reduce in place", true);
    }
  });
}

TEST(TriggeredCalls, QuantizedAllReduceKeepsTheHostsErrorFeedback) {
  // With residuals: two calls in a row, each compared with the host's, output and residuals
  // (the first quantization's and the owner's, coll/quantized_allreduce.h). 450000 fp32
  // elements: 150000-element chunks, 3 steps per phase (a piece's fp32 values fit the 256 KiB
  // accumulator).
  const int n = 3;
  onRingTriggered(n, [&](RankEnv& e) {
    const size_t count = 450000;
    zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
    q.bits = 4;
    q.intraBits = 4;
    q.rounding = zcollRoundStochastic;
    q.seed = 5;
    size_t resBytes = 0;
    ASSERT_EQ(zcollQuantizedAllReduceResidualSize(count, zcollFloat32, &q, e.comm, &resBytes),
              zcollSuccess);
    ASSERT_EQ(resBytes, (count + count / n) * sizeof(float));
    const Bytes in = inputOf(e.rank, count, zcollFloat32);
    Bytes hostOut(in.size()), hostRes(resBytes, 0);
    char* devIn = static_cast<char*>(e.arena.alloc(in.size()));
    char* devOut = static_cast<char*>(e.arena.alloc(in.size()));
    char* devRes = static_cast<char*>(e.arena.alloc(resBytes));
    e.arena.upload(devIn, in);
    e.arena.upload(devRes, hostRes);
    for (int call = 0; call < 2; ++call) {
      ASSERT_EQ(zcollQuantizedAllReduceWithResidual(in.data(), hostOut.data(), count,
                    zcollFloat32, zcollSum, &q, hostRes.data(), resBytes, e.comm, nullptr),
                zcollSuccess) << zcollGetLastError(e.comm);
      auto kernel = std::make_shared<Gate>();
      e.arena.stream()->submit([kernel] { return kernel->wait(); }, false);
      const zcollResult_t r = zcollQuantizedAllReduceWithResidual(devIn, devOut, count,
          zcollFloat32, zcollSum, &q, devRes, resBytes, e.comm, e.arena.handle());
      EXPECT_FALSE(e.arena.stream()->idle()) << "the call waited for its stream";
      kernel->open(zcollSuccess);
      ASSERT_EQ(r, zcollSuccess) << zcollGetLastError(e.comm);
      EXPECT_EQ(e.arena.download(devOut, in.size()), hostOut) << "call " << call;
      EXPECT_EQ(e.arena.download(devRes, resBytes), hostRes) << "residuals after call " << call;
    }
    EXPECT_NE(hostRes, Bytes(resBytes, 0)) << "the residuals kept nothing";
  });
}

TEST(TriggeredCalls, CallsOnTwoStreamsOfARankRunInCallOrder) {
  onOwnDevices(2, [&](RankEnv& e) {
    test::FakeStream other(&e.arena);
    zcollStream_t second = reinterpret_cast<zcollStream_t>(&other);
    const size_t count = 200000;
    Bytes in = inputOf(e.rank, count, zcollFloat32), host = in;
    void* dev = e.arena.alloc(in.size());
    e.arena.upload(dev, in);
    // The first call's stream is held back; the second, on another stream, must still run
    // after it (its steps chain on the first's), on the first's result.
    auto kernel = std::make_shared<Gate>();
    e.arena.stream()->submit([kernel] { return kernel->wait(); }, false);
    ZCOLL_EXPECT_OK(e.comm, zcollAllReduce(dev, dev, count, zcollFloat32, zcollSum, e.comm,
                                           e.arena.handle()));
    ZCOLL_EXPECT_OK(e.comm, zcollAllReduce(dev, dev, count, zcollFloat32, zcollSum, e.comm,
                                           second));
    kernel->open(zcollSuccess);
    EXPECT_EQ(other.synchronize(), zcollSuccess);
    for (int i = 0; i < 2; ++i)
      ASSERT_EQ(zcollAllReduce(host.data(), host.data(), count, zcollFloat32, zcollSum, e.comm,
                               nullptr), zcollSuccess);
    EXPECT_EQ(e.arena.download(dev, in.size()), host) << "rank " << e.rank;
  });
}

// Inputs that differ per replay (so a replay that reran the capture's data, or read a slot of
// another step, shows).
Bytes replayInput(int rank, size_t elems, zcollDataType_t t, int replay) {
  Bytes b(elems * dtypeSize(t));
  for (size_t i = 0; i < elems; ++i)
    test::setElement(b.data(), t, i,
                     test::inputValue(t, zcollSum, rank, 8, i + 977 * size_t(replay)) / 4);
  return b;
}

TEST(TriggeredCalls, CapturedCallsReplayWithTheHostsBytes) {
  // Three stream-triggered calls captured into one graph (an all-reduce of several steps, qwZ,
  // the quantized all-reduce), nothing run at capture; the graph then launched three times with
  // new inputs, an eager call of an odd number of steps between launches (so replays and eager
  // steps use the slots at either parity), each launch giving the host path's bytes for its
  // inputs. The handshake flags make this work: with step numbers in the flags, a replay waits
  // for and writes the capture's numbers, which the flags already hold (fails: garbage).
  const int n = 2;
  onRingTriggered(n, [&](RankEnv& e) {
    const size_t arCount = 300001, qwCount = 70001, qarCount = 300002;
    zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
    q.bits = 8;
    q.intraBits = 8;
    q.blockSize = 256;
    q.rounding = zcollRoundNearestEven;
    const size_t f = sizeof(float);
    char* ar = static_cast<char*>(e.arena.alloc(arCount * f));
    char* qwIn = static_cast<char*>(e.arena.alloc(qwCount * f));
    char* qwOut = static_cast<char*>(e.arena.alloc(qwCount * n * f));
    char* qarIn = static_cast<char*>(e.arena.alloc(qarCount * f));
    char* qarOut = static_cast<char*>(e.arena.alloc(qarCount * f));
    test::FakeStream* stream = e.arena.stream();
    zcollStream_t st = e.arena.handle();

    const uint64_t queuedBefore = stream->submittedCount();
    stream->beginCapture();
    ZCOLL_EXPECT_OK(e.comm, zcollAllReduce(ar, ar, arCount, zcollFloat32, zcollSum, e.comm, st));
    ZCOLL_EXPECT_OK(e.comm, zcollQuantizedAllGather(qwIn, qwOut, qwCount, zcollFloat32, &q,
                                                    e.comm, st));
    ZCOLL_EXPECT_OK(e.comm, zcollQuantizedAllReduce(qarIn, qarOut, qarCount, zcollFloat32,
                                                    zcollSum, &q, e.comm, st));
    std::shared_ptr<test::FakeGraph> graph = stream->endCapture();
    EXPECT_EQ(stream->submittedCount(), queuedBefore) << "the capture ran something";
    ASSERT_FALSE(graph->steps.empty());

    for (int replay = 0; replay < 3; ++replay) {
      Bytes arHost = replayInput(e.rank, arCount, zcollFloat32, replay);
      Bytes qwHostIn = replayInput(e.rank, qwCount, zcollFloat32, replay + 5);
      Bytes qarHostIn = replayInput(e.rank, qarCount, zcollFloat32, replay + 9);
      e.arena.upload(ar, arHost);
      e.arena.upload(qwIn, qwHostIn);
      e.arena.upload(qarIn, qarHostIn);
      graph->launch(*stream);
      Bytes qwHost(qwCount * n * f), qarHost(qarCount * f);
      ASSERT_EQ(zcollAllReduce(arHost.data(), arHost.data(), arCount, zcollFloat32, zcollSum,
                               e.comm, nullptr), zcollSuccess);
      ASSERT_EQ(zcollQuantizedAllGather(qwHostIn.data(), qwHost.data(), qwCount, zcollFloat32, &q,
                                        e.comm, nullptr), zcollSuccess);
      ASSERT_EQ(zcollQuantizedAllReduce(qarHostIn.data(), qarHost.data(), qarCount, zcollFloat32,
                                        zcollSum, &q, e.comm, nullptr), zcollSuccess);
      EXPECT_EQ(e.arena.download(ar, arHost.size()), arHost) << "replay " << replay;
      EXPECT_EQ(e.arena.download(qwOut, qwHost.size()), qwHost) << "replay " << replay;
      EXPECT_EQ(e.arena.download(qarOut, qarHost.size()), qarHost) << "replay " << replay;
      // An eager triggered call between launches: one step, so the next launch's steps meet
      // the slots at the other parity than the capture's.
      expectTriggeredGivesHostBytes(e, inputOf(e.rank, 1000, zcollFloat32), 1000 * n * f,
          [&](const void* s, void* r, zcollStream_t cs) {
            return zcollAllGather(s, r, 1000, zcollFloat32, e.comm, cs);
          }, "eager all-gather between launches");
    }
  });
}

TEST(TriggeredCalls, ACallWithoutATriggeredFormIsRefusedOnACapturingStream) {
  // On a comm with a ring, a call that would run synchronously (all-to-all) cannot be captured:
  // refused before anything is recorded, the comm still usable.
  onRingTriggered(2, [&](RankEnv& e) {
    const size_t count = 1000;
    void* in = e.arena.alloc(count * 2 * sizeof(float));
    void* out = e.arena.alloc(count * 2 * sizeof(float));
    test::FakeStream* stream = e.arena.stream();
    stream->beginCapture();
    EXPECT_FAILS_WITH(e.comm, zcollInvalidUsage, "has them, but not for this call",
                      zcollAllToAll(in, out, count, zcollFloat32, e.comm, e.arena.handle()));
    EXPECT_TRUE(stream->endCapture()->steps.empty()) << "the refused call recorded something";
    zcollResult_t async = zcollInternalError;
    ASSERT_EQ(zcollCommGetAsyncError(e.comm, &async), zcollSuccess);
    EXPECT_EQ(async, zcollSuccess);
    expectTriggeredGivesHostBytes(e, inputOf(e.rank, count, zcollFloat32), count * 2 * 4,
        [&](const void* s, void* r, zcollStream_t st) {
          return zcollAllGather(s, r, count, zcollFloat32, e.comm, st);
        }, "all-gather after the refusal");
  });
}

TEST(TriggeredCalls, OtherDeviceCallsDrainTheRingAndGiveTheHostBytes) {
  onOwnDevices(2, [&](RankEnv& e) {
    const size_t count = 50000;
    zcollComm_t comm = e.comm;
    for (int i = 0; i < 2; ++i) {
      expectTriggeredGivesHostBytes(e, inputOf(e.rank, count, zcollFloat32), count * 8,
          [&](const void* s, void* r, zcollStream_t st) {
            return zcollAllGather(s, r, count, zcollFloat32, comm, st);
          }, "all-gather");
      // Not triggered: runs synchronously once the ring's steps are done.
      Bytes in = inputOf(e.rank, 2 * count, zcollFloat32), host(in.size());
      void* d = e.arena.alloc(in.size());
      void* o = e.arena.alloc(in.size());
      e.arena.upload(d, in);
      ZCOLL_EXPECT_OK(comm, zcollAllToAll(in.data(), host.data(), count, zcollFloat32, comm,
                                          nullptr));
      ZCOLL_EXPECT_OK(comm, zcollAllToAll(d, o, count, zcollFloat32, comm, e.arena.handle()));
      EXPECT_EQ(e.arena.download(o, in.size()), host);
    }
  });
}

TEST(TriggeredCalls, AbortReleasesAStreamWhosePeerNeverCalls) {
  Gate called;  // rank 0's call returned: rank 1 may abort (its notice must not fail the call)
  onOwnDevices(2, [&](RankEnv& e) {
    void* dev = e.arena.alloc(4096);
    e.arena.upload(dev, Bytes(4096));
    if (e.rank == 0) {
      // Rank 1 never makes this call: rank 0's stream waits for its flags until the abort.
      ZCOLL_EXPECT_OK(e.comm, zcollAllReduce(dev, dev, 1024, zcollFloat32, zcollSum, e.comm,
                                             e.arena.handle()));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      EXPECT_FALSE(e.arena.stream()->idle());
      called.open(zcollSuccess);
    } else {
      called.wait();
    }
    EXPECT_EQ(zcollCommAbort(e.comm), zcollSuccess);
  }, /*sameDevice=*/false, /*destroy=*/false);
}

TEST(TriggeredCalls, AbortReleasesALaunchedGraphWhosePeerNeverLaunches) {
  // A graph's launch is invisible to the ring but for the mark captured with the call (a node
  // of the graph): rank 0 launches a captured all-reduce that rank 1 never launches, then both
  // abort. Rank 0's stream must get past the launch (the abort's releases, stored until the
  // launch's mark passed), and the flags stay mapped until it did.
  Gate launched;
  onOwnDevices(2, [&](RankEnv& e) {
    void* dev = e.arena.alloc(4096);
    e.arena.upload(dev, Bytes(4096));
    if (e.rank == 0) {
      test::FakeStream* stream = e.arena.stream();
      stream->beginCapture();
      ZCOLL_EXPECT_OK(e.comm, zcollAllReduce(dev, dev, 1024, zcollFloat32, zcollSum, e.comm,
                                             e.arena.handle()));
      std::shared_ptr<test::FakeGraph> graph = stream->endCapture();
      graph->launch(*stream);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      EXPECT_FALSE(stream->idle()) << "the launch did not wait for its peer";
      launched.open(zcollSuccess);
    } else {
      launched.wait();
    }
    EXPECT_EQ(zcollCommAbort(e.comm), zcollSuccess);
    EXPECT_TRUE(e.arena.stream()->idle()) << "the abort returned before the launch got past";
  }, /*sameDevice=*/false, /*destroy=*/false);
}

TEST(TriggeredCalls, AcrossNodesGathersGoThroughTheProxyAndGiveTheHostBytes) {
  // Two emulated nodes of two ranks: a gather step reads node peers' slots over cuda_ipc and
  // the other node's through the proxy (outbox, UCX, inbox), which makes no CUDA call
  // (onOwnDevices counts them). All-gather (several steps, in place too) and qwZ give the host
  // path's bytes; the quantized all-reduce above 256 KiB has no triggered form across nodes (it
  // drains the ring and runs synchronously: the host bytes too); nothing across nodes can be
  // captured.
  const int n = 4;
  onRingTriggered(n, [&](RankEnv& e) {
    zcollComm_t comm = e.comm;
    const size_t f = sizeof(float);
    for (size_t count : {size_t{300001}, size_t{7}}) {
      auto ag = [&](const void* s, void* r, zcollStream_t st) {
        return zcollAllGather(s, r, count, zcollFloat32, comm, st);
      };
      expectTriggeredGivesHostBytes(e, inputOf(e.rank, count, zcollFloat32), count * n * f, ag,
                                    "all-gather across nodes");
      expectTriggeredGivesHostBytes(e, inputOf(e.rank, count * n, zcollFloat32), count * n * f,
                                    ag, "all-gather across nodes in place", true,
                                    e.rank * count * f);
    }
    zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
    q.bits = 8;
    q.blockSize = 256;
    const size_t qc = 200003;
    expectTriggeredGivesHostBytes(e, inputOf(e.rank, qc, zcollBfloat16), qc * n * 2,
        [&](const void* s, void* r, zcollStream_t st) {
          return zcollQuantizedAllGather(s, r, qc, zcollBfloat16, &q, comm, st);
        }, "qwZ across nodes");
    // The quantized all-reduce (quantized at 400 KB): synchronous (the ring drained first), the
    // host bytes.
    const size_t rc = 100000;
    Bytes in = inputOf(e.rank, rc, zcollFloat32), host = in;
    void* dev = e.arena.alloc(in.size());
    e.arena.upload(dev, in);
    ZCOLL_EXPECT_OK(comm, zcollQuantizedAllReduce(dev, dev, rc, zcollFloat32, zcollSum, &q,
                                                  comm, e.arena.handle()));
    EXPECT_TRUE(e.arena.stream()->idle()) << "a quantized all-reduce across nodes ran triggered";
    ZCOLL_EXPECT_OK(comm, zcollQuantizedAllReduce(host.data(), host.data(), rc, zcollFloat32,
                                                  zcollSum, &q, comm, nullptr));
    EXPECT_EQ(e.arena.download(dev, in.size()), host);
    // No capture across nodes: refused before anything is recorded.
    test::FakeStream* stream = e.arena.stream();
    stream->beginCapture();
    EXPECT_FAILS_WITH(comm, zcollInvalidUsage, "spans nodes",
                      zcollAllGather(static_cast<float*>(dev) + e.rank * 10, dev, 10,
                                     zcollFloat32, comm, e.arena.handle()));
    EXPECT_TRUE(stream->endCapture()->steps.empty());
  }, /*nodes=*/2);
}

// Reduce-scatter and all-reduce across two emulated nodes of two ranks: each reduce step sends
// every rank of the other node only its part (its chunk's piece), which it sums with its node
// peers' slots in the synchronous path's order (direct / recursive doubling, ring): that path's
// bits for values whose sums depend on the order, counts below the ranks too. A reduce-scatter
// receives exactly its chunk from each rank of the other node, an all-gather its rail peer's
// piece only (the stats' inter-node bytes: the formulas of trigger/README.md).
TEST(TriggeredCalls, AcrossNodesReductionsSendEachRankItsPartAndGiveTheSyncBytes) {
  const int n = 4;
  onRingTriggered(n, [&](RankEnv& e) {
    expectReductionsGiveTheSyncBytes(e, n, {3, 1000, 120001}, {zcollFloat32, zcollBfloat16});
    // The quantized all-reduce below 256 KiB is the exact one, triggered too.
    const size_t qc = 1001;
    expectTriggeredGivesSyncBytes(e, orderSensitiveInputOf(e.rank, qc, zcollFloat32), qc * 4,
        [&](const void* s, void* r, zcollStream_t st) {
          return zcollQuantizedAllReduce(s, r, qc, zcollFloat32, zcollSum, nullptr, e.comm, st);
        }, "exact quantized all-reduce across nodes");
    const size_t count = 70001;
    const Bytes in = orderSensitiveInputOf(e.rank, count * n, zcollFloat32);
    char* devIn = static_cast<char*>(e.arena.alloc(in.size()));
    char* dev = static_cast<char*>(e.arena.alloc(count * 4));
    e.arena.upload(devIn, in);
    zcollStats_t before{}, after{};
    before.size = after.size = sizeof(zcollStats_t);
    ZCOLL_EXPECT_OK(e.comm, zcollCommGetStats(e.comm, &before));
    ZCOLL_EXPECT_OK(e.comm, zcollReduceScatter(devIn, dev, count, zcollFloat32, zcollSum, e.comm,
                                               e.arena.handle()));
    EXPECT_EQ(e.arena.stream()->synchronize(), zcollSuccess);
    ZCOLL_EXPECT_OK(e.comm, zcollCommGetStats(e.comm, &after));
    EXPECT_EQ(after.bytesRecv[zcollPathInter] - before.bytesRecv[zcollPathInter],
              2 * count * sizeof(float))
        << "a rank should receive its chunk from each of the other node's two ranks, no more";
    // An all-gather by rail, then node: each rank's piece from its rail peer on the other node
    // only (what the synchronous hierarchical algorithm brings into a node; flat, twice that).
    ZCOLL_EXPECT_OK(e.comm, zcollAllGather(devIn, dev, count, zcollFloat32, e.comm,
                                           e.arena.handle()));
    EXPECT_EQ(e.arena.stream()->synchronize(), zcollSuccess);
    zcollStats_t gathered{};
    gathered.size = sizeof(zcollStats_t);
    ZCOLL_EXPECT_OK(e.comm, zcollCommGetStats(e.comm, &gathered));
    EXPECT_EQ(gathered.bytesRecv[zcollPathInter] - after.bytesRecv[zcollPathInter],
              count * sizeof(float));
  }, /*nodes=*/2);
}

// Gathers across three nodes of two ranks go by rail, then node (each piece from the rail peers
// of the two other nodes: 2 pieces over the network per rank), across unequal nodes (3 + 2
// ranks) flat (each piece from every rank of the other node); both the host path's bytes, for
// all-gather and qwZ.
TEST(TriggeredCalls, AcrossThreeNodesAndUnequalNodesGathersGiveTheHostBytes) {
  for (const auto& [n, nodes] : {std::pair<int, int>{6, 3}, std::pair<int, int>{5, 2}}) {
    onRingTriggered(n, [&, n = n, nodes = nodes](RankEnv& e) {
      EXPECT_EQ(e.comm->trigger->equalNodes(), n == 6);
      const size_t count = 50001;
      auto ag = [&](const void* s, void* r, zcollStream_t st) {
        return zcollAllGather(s, r, count, zcollFloat32, e.comm, st);
      };
      expectTriggeredGivesHostBytes(e, inputOf(e.rank, count, zcollFloat32), count * n * 4, ag,
                                    "all-gather");
      // What a rank receives from other nodes in one triggered call: its rail peers' pieces, or
      // every piece of the other nodes.
      char* in = static_cast<char*>(e.arena.alloc(count * 4));
      char* out = static_cast<char*>(e.arena.alloc(count * n * 4));
      zcollStats_t before{}, after{};
      before.size = after.size = sizeof(zcollStats_t);
      ZCOLL_EXPECT_OK(e.comm, zcollCommGetStats(e.comm, &before));
      ZCOLL_EXPECT_OK(e.comm, ag(in, out, e.arena.handle()));
      EXPECT_EQ(e.arena.stream()->synchronize(), zcollSuccess);
      ZCOLL_EXPECT_OK(e.comm, zcollCommGetStats(e.comm, &after));
      const int localSize = static_cast<int>(e.comm->layout.nodeGroup(e.rank).size());
      const uint64_t piecesIn = n == 6 ? uint64_t(nodes - 1) : uint64_t(n - localSize);
      EXPECT_EQ(after.bytesRecv[zcollPathInter] - before.bytesRecv[zcollPathInter],
                piecesIn * count * 4);
      zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
      q.bits = 8;
      q.blockSize = 256;
      const size_t qc = 70001;
      expectTriggeredGivesHostBytes(e, inputOf(e.rank, qc, zcollBfloat16), qc * n * 2,
          [&](const void* s, void* r, zcollStream_t st) {
            return zcollQuantizedAllGather(s, r, qc, zcollBfloat16, &q, e.comm, st);
          }, "qwZ");
    }, nodes);
  }
}

// Calls across nodes return once enqueued, however many: the second does not wait for the
// first's proxy operation (which waits for the stream, held here by a kernel queued before them
// that ends only after they all returned: waiting would deadlock until the timeout).
TEST(TriggeredCalls, AcrossNodesCallsReturnWhileTheirStreamIsHeld) {
  const int n = 4;
  onRingTriggered(n, [&](RankEnv& e) {
    const size_t count = 100003;
    const Bytes in = inputOf(e.rank, count, zcollFloat32);
    Bytes host(count * n * 4);
    ZCOLL_EXPECT_OK(e.comm, zcollAllGather(in.data(), host.data(), count, zcollFloat32, e.comm,
                                           nullptr));
    char* devIn = static_cast<char*>(e.arena.alloc(in.size()));
    e.arena.upload(devIn, in);
    std::vector<char*> outs;
    auto kernel = std::make_shared<Gate>();
    e.arena.stream()->submit([kernel] { return kernel->wait(); }, false);
    const auto start = std::chrono::steady_clock::now();
    for (int call = 0; call < 3; ++call) {
      outs.push_back(static_cast<char*>(e.arena.alloc(host.size())));
      ZCOLL_EXPECT_OK(e.comm, zcollAllGather(devIn, outs.back(), count, zcollFloat32, e.comm,
                                             e.arena.handle()));
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10))
        << "a call waited for an earlier call's proxy operation";
    EXPECT_FALSE(e.arena.stream()->idle());
    kernel->open(zcollSuccess);
    for (char* out : outs) EXPECT_EQ(e.arena.download(out, host.size()), host);
  }, /*nodes=*/2);
}

TEST(TriggeredCalls, AcrossNodesAnAbortReleasesAStreamWhoseRemotePeerNeverCalls) {
  // Rank 0 (node 0) gathers; the other node's ranks never call, so its stream waits for the
  // proxy's inbox flags, the proxy for its peers' messages. An abort fails the proxy's
  // operation and releases the stream. No rank aborts before both callers saw their streams
  // held (an abort anywhere reaches every rank and releases theirs).
  Gate called;
  std::atomic<int> held{0};
  onOwnDevices(4, [&](RankEnv& e) {
    void* in = e.arena.alloc(4096);
    void* out = e.arena.alloc(4 * 4096);
    e.arena.upload(in, Bytes(4096));
    ASSERT_NE(e.comm->trigger, nullptr) << e.comm->triggerWhy;
    if (e.rank < 2) {
      ZCOLL_EXPECT_OK(e.comm, zcollAllGather(in, out, 1024, zcollFloat32, e.comm,
                                             e.arena.handle()));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      EXPECT_FALSE(e.arena.stream()->idle());
      if (++held == 2) called.open(zcollSuccess);
    }
    called.wait();
    EXPECT_EQ(zcollCommAbort(e.comm), zcollSuccess);
    EXPECT_TRUE(e.arena.stream()->idle()) << "the abort returned with the stream still held";
  }, /*sameDevice=*/false, /*destroy=*/false, /*nodes=*/2);
}

TEST(TriggeredCalls, RanksOfOneProcessOnOneDeviceRunSynchronouslyAndSaySo) {
  onOwnDevices(2, [&](RankEnv& e) {
    EXPECT_EQ(e.comm->trigger, nullptr);
    EXPECT_NE(e.comm->triggerWhy.find("one process on one device"), std::string::npos)
        << e.comm->triggerWhy;
    Bytes in = inputOf(e.rank, 1000, zcollFloat32), host = in;
    void* dev = e.arena.alloc(in.size());
    e.arena.upload(dev, in);
    ZCOLL_EXPECT_OK(e.comm, zcollAllReduce(dev, dev, 1000, zcollFloat32, zcollSum, e.comm,
                                           e.arena.handle()));
    EXPECT_TRUE(e.arena.stream()->idle()) << "a synchronous call returned before its work ran";
    ZCOLL_EXPECT_OK(e.comm, zcollAllReduce(host.data(), host.data(), 1000, zcollFloat32,
                                           zcollSum, e.comm, nullptr));
    EXPECT_EQ(e.arena.download(dev, in.size()), host);
  }, /*sameDevice=*/true);
}

}  // namespace
}  // namespace zcoll
