// Executors (src/exec/executor.h): algorithms do their data work through the call's executor and
// keep its ordering contract, so an executor that runs asynchronously (the CUDA one, on a stream)
// gives the same bytes as the host one.
//
// On the CPU the contract is checked with a deferred executor: it records every operation and
// runs them only at flush(), as a stream runs kernels after the launch returns. Every registered
// algorithm, run through it, must give the host executor's bytes: an algorithm that sent a
// buffer before flushing, reused a receive buffer an operation still reads, or handed an
// operation a pointer array that died before the flush, gives different bytes or crashes.
// With a GPU, the CUDA executor's operations are checked byte for byte against the host's.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "base/dtype.h"
#include "coll/coll.h"
#include "coll/quantized_allreduce.h"
#include "coll/zeropp_config.h"
#include "core/comm.h"
#include "exec/executor.h"
#include "exec/scratch.h"
#include "support/fake_device.h"
#include "support/ranks.h"
#include "support/values.h"

#ifdef ZCOLL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <chrono>
#include <thread>

#include "cuda/executor_cuda.h"
#include "cuda/quant_cuda.h"
#endif

namespace zcoll {
namespace {

using test::DeferredExecutor;
using test::FakeDevice;
using test::FakeDeviceArena;
using test::FakeDeviceExecutor;
using test::Placement;
using test::RankSetup;
using test::runRanks;

constexpr int kRoot = 1;

// One call's buffers and arguments for `kind` on `rank` (W ranks, count elements per shard).
struct Call {
  std::vector<unsigned char> send, recv;
  std::vector<size_t> sendCounts, sendDispls, recvCounts, recvDispls;
  QuantSettings quant;
  CollArgs args{};
};

size_t allToAllvCount(int from, int to) { return 10 + 7 * static_cast<size_t>(from) + 3 * to; }

void fill(std::vector<unsigned char>* buf, zcollDataType_t t, size_t n, int rank) {
  buf->assign(n * dtypeSize(t), 0);
  for (size_t i = 0; i < n; ++i)
    test::setElement(buf->data(), t, i, test::inputValue(t, zcollSum, rank, 8, i) / 4);
}

void makeCall(CollKind kind, zcollComm* comm, zcollDataType_t t, zcollRedOp_t op, size_t count,
              Call* c) {
  const int w = comm->nranks, me = comm->rank;
  size_t sendN = count, recvN = count;
  switch (kind) {
    case CollKind::kAllGather:
    case CollKind::kQuantizedAllGather:
    case CollKind::kAllGatherHier:
    case CollKind::kGather: recvN = w * count; break;
    case CollKind::kAllGatherFromSecondary:
      sendN = comm->layout.nodes * count;  // the secondary shard
      recvN = w * count;
      break;
    case CollKind::kReduceScatter:
    case CollKind::kQuantizedReduceScatter:
    case CollKind::kScatter: sendN = w * count; break;
    case CollKind::kAllToAll: sendN = recvN = w * count; break;
    case CollKind::kAllToAllv:
      for (int p = 0; p < w; ++p) {
        c->sendCounts.push_back(allToAllvCount(me, p));
        c->recvCounts.push_back(allToAllvCount(p, me));
      }
      c->sendDispls.assign(w, 0);
      c->recvDispls.assign(w, 0);
      for (int p = 1; p < w; ++p) {
        c->sendDispls[p] = c->sendDispls[p - 1] + c->sendCounts[p - 1];
        c->recvDispls[p] = c->recvDispls[p - 1] + c->recvCounts[p - 1];
      }
      sendN = c->sendDispls[w - 1] + c->sendCounts[w - 1];
      recvN = c->recvDispls[w - 1] + c->recvCounts[w - 1];
      break;
    default: break;
  }
  fill(&c->send, t, sendN, me);
  c->recv.assign(recvN * dtypeSize(t), 0);
  c->args = CollArgs{c->send.data(), c->recv.data(), count, t, op, kRoot};
  if (kind == CollKind::kAllToAllv) {
    c->args.sendCounts = c->sendCounts.data();
    c->args.sendDispls = c->sendDispls.data();
    c->args.recvCounts = c->recvCounts.data();
    c->args.recvDispls = c->recvDispls.data();
  }
  const bool grads = kind == CollKind::kQuantizedReduceScatter;
  ASSERT_EQ(readQuantConfig(nullptr, grads ? kDefaultGradBits : kDefaultAllGatherBits,
                            kDefaultGradBits, t, "test", &c->quant),
            zcollSuccess);
  c->args.quant = &c->quant;
  c->args.pipelineDepth = 2;
}

// Runs `algo` with the host executor and with a deferred one; both must write the same bytes.
void expectDeferredGivesHostBytes(const Algorithm& algo, zcollComm* comm, zcollDataType_t t,
                                  zcollRedOp_t op, int* issued) {
  const size_t count = 300;  // not a multiple of the 256-element quantization block
  Call host, deferred;
  makeCall(algo.kind, comm, t, op, count, &host);
  makeCall(algo.kind, comm, t, op, count, &deferred);
  DeferredExecutor exec;
  deferred.args.exec = &exec;
  ASSERT_EQ(algo.run(comm, host.args), zcollSuccess) << algo.name << ": " << threadLastError();
  ASSERT_EQ(algo.run(comm, deferred.args), zcollSuccess) << algo.name << ": " << threadLastError();
  ASSERT_EQ(exec.flush(), zcollSuccess);
  *issued += exec.issued();
  ASSERT_EQ(host.recv.size(), deferred.recv.size());
  auto diff = std::mismatch(host.recv.begin(), host.recv.end(), deferred.recv.begin());
  EXPECT_TRUE(diff.first == host.recv.end())
      << collKindName(algo.kind) << " " << algo.name << " " << dtypeName(t) << " " << opName(op)
      << " rank " << comm->rank << ": first different byte at offset "
      << (diff.first - host.recv.begin()) << " of " << host.recv.size();
}

bool isReduction(CollKind k) {
  return k == CollKind::kReduceScatter || k == CollKind::kAllReduce || k == CollKind::kReduce ||
         k == CollKind::kQuantizedReduceScatter || k == CollKind::kQuantizedAllReduce;
}

TEST(Executor, EveryAlgorithmThroughADeferredExecutorGivesTheHostBytes) {
  const RankSetup s{4, 2, Placement::kContiguous};
  const std::vector<Algorithm>& algos = allAlgorithms();
  std::vector<std::vector<int>> issued(s.nranks, std::vector<int>(algos.size(), 0));
  runRanks(s, [&](int rank, zcollComm_t comm) {
    for (size_t i = 0; i < algos.size(); ++i) {
      for (zcollDataType_t t : {zcollFloat32, zcollBfloat16}) {
        for (zcollRedOp_t op : {zcollSum, zcollAvg}) {
          if (op == zcollAvg && !isReduction(algos[i].kind)) continue;
          expectDeferredGivesHostBytes(algos[i], comm, t, op, &issued[rank][i]);
        }
      }
    }
  });
  // Every algorithm did its data work through the executor (on some rank).
  for (size_t i = 0; i < algos.size(); ++i) {
    int total = 0;
    for (int r = 0; r < s.nranks; ++r) total += issued[r][i];
    EXPECT_GT(total, 0) << collKindName(algos[i].kind) << " " << algos[i].name;
  }
}

TEST(Executor, EveryAlgorithmOnDeviceBuffersGivesTheHostBytes) {
  // 2 nodes x 2: device bytes go over cuda_ipc inside a node and staged between nodes (and to
  // the rank itself), whose chunks take shm or ucx.
  const RankSetup s{4, 2, Placement::kCyclic};
  const std::vector<Algorithm>& algos = allAlgorithms();
  FakeDevice device;  // before the comms: their device routes are chosen at init
  runRanks(s, [&](int, zcollComm_t comm) {
    FakeDeviceArena arena;
    FakeDeviceArena::Scope scope(&arena);
    for (const Algorithm& algo : algos) {
      const bool qgz = algo.kind == CollKind::kQuantizedReduceScatter ||
                       algo.kind == CollKind::kQuantizedAllReduce;
      for (zcollDataType_t t : {zcollFloat32, zcollBfloat16})
      for (int intraBits : {0, 16}) {  // 16: qgZ's intra hop as 16-bit floats
        if (intraBits != 0 && !qgz) continue;
        const size_t count = 300;
        Call host, dev;
        makeCall(algo.kind, comm, t, zcollSum, count, &host);
        makeCall(algo.kind, comm, t, zcollSum, count, &dev);
        for (Call* c : {&host, &dev})
          if (intraBits != 0) c->quant.intra.bits = intraBits;
        void* dsend = arena.alloc(dev.send.size());
        void* drecv = arena.alloc(dev.recv.size());
        arena.upload(dsend, dev.send);
        arena.upload(drecv, dev.recv);
        FakeDeviceExecutor exec;
        dev.args.send = dsend;
        dev.args.recv = drecv;
        dev.args.exec = &exec;
        ASSERT_EQ(algo.run(comm, host.args), zcollSuccess) << algo.name << ": " << threadLastError();
        ASSERT_EQ(algo.run(comm, dev.args), zcollSuccess) << algo.name << ": " << threadLastError();
        ASSERT_EQ(exec.flush(), zcollSuccess);
        EXPECT_EQ(arena.download(drecv, dev.recv.size()), host.recv)
            << collKindName(algo.kind) << " " << algo.name << " " << dtypeName(t)
            << " intraBits " << intraBits << " rank " << comm->rank;
      }
    }
    for (int r = 0; r < comm->nranks; ++r) EXPECT_TRUE(comm->deviceRouted(r)) << r;
  });
}

// The quantized all-reduce with error feedback: the residual buffer in device memory, updated
// by the executor's data work, gives the host's outputs and residuals over repeated calls.
TEST(Executor, QuantizedAllReduceWithFeedbackOnDeviceBuffersGivesTheHostBytes) {
  const Algorithm* algo = findAlgorithm(CollKind::kQuantizedAllReduce, "qgz_then_qwz");
  ASSERT_NE(algo, nullptr);
  FakeDevice device;
  for (RankSetup s : {RankSetup{4, 2, Placement::kCyclic}, RankSetup{4, 1}}) {
    runRanks(s, [&](int, zcollComm_t comm) {
      FakeDeviceArena arena;
      FakeDeviceArena::Scope scope(&arena);
      const size_t count = 1203;  // chunks of 300 (not a block multiple) and an exact tail of 3
      const QarSplit split = qarSplit(comm, count);
      Call host, dev;
      makeCall(CollKind::kQuantizedAllReduce, comm, zcollBfloat16, zcollSum, count, &host);
      makeCall(CollKind::kQuantizedAllReduce, comm, zcollBfloat16, zcollSum, count, &dev);
      std::vector<unsigned char> hres(split.residualBytes(), 0);
      void* dres = arena.alloc(hres.size());
      arena.upload(dres, hres);
      auto carve = [&](CollArgs* a, void* base) {
        float* r = static_cast<float*>(base);
        a->firstResidual = r;
        a->partialResidual = split.partialElems ? r + split.firstElems : nullptr;
        a->ownerResidual = r + split.firstElems + split.partialElems;
      };
      carve(&host.args, hres.data());
      carve(&dev.args, dres);
      void* dsend = arena.alloc(dev.send.size());
      void* drecv = arena.alloc(dev.recv.size());
      arena.upload(dsend, dev.send);
      FakeDeviceExecutor exec;
      dev.args.send = dsend;
      dev.args.recv = drecv;
      dev.args.exec = &exec;
      for (int k = 0; k < 3; ++k) {  // the residuals carry over
        ASSERT_EQ(algo->run(comm, host.args), zcollSuccess) << threadLastError();
        ASSERT_EQ(algo->run(comm, dev.args), zcollSuccess) << threadLastError();
        ASSERT_EQ(exec.flush(), zcollSuccess);
        EXPECT_EQ(arena.download(drecv, dev.recv.size()), host.recv) << "call " << k;
        EXPECT_EQ(arena.download(dres, hres.size()), hres) << "call " << k;
      }
      EXPECT_NE(hres, std::vector<unsigned char>(hres.size(), 0));  // feedback did run
    });
  }
}

TEST(Executor, HostBuffersGetTheHostExecutorAndDeviceBuffersAClearAnswer) {
  std::unique_ptr<Executor> owned;
  Executor* e = nullptr;
  ASSERT_EQ(makeExecutor(MemKind::kHost, nullptr, -1, &owned, &e), zcollSuccess);
  EXPECT_EQ(e, &hostExecutor());
  EXPECT_EQ(owned, nullptr);
  EXPECT_STREQ(e->name(), "host");

  e = nullptr;
  Result r = makeExecutor(MemKind::kDevice, nullptr, 0, &owned, &e);
#ifdef ZCOLL_HAVE_CUDA
  if (quant::cuda::cudaDeviceAvailable()) {
    ASSERT_EQ(r, zcollSuccess);
    EXPECT_STREQ(e->name(), "cuda");
    EXPECT_EQ(e->memKind(), MemKind::kDevice);
    return;
  }
#endif
  EXPECT_EQ(r, zcollUnsupported);
  EXPECT_EQ(e, nullptr);
  EXPECT_NE(threadLastError().find("device buffers"), std::string::npos) << threadLastError();
}

TEST(Executor, StageCopyCountsSelfBytesAndSkipsACopyOntoItself) {
  runRanks(RankSetup{}, [&](int, zcollComm_t comm) {
    Stage st(comm, hostExecutor());
    std::vector<char> a(100, 'a'), b(100, 'b');
    const uint64_t before = comm->stats.sent[zcollPathSelf].load();
    ASSERT_EQ(st.copy(b.data(), a.data(), 60), zcollSuccess);
    ASSERT_EQ(st.copy(b.data(), b.data(), 100), zcollSuccess);
    EXPECT_EQ(std::string(b.begin(), b.begin() + 60), std::string(60, 'a'));
    EXPECT_EQ(std::string(b.begin() + 60, b.end()), std::string(40, 'b'));
    EXPECT_EQ(comm->stats.sent[zcollPathSelf].load() - before, 60u);
  });
}

// Memory whose release is not ordered after the call's own work (CUDA: a stream-ordered free on
// zcoll's stream) is never released while scratch grows, since a call may still use it.
int gAllocs = 0, gReleases = 0;
Result countedAlloc(size_t bytes, void** out) {
  ++gAllocs;
  return hostMemory().alloc(bytes, out);
}
void countedRelease(void* p) {
  ++gReleases;
  hostMemory().release(p);
}

TEST(Scratch, OutgrownDeviceRegionsAreKeptUntilReleaseAndHostOnesFreedAtOnce) {
  const MemoryOps device{"waits", countedAlloc, countedRelease, true};
  const MemoryOps host{"host-like", countedAlloc, countedRelease, false};
  gAllocs = gReleases = 0;
  {
    Scratch s;
    void* p = nullptr;
    ASSERT_EQ(s.get(100, device, &p), zcollSuccess);
    ASSERT_EQ(s.get(100, device, &p), zcollSuccess);  // fits: no new region
    EXPECT_EQ(gAllocs, 1);
    for (size_t bytes : {200, 300, 5000, 5001}) ASSERT_EQ(s.get(bytes, device, &p), zcollSuccess);
    EXPECT_EQ(gAllocs, 4);  // 125, then at least twofold: 250, 500, 6250 (5001 fits)
    EXPECT_EQ(gReleases, 0);
    s.release();
    EXPECT_EQ(gReleases, 4);
    ASSERT_EQ(s.get(100, host, &p), zcollSuccess);
    ASSERT_EQ(s.get(1000, host, &p), zcollSuccess);
    EXPECT_EQ(gReleases, 5);  // the outgrown host region went at once
  }
  EXPECT_EQ(gReleases, 6);
  EXPECT_EQ(gAllocs, 6);
}

#ifdef ZCOLL_HAVE_CUDA
// ---- The CUDA executor against the host executor (skipped without a GPU) ----------------------

class CudaExecutorTest : public testing::Test {
 protected:
  void SetUp() override {
    if (!quant::cuda::cudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device available";
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
    int device = 0;
    ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
    ASSERT_EQ(makeCudaExecutor(stream_, device, &cuda_), zcollSuccess);
  }
  void TearDown() override {
    for (void* p : allocs_) cudaFree(p);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  void* toDevice(const std::vector<unsigned char>& h) {
    void* d = nullptr;
    EXPECT_EQ(cudaMalloc(&d, h.size() + 16), cudaSuccess);
    allocs_.push_back(d);
    EXPECT_EQ(cudaMemcpy(d, h.data(), h.size(), cudaMemcpyHostToDevice), cudaSuccess);
    return d;
  }
  std::vector<unsigned char> toHost(const void* d, size_t bytes) {
    EXPECT_EQ(cuda_->flush(), zcollSuccess);
    std::vector<unsigned char> h(bytes);
    EXPECT_EQ(cudaMemcpy(h.data(), d, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Executor> cuda_;
  std::vector<void*> allocs_;
};

TEST_F(CudaExecutorTest, ReductionsGiveTheHostBytesForEveryTypeAndOp) {
  const size_t n = 1000;
  for (zcollDataType_t t : test::kAllTypes) {
    for (zcollRedOp_t op : test::kAllOps) {
      std::vector<unsigned char> a, b;
      fill(&a, t, n, 1);
      fill(&b, t, n, 2);
      const size_t as = isHalfType(t) ? 4 : dtypeSize(t);
      // host: acc = a; acc op= b; acc op= acc-typed a; out = acc (/3 for Avg); comb = a op b
      std::vector<unsigned char> acc(n * as), out(n * dtypeSize(t)), comb(n * dtypeSize(t));
      Executor& h = hostExecutor();
      ASSERT_EQ(h.toAcc(acc.data(), a.data(), t, n), zcollSuccess);
      ASSERT_EQ(h.accumulate(acc.data(), b.data(), false, t, op, n), zcollSuccess);
      std::vector<unsigned char> accA(n * as);
      ASSERT_EQ(h.toAcc(accA.data(), a.data(), t, n), zcollSuccess);
      ASSERT_EQ(h.accumulate(acc.data(), accA.data(), true, t, op, n), zcollSuccess);
      ASSERT_EQ(h.fromAcc(out.data(), acc.data(), t, op, 3, n), zcollSuccess);
      ASSERT_EQ(h.combine(comb.data(), a.data(), b.data(), t, op, 2, n), zcollSuccess);

      void* da = toDevice(a);
      void* db = toDevice(b);
      void* dacc = toDevice(std::vector<unsigned char>(n * as));
      void* daccA = toDevice(std::vector<unsigned char>(n * as));
      void* dout = toDevice(std::vector<unsigned char>(out.size()));
      void* dcomb = toDevice(std::vector<unsigned char>(comb.size()));
      ASSERT_EQ(cuda_->toAcc(dacc, da, t, n), zcollSuccess);
      ASSERT_EQ(cuda_->accumulate(dacc, db, false, t, op, n), zcollSuccess);
      ASSERT_EQ(cuda_->toAcc(daccA, da, t, n), zcollSuccess);
      ASSERT_EQ(cuda_->accumulate(dacc, daccA, true, t, op, n), zcollSuccess);
      ASSERT_EQ(cuda_->fromAcc(dout, dacc, t, op, 3, n), zcollSuccess);
      ASSERT_EQ(cuda_->combine(dcomb, da, db, t, op, 2, n), zcollSuccess);
      EXPECT_EQ(toHost(dout, out.size()), out) << dtypeName(t) << " " << opName(op);
      EXPECT_EQ(toHost(dcomb, comb.size()), comb) << dtypeName(t) << " " << opName(op);
    }
  }
}

TEST_F(CudaExecutorTest, CopyAndQuantizationGiveTheHostBytes) {
  const size_t n = 3000;
  std::vector<unsigned char> x;
  fill(&x, zcollBfloat16, 4 * n, 3);
  quant::QuantParams p;
  p.bits = 4;
  const size_t qb = quant::quantizedBytes(n, p);
  Executor& h = hostExecutor();
  std::vector<unsigned char> q(4 * qb), sum(n * 2), req(qb), deq(n * 2);
  const int order[4] = {2, 0, 3, 1};
  ASSERT_EQ(h.quantizeChunks(x.data(), zcollBfloat16, n, 4, order, p, q.data()), zcollSuccess);
  const void* chunks[4] = {q.data(), q.data() + qb, q.data() + 2 * qb, q.data() + 3 * qb};
  ASSERT_EQ(h.dequantizeSum(chunks, 4, n, p, 0.25f, sum.data(), zcollBfloat16), zcollSuccess);
  ASSERT_EQ(h.dequantReduceRequant(chunks, 4, n, p, p, req.data()), zcollSuccess);
  ASSERT_EQ(h.dequantize(req.data(), n, p, deq.data(), zcollBfloat16), zcollSuccess);

  void* dx = toDevice(x);
  void* dcopy = toDevice(std::vector<unsigned char>(x.size()));
  void* dq = toDevice(std::vector<unsigned char>(q.size()));
  void* dsum = toDevice(std::vector<unsigned char>(sum.size()));
  void* dreq = toDevice(std::vector<unsigned char>(req.size()));
  void* ddeq = toDevice(std::vector<unsigned char>(deq.size()));
  ASSERT_EQ(cuda_->copy(dcopy, dx, x.size()), zcollSuccess);
  ASSERT_EQ(cuda_->quantizeChunks(dcopy, zcollBfloat16, n, 4, order, p, dq), zcollSuccess);
  char* dqc = static_cast<char*>(dq);
  const void* dchunks[4] = {dqc, dqc + qb, dqc + 2 * qb, dqc + 3 * qb};
  ASSERT_EQ(cuda_->dequantizeSum(dchunks, 4, n, p, 0.25f, dsum, zcollBfloat16), zcollSuccess);
  ASSERT_EQ(cuda_->dequantReduceRequant(dchunks, 4, n, p, p, dreq), zcollSuccess);
  ASSERT_EQ(cuda_->dequantize(dreq, n, p, ddeq, zcollBfloat16), zcollSuccess);
  EXPECT_EQ(toHost(dcopy, x.size()), x);
  EXPECT_EQ(toHost(dq, q.size()), q);
  EXPECT_EQ(toHost(dsum, sum.size()), sum);
  EXPECT_EQ(toHost(dreq, req.size()), req);
  EXPECT_EQ(toHost(ddeq, deq.size()), deq);
}

// A host function that keeps its stream busy for a while (it makes no CUDA call).
void CUDART_CB sleepOnStream(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }

// makeSideExecutor: every side executor, on a pooled stream taken again after an earlier side
// executor gave it back (or beside another one alive at the same time), starts only after the
// work queued on the caller's stream before it was made.
TEST_F(CudaExecutorTest, SideExecutorsStartAfterTheCallersWorkWithPooledStreams) {
  const size_t bytes = size_t{1} << 20;
  void* src = toDevice(std::vector<unsigned char>(bytes));
  void* dst = toDevice(std::vector<unsigned char>(bytes));
  void* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault), cudaSuccess);
  for (int round = 0; round < 6; ++round) {
    const unsigned char value = static_cast<unsigned char>(0x10 + round);
    std::memset(pinned, value, bytes);
    // On the caller's stream: a delay, then this round's bytes into src.
    ASSERT_EQ(cudaLaunchHostFunc(stream_, sleepOnStream, nullptr), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(src, pinned, bytes, cudaMemcpyHostToDevice, stream_), cudaSuccess);
    std::unique_ptr<Executor> side, other;
    ASSERT_EQ(cuda_->makeSideExecutor(&side), zcollSuccess);
    if (round % 2 == 1) {  // two taken at once
      ASSERT_EQ(cuda_->makeSideExecutor(&other), zcollSuccess);
    }
    Executor& e = round % 2 == 1 ? *other : *side;
    ASSERT_EQ(e.copy(dst, src, bytes), zcollSuccess);
    ASSERT_EQ(e.flush(), zcollSuccess);
    std::vector<unsigned char> got(bytes);
    ASSERT_EQ(cudaMemcpy(got.data(), dst, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(std::count(got.begin(), got.end(), value), static_cast<long>(bytes))
        << "round " << round;
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);  // before pinned is rewritten
  }
  cudaFreeHost(pinned);
}
#endif  // ZCOLL_HAVE_CUDA

}  // namespace
}  // namespace zcoll
