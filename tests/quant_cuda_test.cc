// CUDA quantization kernels: byte-identical to the CPU kernels for every operation, dtype, bits
// and mode (skipped without a device, saying why), many quantization blocks per warp with zero,
// constant and non-finite blocks after ordinary ones, argument errors before any launch, and
// launch failures reported as zcollCudaError (checked on machines without a GPU too).
#include <gtest/gtest.h>

#include "quant_support.h"

#if ZCOLL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cuda/quant_cuda.h"
#include "support/cuda_device.h"

namespace zcoll {
namespace quant {
namespace test {
namespace {

namespace qc = ::zcoll::quant::cuda;

// Device buffer holding a copy of host bytes (or n zero bytes).
struct DevBuf {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DevBuf(size_t n) : bytes(n) {
    EXPECT_EQ(cudaMalloc(&p, n ? n : 16), cudaSuccess);
    EXPECT_EQ(cudaMemset(p, 0xcd, n ? n : 16), cudaSuccess);
  }
  explicit DevBuf(const Bytes& b) : DevBuf(b.size()) {
    EXPECT_EQ(cudaMemcpy(p, b.data(), b.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DevBuf() { cudaFree(p); }
  Bytes get() const {
    Bytes b(bytes);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(b.data(), p, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return b;
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

// Why the device tests cannot run here ("" when a device is there): the CUDA runtime's answer.
std::string noDeviceReason() { return zcoll::test::noCudaDeviceReason(); }

#define SKIP_WITHOUT_GPU()                                         \
  do {                                                             \
    if (!qc::cudaDeviceAvailable()) GTEST_SKIP() << noDeviceReason(); \
  } while (0)

TEST(QuantCuda, DeviceQueryNeverAborts) {
  bool a = qc::cudaDeviceAvailable();
  EXPECT_EQ(a, qc::cudaDeviceAvailable());  // stable, no abort
}

TEST(QuantCuda, BadArgumentsFailBeforeLaunch) {
  alignas(16) static uint8_t buf[4096];
  QuantParams ok = makeParams(8, 64, true);
  QuantParams bad = makeParams(6, 64, true);
  cudaStream_t s = nullptr;
  EXPECT_EQ(qc::quantize(buf, zcollFloat32, 64, bad, buf + 2048, s), zcollInvalidArgument);
  EXPECT_EQ(qc::quantize(buf, zcollInt32, 64, ok, buf + 2048, s), zcollInvalidArgument);
  EXPECT_EQ(qc::quantize(buf, zcollFloat32, 64, ok, buf + 2049, s), zcollInvalidArgument);
  EXPECT_NE(threadLastError().find("16-byte aligned"), std::string::npos);
  EXPECT_EQ(qc::quantize(nullptr, zcollFloat32, 64, ok, buf, s), zcollInvalidArgument);
  EXPECT_EQ(qc::quantize(buf + 1, zcollFloat16, 64, ok, buf + 2048, s), zcollInvalidArgument);
  const void* many[2 * qc::kParamChunks + 2];
  for (auto& m : many) m = buf;
  EXPECT_EQ(qc::dequantizeSum(many, 0, 64, ok, 1.0f, buf + 2048, zcollFloat32, s),
            zcollInvalidArgument);
  EXPECT_EQ(qc::dequantReduceRequant(many, 0, 64, ok, ok, buf + 2048, s), zcollInvalidArgument);
  // Beyond kParamChunks too, every chunk is checked before anything is allocated or launched.
  many[qc::kParamChunks + 1] = buf + 1;
  EXPECT_EQ(qc::dequantizeSum(many, qc::kParamChunks + 2, 64, ok, 1.0f, buf + 2048, zcollFloat32,
                              s),
            zcollInvalidArgument);
  EXPECT_EQ(qc::dequantReduceRequant(many, 2 * qc::kParamChunks + 2, 64, ok, ok, buf + 2048, s),
            zcollInvalidArgument);
  many[qc::kParamChunks + 1] = nullptr;
  EXPECT_EQ(qc::dequantizeSum(many, qc::kParamChunks + 2, 64, ok, 1.0f, buf + 2048, zcollFloat32,
                              s),
            zcollInvalidArgument);
  const int order[2] = {1, 5};
  EXPECT_EQ(qc::quantizeChunks(buf, zcollFloat32, 32, 2, order, ok, buf + 2048, s),
            zcollInvalidArgument);
}

// Without a device a launch must fail loudly, never return success having done nothing.
TEST(QuantCuda, LaunchWithoutDeviceIsACudaError) {
  if (qc::cudaDeviceAvailable()) GTEST_SKIP() << "a device is present";
  alignas(16) static uint8_t buf[4096];
  EXPECT_EQ(qc::quantize(buf, zcollFloat32, 64, makeParams(8, 64, true), buf + 2048, nullptr),
            zcollCudaError);
  EXPECT_NE(threadLastError().find("launch failed"), std::string::npos);
  (void)cudaGetLastError();
  // More chunks than the kernel parameters carry: the device chunk list cannot be made.
  QuantParams p = makeParams(8, 64, true);
  const void* many[2 * qc::kParamChunks + 2];
  for (auto& m : many) m = buf;
  for (int k : {qc::kParamChunks + 1, 2 * qc::kParamChunks + 2}) {
    EXPECT_EQ(qc::dequantizeSum(many, k, 64, p, 1.0f, buf + 2048, zcollFloat32, nullptr),
              zcollCudaError);
    EXPECT_NE(threadLastError().find("chunk list"), std::string::npos);
    EXPECT_EQ(qc::dequantReduceRequant(many, k, 64, p, p, buf + 2048, nullptr), zcollCudaError);
    EXPECT_NE(threadLastError().find("chunk list"), std::string::npos);
  }
  (void)cudaGetLastError();
}

using Cfg = std::tuple<zcollDataType_t, int, bool, bool>;  // dtype, bits, symmetric, stochastic

class QuantCudaVsCpu : public ::testing::TestWithParam<Cfg> {
 protected:
  zcollDataType_t dt() const { return std::get<0>(GetParam()); }
  QuantParams params(int block) const {
    QuantParams p = makeParams(std::get<1>(GetParam()), block, std::get<2>(GetParam()),
                               std::get<3>(GetParam()), 321);
    p.elementOffset = (uint64_t{1} << 32) - 100;  // crosses the hash's 2^32 boundary
    return p;
  }
};

TEST_P(QuantCudaVsCpu, QuantizeAndDequantizeByteIdentical) {
  SKIP_WITHOUT_GPU();
  for (size_t n : {size_t{1}, size_t{7}, size_t{255}, size_t{257}, size_t{100003}}) {
    for (size_t skew : {size_t{0}, size_t{1}}) {  // 1: unaligned input, scalar loads
      QuantParams p = params(256);
      std::vector<float> x = genData(Dist::kHeavyTailed, n + skew, dt(), n);
      x[n / 2 + skew] = n > 300 ? NAN : x[n / 2 + skew];
      Bytes in = toDtype(x, dt());
      size_t off = skew * dtypeSize(dt());
      Bytes cpu(quantizedBytes(n, p));
      ASSERT_EQ(quantize(in.data() + off, dt(), n, p, cpu.data()), zcollSuccess);
      DevBuf din(in), dq(cpu.size());
      ASSERT_EQ(qc::quantize(static_cast<uint8_t*>(din.p) + off, dt(), n, p, dq.p, nullptr),
                zcollSuccess);
      ASSERT_EQ(firstDiff(dq.get(), cpu), SIZE_MAX) << "quantize n=" << n << " skew=" << skew;
      Bytes cpuOut(dequantizedBytes(n, dt()));
      ASSERT_EQ(dequantize(cpu.data(), n, p, cpuOut.data(), dt()), zcollSuccess);
      DevBuf dout(cpuOut.size());
      ASSERT_EQ(qc::dequantize(dq.p, n, p, dout.p, dt(), nullptr), zcollSuccess);
      ASSERT_EQ(firstDiff(dout.get(), cpuOut), SIZE_MAX) << "dequantize n=" << n;
    }
  }
}

TEST_P(QuantCudaVsCpu, ChunksSumAndRequantByteIdentical) {
  SKIP_WITHOUT_GPU();
  const size_t chunkElems = 1001, nChunks = 4;
  const int order[nChunks] = {2, 0, 3, 1};
  QuantParams p = params(128);
  std::vector<float> x = genData(Dist::kGaussian, chunkElems * nChunks, dt(), 77);
  Bytes in = toDtype(x, dt());
  size_t slot = quantizedBytes(chunkElems, p);
  Bytes cpu(quantizedChunksBytes(chunkElems, nChunks, p));
  ASSERT_EQ(quantizeChunks(in.data(), dt(), chunkElems, nChunks, order, p, cpu.data()),
            zcollSuccess);
  DevBuf din(in), dq(cpu.size());
  ASSERT_EQ(qc::quantizeChunks(din.p, dt(), chunkElems, nChunks, order, p, dq.p, nullptr),
            zcollSuccess);
  ASSERT_EQ(firstDiff(dq.get(), cpu), SIZE_MAX) << "quantizeChunks";

  const void* hostChunks[nChunks];
  const void* devChunks[nChunks];
  for (size_t c = 0; c < nChunks; ++c) {
    hostChunks[c] = cpu.data() + c * slot;
    devChunks[c] = static_cast<uint8_t*>(dq.p) + c * slot;
  }
  Bytes sum(dequantizedBytes(chunkElems, dt()));
  ASSERT_EQ(dequantizeSum(hostChunks, nChunks, chunkElems, p, 0.25f, sum.data(), dt()),
            zcollSuccess);
  DevBuf dsum(sum.size());
  ASSERT_EQ(qc::dequantizeSum(devChunks, nChunks, chunkElems, p, 0.25f, dsum.p, dt(), nullptr),
            zcollSuccess);
  ASSERT_EQ(firstDiff(dsum.get(), sum), SIZE_MAX) << "dequantizeSum";

  QuantParams outP = makeParams(p.bits == 8 ? 4 : 8, 64, !p.symmetric, p.stochastic, 5);
  Bytes rq(requantizedBytes(chunkElems, outP));
  ASSERT_EQ(dequantReduceRequant(hostChunks, nChunks, chunkElems, p, outP, rq.data()),
            zcollSuccess);
  DevBuf drq(rq.size());
  ASSERT_EQ(qc::dequantReduceRequant(devChunks, nChunks, chunkElems, p, outP, drq.p, nullptr),
            zcollSuccess);
  ASSERT_EQ(firstDiff(drq.get(), rq), SIZE_MAX) << "dequantReduceRequant";
}

// More chunks than a launch carries in its parameters (qgZ beyond 64 ranks or nodes): the
// pointers reach the kernel through a device array. The chunks are summed in a permuted order
// (the sum's bits depend on it) and the last slot has a non-finite block, so a pointer looked up
// wrongly changes the bytes. The host pointer array is overwritten right after each call, before
// the stream has run: it must have been read by then.
TEST_P(QuantCudaVsCpu, ManyChunksSumAndRequantByteIdentical) {
  SKIP_WITHOUT_GPU();
  const size_t chunkElems = 1001;
  for (int k : {qc::kParamChunks + 1, 2 * qc::kParamChunks + 2}) {  // 65, 130
    QuantParams p = params(128);
    std::vector<float> x = genData(Dist::kGaussian, chunkElems * k, dt(), 1000 + k);
    x[(k - 1) * chunkElems + 300] = NAN;  // chunk k - 1, block 2
    Bytes in = toDtype(x, dt());
    size_t slot = quantizedBytes(chunkElems, p);
    Bytes cpu(quantizedChunksBytes(chunkElems, k, p));
    ASSERT_EQ(quantizeChunks(in.data(), dt(), chunkElems, k, nullptr, p, cpu.data()),
              zcollSuccess);
    DevBuf dq(cpu);

    std::vector<const void*> hostChunks(k), devChunks(k);
    for (int c = 0; c < k; ++c) {
      int from = (c * 37 + 11) % k;  // a permutation (37 is prime to 65 and 130)
      hostChunks[c] = cpu.data() + from * slot;
      devChunks[c] = static_cast<uint8_t*>(dq.p) + from * slot;
    }
    Bytes sum(dequantizedBytes(chunkElems, dt()));
    float scale = 1.0f / static_cast<float>(k);
    ASSERT_EQ(dequantizeSum(hostChunks.data(), k, chunkElems, p, scale, sum.data(), dt()),
              zcollSuccess);
    DevBuf dsum(sum.size());
    std::vector<const void*> arg = devChunks;
    ASSERT_EQ(qc::dequantizeSum(arg.data(), k, chunkElems, p, scale, dsum.p, dt(), nullptr),
              zcollSuccess);
    std::fill(arg.begin(), arg.end(), nullptr);
    ASSERT_EQ(firstDiff(dsum.get(), sum), SIZE_MAX) << "dequantizeSum k=" << k;

    QuantParams outP = makeParams(p.bits == 8 ? 4 : 8, 64, !p.symmetric, p.stochastic, 5);
    Bytes rq(requantizedBytes(chunkElems, outP));
    ASSERT_EQ(dequantReduceRequant(hostChunks.data(), k, chunkElems, p, outP, rq.data()),
              zcollSuccess);
    DevBuf drq(rq.size());
    arg = devChunks;
    ASSERT_EQ(qc::dequantReduceRequant(arg.data(), k, chunkElems, p, outP, drq.p, nullptr),
              zcollSuccess);
    std::fill(arg.begin(), arg.end(), nullptr);
    ASSERT_EQ(firstDiff(drq.get(), rq), SIZE_MAX) << "dequantReduceRequant k=" << k;
  }
}

std::string cfgName(const ::testing::TestParamInfo<Cfg>& info) {
  return std::string(dtName(std::get<0>(info.param))) + "_int" +
         std::to_string(std::get<1>(info.param)) + (std::get<2>(info.param) ? "_sym" : "_asym") +
         (std::get<3>(info.param) ? "_sr" : "_rne");
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantCudaVsCpu,
                         ::testing::Combine(::testing::Values(zcollFloat32, zcollFloat16,
                                                              zcollBfloat16),
                                            ::testing::Values(8, 4, 16), ::testing::Bool(),
                                            ::testing::Bool()),
                         cfgName);

// ---- Many quantization blocks per warp ----------------------------------------------------------
// A warp (a thread, for the dequantizing kernels) loops over many blocks when the tensor is larger
// than the grid; state kept across that loop leaks from one block into the next. Blocks that are
// all zero, constant (asymmetric: scale 0) or not finite write all-zero codes (WIRE_FORMAT.md), so
// they must follow ordinary blocks in the same warp: the launches run with the default grid and
// with the grid capped at 1 and 3 CUDA blocks (thousands of blocks per warp), and every byte is
// compared with the CPU kernels'.

// Restores the default grid when the test ends (or fails).
struct GridCap {
  explicit GridCap(int blocks) { qc::setMaxGridForTesting(blocks); }
  ~GridCap() { qc::setMaxGridForTesting(0); }
  GridCap(const GridCap&) = delete;
  GridCap& operator=(const GridCap&) = delete;
};

constexpr int kGridCaps[] = {0, 1, 3};  // 0: the default grid

// Chunk c of the sum: Gaussian values with, for every chunk alike, regions of 4096 elements that
// are zero (r % 4 == 1) or constant (r % 8 == 7), and single 64-element blocks that are zero
// ((i / 64) % 7 == 3); chunk 1 alone has a NaN in regions r % 8 == 6.
std::vector<float> blockyChunk(size_t n, int c) {
  std::vector<float> x = genData(Dist::kGaussian, n, zcollFloat32, 500 + c);
  for (size_t i = 0; i < n; ++i) {
    size_t r = i / 4096;
    if (r % 4 == 1 || (i / 64) % 7 == 3) x[i] = 0.0f;
    if (r % 8 == 7) x[i] = 1.5f;
    if (c == 1 && r % 8 == 6 && i % 4096 == 100) x[i] = NAN;
  }
  return x;
}

using BlocksCfg = std::tuple<int, bool, bool>;  // bits, symmetric, stochastic

class QuantCudaManyBlocks : public ::testing::TestWithParam<BlocksCfg> {
 protected:
  QuantParams params(int block, uint64_t seed, uint64_t offset) const {
    QuantParams p = makeParams(std::get<0>(GetParam()), block, std::get<1>(GetParam()),
                               std::get<2>(GetParam()), seed);
    p.elementOffset = offset;
    return p;
  }
};

TEST_P(QuantCudaManyBlocks, ZeroAndNonFiniteBlocksAfterOthersByteIdentical) {
  SKIP_WITHOUT_GPU();
  constexpr int k = 3;
  for (size_t n : {size_t{1} << 20, (size_t{1} << 20) - 37}) {
    QuantParams in = params(128, 7, 0);
    std::vector<Bytes> cpu(k);
    std::vector<std::unique_ptr<DevBuf>> dev;
    const void* hostChunks[k];
    const void* devChunks[k];
    for (int c = 0; c < k; ++c) {
      Bytes x = toDtype(blockyChunk(n, c), zcollFloat32);
      cpu[c].resize(quantizedBytes(n, in));
      ASSERT_EQ(quantize(x.data(), zcollFloat32, n, in, cpu[c].data()), zcollSuccess);
      DevBuf dx(x);
      for (int cap : kGridCaps) {
        GridCap g(cap);
        DevBuf dq(cpu[c].size());
        ASSERT_EQ(qc::quantize(dx.p, zcollFloat32, n, in, dq.p, nullptr), zcollSuccess);
        ASSERT_EQ(firstDiff(dq.get(), cpu[c]), SIZE_MAX)
            << "quantize n=" << n << " chunk " << c << " grid cap " << cap;
      }
      dev.push_back(std::make_unique<DevBuf>(cpu[c]));
      hostChunks[c] = cpu[c].data();
      devChunks[c] = dev.back()->p;
    }

    Bytes sum(dequantizedBytes(n, zcollFloat32));
    ASSERT_EQ(dequantizeSum(hostChunks, k, n, in, 0.5f, sum.data(), zcollFloat32), zcollSuccess);
    for (int cap : kGridCaps) {
      GridCap g(cap);
      DevBuf dsum(sum.size());
      ASSERT_EQ(qc::dequantizeSum(devChunks, k, n, in, 0.5f, dsum.p, zcollFloat32, nullptr),
                zcollSuccess);
      ASSERT_EQ(firstDiff(dsum.get(), sum), SIZE_MAX) << "dequantizeSum n=" << n << " cap " << cap;
    }

    // Output blocks of 1 to 16 groups of 8 a lane (8 down to 3 warps per CUDA block).
    for (int outBlock : {32, 64, 256, 512, 1024, 2048, 4096}) {
      QuantParams out = params(outBlock, 11, 12345);
      Bytes rq(requantizedBytes(n, out));
      ASSERT_EQ(dequantReduceRequant(hostChunks, k, n, in, out, rq.data()), zcollSuccess);
      for (int cap : kGridCaps) {
        GridCap g(cap);
        DevBuf drq(rq.size());
        ASSERT_EQ(qc::dequantReduceRequant(devChunks, k, n, in, out, drq.p, nullptr),
                  zcollSuccess);
        size_t d = firstDiff(drq.get(), rq);
        ASSERT_EQ(d, SIZE_MAX) << "dequantReduceRequant n=" << n << " out " << paramStr(out)
                               << " grid cap " << cap << ": first different byte " << d;
      }
    }
  }
}

std::string blocksName(const ::testing::TestParamInfo<BlocksCfg>& info) {
  return "int" + std::to_string(std::get<0>(info.param)) +
         (std::get<1>(info.param) ? "_sym" : "_asym") + (std::get<2>(info.param) ? "_sr" : "_rne");
}

INSTANTIATE_TEST_SUITE_P(BitsModes, QuantCudaManyBlocks,
                         ::testing::Combine(::testing::Values(8, 4), ::testing::Bool(),
                                            ::testing::Bool()),
                         blocksName);

}  // namespace
}  // namespace test
}  // namespace quant
}  // namespace zcoll

#else  // built without CUDA

TEST(QuantCuda, NotBuilt) { GTEST_SKIP() << "zcoll built without CUDA (ZCOLL_WITH_CUDA=OFF, or no nvcc at configure time)"; }

#endif
