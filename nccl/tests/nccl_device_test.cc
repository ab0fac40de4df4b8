// NCCL's API on device buffers, on a CPU: the stand-in device of tests/support (fake_device.h)
// is installed, so arena pointers are device buffers to zcoll, and NCCL calls queue on the
// rank's stream as on a GPU. 4 ranks as threads over 2 emulated nodes; every NCCL call on
// device buffers must leave exactly the bytes the same zcoll* call leaves on host buffers.
//
// Why not the C program (nccl_api_check.c): the stand-in is installed inside a test process
// through zcoll's internal device component, which a program linked against libzcoll.so cannot
// reach. So this test compiles libzcoll_nccl.so's sources into itself over the internal static
// library, and makes its communicators with tests/support's runOwningRanks (emulated nodes are a
// host identity per thread, which ncclCommInitRank has no argument for) and adopts them as NCCL
// communicators (adoptComm); nccl_api_check covers NCCL's own init, on host buffers.
#include <gtest/gtest.h>
#include <nccl.h>

#include <functional>
#include <string>
#include <vector>

#include "comm.h"
#include "types.h"
#include "support/fake_device.h"
#include "support/ranks.h"
#include "support/values.h"
#include "zcoll/zcoll_nccl.h"

namespace zcoll {
namespace {

using Bytes = std::vector<unsigned char>;
using test::FakeDevice;
using test::FakeDeviceArena;
using test::RankSetup;

Bytes floatsOf(int rank, size_t n) {
  Bytes b(n * 4);
  for (size_t i = 0; i < n; ++i)
    test::setElement(b.data(), zcollFloat32, i, test::inputValue(zcollFloat32, zcollSum, rank, 8, i) / 4);
  return b;
}

struct Rank {
  FakeDeviceArena& arena;
  ncclComm_t comm;
  zcollComm_t z;
  int rank;
  int n;
};

// Runs `nccl` on device copies of `bufs` and `host` (the zcoll call) on host copies; every
// buffer must end with the same bytes.
void expectSame(Rank& r, const std::vector<Bytes>& bufs, const char* what,
                const std::function<ncclResult_t(const std::vector<void*>&, cudaStream_t)>& nccl,
                const std::function<zcollResult_t(const std::vector<void*>&)>& host) {
  std::vector<Bytes> h = bufs;
  std::vector<void*> hp, dp;
  for (Bytes& b : h) hp.push_back(b.data());
  for (const Bytes& b : bufs) {
    dp.push_back(r.arena.alloc(b.size()));
    r.arena.upload(dp.back(), b);
  }
  ASSERT_EQ(host(hp), zcollSuccess) << what << " (zcoll, host): " << zcollGetLastError(nullptr);
  ASSERT_EQ(nccl(dp, reinterpret_cast<cudaStream_t>(r.arena.handle())), ncclSuccess)
      << what << " (NCCL, device): " << ncclGetLastError(nullptr);
  for (size_t i = 0; i < bufs.size(); ++i)
    EXPECT_EQ(r.arena.download(dp[i], bufs[i].size()), h[i])
        << what << ": buffer " << i << " differs on rank " << r.rank;
}

void everyCall(Rank& r) {
  const size_t c = 700;
  const int w = r.n;
  const Bytes in = floatsOf(r.rank, c), inW = floatsOf(r.rank, c * w);
  const Bytes out(c * 4), outW(c * w * 4);
  zcollComm_t z = r.z;
  ncclComm_t comm = r.comm;
  expectSame(r, {in, outW}, "all-gather",
             [&](auto& p, cudaStream_t s) { return ncclAllGather(p[0], p[1], c, ncclFloat32, comm, s); },
             [&](auto& p) { return zcollAllGather(p[0], p[1], c, zcollFloat32, z, nullptr); });
  expectSame(r, {inW, out}, "reduce-scatter",
             [&](auto& p, cudaStream_t s) { return ncclReduceScatter(p[0], p[1], c, ncclFloat32, ncclSum, comm, s); },
             [&](auto& p) { return zcollReduceScatter(p[0], p[1], c, zcollFloat32, zcollSum, z, nullptr); });
  expectSame(r, {inW, outW}, "all-reduce",
             [&](auto& p, cudaStream_t s) { return ncclAllReduce(p[0], p[1], c * w, ncclFloat32, ncclSum, comm, s); },
             [&](auto& p) { return zcollAllReduce(p[0], p[1], c * w, zcollFloat32, zcollSum, z, nullptr); });
  expectSame(r, {in, out}, "broadcast",
             [&](auto& p, cudaStream_t s) { return ncclBroadcast(p[0], p[1], c, ncclFloat32, 1, comm, s); },
             [&](auto& p) { return zcollBroadcast(p[0], p[1], c, zcollFloat32, 1, z, nullptr); });
  expectSame(r, {in, out}, "reduce",
             [&](auto& p, cudaStream_t s) { return ncclReduce(p[0], p[1], c, ncclFloat32, ncclMax, 2, comm, s); },
             [&](auto& p) { return zcollReduce(p[0], p[1], c, zcollFloat32, zcollMax, 2, z, nullptr); });
  expectSame(r, {inW, outW}, "all-to-all",
             [&](auto& p, cudaStream_t s) { return ncclAlltoAll(p[0], p[1], c, ncclFloat32, comm, s); },
             [&](auto& p) { return zcollAllToAll(p[0], p[1], c, zcollFloat32, z, nullptr); });
  expectSame(r, {in, outW}, "gather",
             [&](auto& p, cudaStream_t s) { return ncclGather(p[0], p[1], c, ncclFloat32, 3, comm, s); },
             [&](auto& p) { return zcollGather(p[0], p[1], c, zcollFloat32, 3, z, nullptr); });
  expectSame(r, {inW, out}, "scatter",
             [&](auto& p, cudaStream_t s) { return ncclScatter(p[0], p[1], c, ncclFloat32, 0, comm, s); },
             [&](auto& p) { return zcollScatter(p[0], p[1], c, zcollFloat32, 0, z, nullptr); });
  const int next = (r.rank + 1) % w, prev = (r.rank + w - 1) % w;
  expectSame(r, {in, out, out}, "group: all-reduce + send/recv ring",
             [&](auto& p, cudaStream_t s) {
               ncclResult_t e = ncclGroupStart();
               if (e == ncclSuccess) e = ncclAllReduce(p[0], p[1], c, ncclFloat32, ncclSum, comm, s);
               if (e == ncclSuccess) e = ncclSend(p[0], c, ncclFloat32, next, comm, s);
               if (e == ncclSuccess) e = ncclRecv(p[2], c, ncclFloat32, prev, comm, s);
               ncclResult_t end = ncclGroupEnd();
               return e != ncclSuccess ? e : end;
             },
             [&](auto& p) {
               zcollResult_t e = zcollGroupStart();
               if (e == zcollSuccess) e = zcollAllReduce(p[0], p[1], c, zcollFloat32, zcollSum, z, nullptr);
               if (e == zcollSuccess) e = zcollSend(p[0], c, zcollFloat32, next, z, nullptr);
               if (e == zcollSuccess) e = zcollRecv(p[2], c, zcollFloat32, prev, z, nullptr);
               zcollResult_t end = zcollGroupEnd();
               return e != zcollSuccess ? e : end;
             });
  // zcoll's vendor extension on device buffers: qwZ at INT8.
  ncclConfigExt_t bits = {nullptr, {ZCOLL_NCCL_VENDOR_ID, ZCOLL_NCCL_OPT_BITS}, {8}};
  ncclCollConfig_t cfg = NCCL_COLLCONFIG_INITIALIZER;
  cfg.ext = &bits;
  zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
  q.bits = 8;
  expectSame(r, {in, outW}, "qwZ via ncclAllGatherConfig",
             [&](auto& p, cudaStream_t s) { return ncclAllGatherConfig(p[0], p[1], c, ncclFloat32, comm, s, &cfg); },
             [&](auto& p) { return zcollQuantizedAllGather(p[0], p[1], c, zcollFloat32, &q, z, nullptr); });
}

Bytes valuesOf(zcollDataType_t t, int rank, size_t n) {
  Bytes b(n * test::typeSize(t));
  for (size_t i = 0; i < n; ++i)
    test::setElement(b.data(), t, i, test::inputValue(t, zcollSum, rank, 8, i) / 4);
  return b;
}

// `in` times the scalar (held in `scalar`, one element of t), as NCCL's PreMulSum scales: one
// rounding of the exact product (fp32 holds the product of two 16-bit floats exactly, double
// that of two floats, so rounding the double product once is the same).
Bytes scaledBy(const Bytes& in, zcollDataType_t t, const Bytes& scalar) {
  Bytes out(in.size());
  const double s = test::getElement(scalar.data(), t, 0);
  for (size_t i = 0; i < in.size() / test::typeSize(t); ++i)
    test::setElement(out.data(), t, i, test::getElement(in.data(), t, i) * s);
  return out;
}

// PreMulSum on device buffers (the scalar in host memory or in device memory, the call alone or
// in a group) leaves the bytes of the same call on host buffers and of zcoll's Sum on inputs the
// test scaled itself: all-reduce and reduce-scatter, for the floating types.
void preMulSum(Rank& r) {
  const size_t c = 700;
  const int w = r.n;
  zcollComm_t z = r.z;
  ncclComm_t comm = r.comm;
  const ncclDataType_t types[] = {ncclFloat32, ncclFloat16, ncclBfloat16, ncclFloat64};
  for (ncclDataType_t nt : types) {
    const zcollDataType_t t = static_cast<zcollDataType_t>(nt);
    const size_t es = test::typeSize(t);
    Bytes scalar(es);
    test::setElement(scalar.data(), t, 0, 1.3 + 0.1 * r.rank);  // rounded into t
    void* deviceScalar = r.arena.alloc(es);
    r.arena.upload(deviceScalar, scalar);
    for (bool onDevice : {false, true}) {
      for (bool grouped : {false, true}) {
        ncclRedOp_t op;
        ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, onDevice ? deviceScalar : scalar.data(), nt,
                                           onDevice ? ncclScalarDevice : ncclScalarHostImmediate,
                                           comm), ncclSuccess) << ncclGetLastError(nullptr);
        const std::string what = std::string("PreMulSum ") + zcoll_nccl::typeName(nt) +
                                 (onDevice ? ", device scalar" : ", host scalar") +
                                 (grouped ? ", in a group" : "");
        auto inGroup = [&](const std::function<ncclResult_t()>& call) {
          if (!grouped) return call();
          ncclResult_t e = ncclGroupStart();
          if (e == ncclSuccess) e = call();
          ncclResult_t end = ncclGroupEnd();
          return e != ncclSuccess ? e : end;
        };
        const Bytes in = valuesOf(t, r.rank, c), inW = valuesOf(t, r.rank, c * w);
        const Bytes out(c * es), outW(c * w * es);
        // The host side: NCCL's call on host buffers (the host scalar: a device one is not
        // readable there), which must equal zcoll's Sum on the test's scaled input.
        ncclRedOp_t hostOp;
        ASSERT_EQ(ncclRedOpCreatePreMulSum(&hostOp, scalar.data(), nt, ncclScalarHostImmediate,
                                           comm), ncclSuccess);
        expectSame(r, {in, outW}, (what + " all-reduce").c_str(),
                   [&](auto& p, cudaStream_t s) {
                     return inGroup([&] { return ncclAllReduce(p[0], p[1], c, nt, op, comm, s); });
                   },
                   [&](auto& p) {
                     EXPECT_EQ(ncclAllReduce(p[0], p[1], c, nt, hostOp, comm, nullptr), ncclSuccess)
                         << ncclGetLastError(nullptr);
                     Bytes ref(c * es), scaled = scaledBy(in, t, scalar);
                     zcollResult_t e = zcollAllReduce(scaled.data(), ref.data(), c, t, zcollSum, z, nullptr);
                     EXPECT_EQ(Bytes(static_cast<unsigned char*>(p[1]), static_cast<unsigned char*>(p[1]) + ref.size()), ref)
                         << what << " all-reduce on host buffers differs from zcoll's Sum of the scaled input";
                     return e;
                   });
        expectSame(r, {inW, out}, (what + " reduce-scatter").c_str(),
                   [&](auto& p, cudaStream_t s) {
                     return inGroup([&] { return ncclReduceScatter(p[0], p[1], c, nt, op, comm, s); });
                   },
                   [&](auto& p) {
                     EXPECT_EQ(ncclReduceScatter(p[0], p[1], c, nt, hostOp, comm, nullptr), ncclSuccess)
                         << ncclGetLastError(nullptr);
                     Bytes ref(c * es), scaled = scaledBy(inW, t, scalar);
                     zcollResult_t e = zcollReduceScatter(scaled.data(), ref.data(), c, t, zcollSum, z, nullptr);
                     EXPECT_EQ(Bytes(static_cast<unsigned char*>(p[1]), static_cast<unsigned char*>(p[1]) + ref.size()), ref)
                         << what << " reduce-scatter on host buffers differs from zcoll's Sum of the scaled input";
                     return e;
                   });
        EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
        EXPECT_EQ(ncclRedOpDestroy(hostOp, comm), ncclSuccess);
      }
    }
    // A device scalar cannot be read by the host path: host buffers refuse it, naming it.
    ncclRedOp_t op;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, deviceScalar, nt, ncclScalarDevice, comm), ncclSuccess);
    Bytes hin = valuesOf(t, r.rank, c), hout(c * es);
    EXPECT_EQ(ncclAllReduce(hin.data(), hout.data(), c, nt, op, comm, nullptr), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("ncclScalarDevice"), std::string::npos);
    EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
  }
}

