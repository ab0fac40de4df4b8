// CUDA reduction kernels (cuda/reduce_cuda.h) against the CPU kernels (src/exec/reduce_kernels.h),
// byte for byte, for every dtype and reduction (and PreMulSum's scale): 16-byte packs when the operands align, element by
// element when they cannot, every split of head / packs / tail (element offsets 0..3 per operand,
// sizes around the pack sizes), and nothing written outside [0, n). Skipped without a device,
// saying why; a launch without a device is a zcollCudaError (checked here too).
#include <gtest/gtest.h>

#if ZCOLL_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/result.h"
#include "cuda/reduce_cuda.h"
#include "exec/reduce_kernels.h"
#include "support/cuda_device.h"

namespace zcoll {
namespace {

using Bytes = std::vector<uint8_t>;

std::string noDeviceReason() { return zcoll::test::noCudaDeviceReason(); }

#define SKIP_WITHOUT_GPU()                                     \
  do {                                                         \
    std::string why = noDeviceReason();                        \
    if (!why.empty()) GTEST_SKIP() << why;                     \
  } while (0)

const zcollDataType_t kTypes[] = {zcollInt8,    zcollUint8,   zcollInt32,   zcollUint32,
                                  zcollInt64,   zcollUint64,  zcollFloat16, zcollFloat32,
                                  zcollFloat64, zcollBfloat16};
const zcollRedOp_t kOps[] = {zcollSum, zcollProd, zcollMax, zcollMin, zcollAvg};

// n elements of dt: random bits for integers; for floats small multiples of 1/8 (finite, no NaN
// payloads to compare; products and averages still round), stored in dt.
Bytes values(zcollDataType_t dt, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  size_t es = dtypeSize(dt);
  Bytes b(n * es);
  for (size_t i = 0; i < n; ++i) {
    float f = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 8.0f;
    uint8_t* p = b.data() + i * es;
    switch (dt) {
      case zcollFloat16: { half_t h = floatToHalf(f); std::memcpy(p, &h, 2); break; }
      case zcollBfloat16: { bf16_t h = floatToBf16(f); std::memcpy(p, &h, 2); break; }
      case zcollFloat32: std::memcpy(p, &f, 4); break;
      case zcollFloat64: { double d = f; std::memcpy(p, &d, 8); break; }
      default:
        for (size_t k = 0; k < es; ++k) p[k] = static_cast<uint8_t>(rng());
    }
  }
  return b;
}

// Accumulator elements (fp32 for 16-bit floats) holding the values of `values(dt, ...)`.
Bytes accValues(zcollDataType_t dt, size_t n, uint32_t seed) {
  Bytes v = values(dt, n, seed);
  if (accSize(dt) == dtypeSize(dt)) return v;
  Bytes a(n * 4);
  toAcc(a.data(), v.data(), dt, n);
  return a;
}

// A device region of `guard + n + guard` elements of size es, element offset `off` from a
// 256-byte aligned allocation; filled from host bytes (guards 0xa5).
struct Region {
  void* base = nullptr;
  size_t es, n, off, total;
  static constexpr size_t kGuard = 40;
  Region(size_t es_, size_t n_, size_t off_, const Bytes& init) : es(es_), n(n_), off(off_) {
    total = (off + kGuard + n + kGuard) * es;
    EXPECT_EQ(cudaMalloc(&base, total), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(base, hostImage(init).data(), total, cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~Region() { cudaFree(base); }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  void* p() const { return static_cast<uint8_t*>(base) + (off + kGuard) * es; }
  Bytes hostImage(const Bytes& init) const {  // the region's bytes with `init` at [0, n)
    Bytes h(total, 0xa5);
    std::memcpy(h.data() + (off + kGuard) * es, init.data(), n * es);
    return h;
  }
  Bytes get() const {
    Bytes h(total);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(h.data(), base, total, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

std::string where(zcollDataType_t dt, int op, size_t n, size_t o1, size_t o2, size_t o3) {
  return std::string(" dtype ") + std::to_string(static_cast<int>(dt)) + " op " +
         std::to_string(op) + " n " + std::to_string(n) + " offsets " + std::to_string(o1) + "," +
         std::to_string(o2) + "," + std::to_string(o3);
}

constexpr size_t kSizes[] = {1, 3, 8, 15, 16, 17, 33, 1000, 65537};
constexpr size_t kOffsets[][3] = {{0, 0, 0}, {1, 1, 1}, {3, 3, 3}, {0, 1, 0}, {2, 0, 0}, {0, 0, 3}};

TEST(ReduceCuda, ToAccAndFromAccByteIdentical) {
  SKIP_WITHOUT_GPU();
  for (zcollDataType_t dt : kTypes) {
    size_t es = dtypeSize(dt), as = accSize(dt);
    for (size_t n : kSizes) {
      for (const auto& o : kOffsets) {
        Bytes in = values(dt, n, 1 + static_cast<uint32_t>(n));
        Bytes cpu(n * as, 0);
        toAcc(cpu.data(), in.data(), dt, n);
        Region dacc(as, n, o[0], Bytes(n * as, 0)), din(es, n, o[1], in);
        ASSERT_EQ(cuda::toAcc(dacc.p(), din.p(), dt, n, nullptr), zcollSuccess);
        ASSERT_EQ(dacc.get(), dacc.hostImage(cpu)) << "toAcc" << where(dt, 0, n, o[0], o[1], 0);

        Bytes acc = accValues(dt, n, 7 + static_cast<uint32_t>(n));
        for (zcollRedOp_t op : {zcollSum, zcollAvg}) {
          Bytes out(n * es, 0);
          fromAcc(out.data(), acc.data(), dt, op, 3, n);
          Region dout(es, n, o[0], Bytes(n * es, 0)), dsrc(as, n, o[2], acc);
          ASSERT_EQ(cuda::fromAcc(dout.p(), dsrc.p(), dt, op, 3, n, nullptr), zcollSuccess);
          ASSERT_EQ(dout.get(), dout.hostImage(out))
              << "fromAcc" << where(dt, op, n, o[0], o[2], 0);
        }
      }
    }
  }
}

TEST(ReduceCuda, AccumulateByteIdentical) {
  SKIP_WITHOUT_GPU();
  for (zcollDataType_t dt : kTypes) {
    size_t es = dtypeSize(dt), as = accSize(dt);
    for (zcollRedOp_t op : kOps) {
      for (bool inIsAcc : {false, true}) {
        for (size_t n : kSizes) {
          for (const auto& o : kOffsets) {
            Bytes acc = accValues(dt, n, 11 + static_cast<uint32_t>(n));
            Bytes in = inIsAcc ? accValues(dt, n, 13) : values(dt, n, 13);
            Bytes cpu = acc;
            accumulate(cpu.data(), in.data(), inIsAcc, dt, op, n);
            Region dacc(as, n, o[0], acc), din(inIsAcc ? as : es, n, o[1], in);
            ASSERT_EQ(cuda::accumulate(dacc.p(), din.p(), inIsAcc, dt, op, n, nullptr),
                      zcollSuccess);
            ASSERT_EQ(dacc.get(), dacc.hostImage(cpu))
                << "accumulate inIsAcc=" << inIsAcc << where(dt, op, n, o[0], o[1], 0);
          }
        }
      }
    }
  }
}

TEST(ReduceCuda, CombineByteIdentical) {
  SKIP_WITHOUT_GPU();
  for (zcollDataType_t dt : kTypes) {
    size_t es = dtypeSize(dt);
    for (zcollRedOp_t op : kOps) {
      for (int divisor : {0, 2, 3}) {
        for (size_t n : kSizes) {
          for (const auto& o : kOffsets) {
            Bytes a = values(dt, n, 17), b = values(dt, n, 19 + static_cast<uint32_t>(n));
            Bytes cpu(n * es, 0);
            combineInto(cpu.data(), a.data(), b.data(), dt, op, divisor, n);
            Region dout(es, n, o[0], Bytes(n * es, 0)), da(es, n, o[1], a), db(es, n, o[2], b);
            ASSERT_EQ(cuda::combine(dout.p(), da.p(), db.p(), dt, op, divisor, n, nullptr),
                      zcollSuccess);
            ASSERT_EQ(dout.get(), dout.hostImage(cpu))
                << "combine divisor " << divisor << where(dt, op, n, o[0], o[1], o[2]);
            // In place (out = a), as the executors call it.
            ASSERT_EQ(cuda::combine(da.p(), da.p(), db.p(), dt, op, divisor, n, nullptr),
                      zcollSuccess);
            ASSERT_EQ(da.get(), da.hostImage(cpu))
                << "combine in place divisor " << divisor << where(dt, op, n, o[1], o[1], o[2]);
          }
        }
      }
    }
  }
}

// Without a device a launch must fail loudly, never return success having done nothing.
// NCCL's PreMulSum scaling (Executor::scale): the kernel against scaleBy, the scalar given by
// value (host) and read by the kernel (device), out of place and in place.
TEST(ReduceCuda, ScaleByteIdentical) {
  SKIP_WITHOUT_GPU();
  for (zcollDataType_t dt : kTypes) {
    const size_t es = dtypeSize(dt);
    const Bytes scalar = values(dt, 1, 99);
    for (size_t n : kSizes) {
      Bytes in = values(dt, n, 3 + static_cast<uint32_t>(n));
      Bytes cpu(n * es, 0);
      scaleBy(cpu.data(), in.data(), scalar.data(), dt, n);
      for (bool onDevice : {false, true}) {
        Region dscalar(es, 1, 0, scalar), din(es, n, 1, in), dout(es, n, 0, Bytes(n * es, 0));
        const void* s = onDevice ? dscalar.p() : scalar.data();
        ASSERT_EQ(cuda::scale(dout.p(), din.p(), dt, n, s, onDevice, nullptr), zcollSuccess);
        ASSERT_EQ(dout.get(), dout.hostImage(cpu)) << "scale" << where(dt, onDevice, n, 0, 1, 0);
        ASSERT_EQ(cuda::scale(din.p(), din.p(), dt, n, s, onDevice, nullptr), zcollSuccess);
        ASSERT_EQ(din.get(), din.hostImage(cpu)) << "scale in place" << where(dt, onDevice, n, 1, 1, 0);
      }
    }
  }
}

TEST(ReduceCuda, LaunchWithoutDeviceIsACudaError) {
  if (noDeviceReason().empty()) GTEST_SKIP() << "a device is present";
  alignas(16) static float buf[64];
  EXPECT_EQ(cuda::accumulate(buf, buf + 32, false, zcollFloat32, zcollSum, 32, nullptr),
            zcollCudaError);
  EXPECT_NE(threadLastError().find("launch failed"), std::string::npos);
  (void)cudaGetLastError();
  EXPECT_EQ(cuda::accumulate(buf, buf + 32, false, zcollFloat32, zcollSum, 0, nullptr),
            zcollSuccess);  // nothing to do: no launch
}

}  // namespace
}  // namespace zcoll

#else  // built without CUDA

TEST(ReduceCuda, NotBuilt) {
  GTEST_SKIP() << "zcoll built without CUDA (ZCOLL_WITH_CUDA=OFF, or no nvcc at configure time)";
}

#endif