TEST(NcclDevice, EveryCallOnTheStandInDeviceGivesZcollsHostBytes) {
  FakeDevice device;  // like CUDA: its calls are synchronous
  runOwningRanks(RankSetup{4, 2}, [&](int rank, zcollComm_t z) {
    FakeDeviceArena arena;
    FakeDeviceArena::Scope scope(&arena);
    ncclComm_t comm = zcoll_nccl::adoptComm(z);
    Rank r{arena, comm, z, rank, 4};
    everyCall(r);
    preMulSum(r);
    EXPECT_EQ(zcollBarrier(z, nullptr), zcollSuccess);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
}

// The stand-in's component, describing its device as ordinal 2 (the stand-in always says 0), so
// ncclCommCuDevice shows it reports the communicator's device, not a constant.
Result describeDeviceTwo(DeviceIdentity* out) {
  Result r = test::fakeDescribeDevice(out);
  out->ordinal = 2;
  return r;
}

TEST(NcclDevice, CuDeviceIsTheDeviceTheCommWasMadeOnAndItsChildrens) {
  FakeDevice device;
  DeviceComponent onDeviceTwo = *deviceComponent();
  onDeviceTwo.describeDevice = describeDeviceTwo;
  setDeviceComponent(&onDeviceTwo);
  runOwningRanks(RankSetup{2, 1}, [&](int rank, zcollComm_t z) {
    ncclComm_t comm = zcoll_nccl::adoptComm(z);
    int dev = -1;
    ASSERT_EQ(ncclCommCuDevice(comm, &dev), ncclSuccess);
    EXPECT_EQ(dev, 2);
    int zdev = -1;
    EXPECT_EQ(zcollCommDevice(z, &zdev), zcollSuccess);
    EXPECT_EQ(zdev, 2);
    ncclComm_t child = nullptr;
    ASSERT_EQ(ncclCommSplit(comm, 0, rank, &child, nullptr), ncclSuccess)
        << ncclGetLastError(nullptr);
    dev = -1;
    ASSERT_EQ(ncclCommCuDevice(child, &dev), ncclSuccess);
    EXPECT_EQ(dev, 2);
    EXPECT_EQ(ncclCommCuDevice(comm, nullptr), ncclInvalidArgument);
    EXPECT_EQ(ncclCommDestroy(child), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
}

}  // namespace
}  // namespace zcoll
