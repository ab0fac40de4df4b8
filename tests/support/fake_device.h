// Test doubles for executors and device memory, so the device path runs on a CPU:
//  - DeferredExecutor: records operations and runs them, in issue order, at flush(), as a
//    stream runs kernels after the launch returns.
//  - FakeDeviceArena / FakeDeviceExecutor: "device" memory the CPU can touch only inside the
//    executor's flush.
//  - FakeDevice: installs them as the device memory component (core/memory.h), so the public
//    entry points take arena pointers as device buffers.
#pragma once

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "core/memory.h"
#include "exec/executor.h"

namespace zcoll::test {

// Records operations; runs them, in issue order, at flush().
class DeferredExecutor : public Executor {
 public:
  const char* name() const override { return "deferred"; }
  MemKind memKind() const override { return MemKind::kHost; }
  const MemoryOps& memory() const override { return hostMemory(); }
  int issued() const { return issued_; }

  Result copy(void* dst, const void* src, size_t bytes) override {
    return defer([=](Executor& h) { return h.copy(dst, src, bytes); });
  }
  Result toAcc(void* acc, const void* in, zcollDataType_t dt, size_t n) override {
    return defer([=](Executor& h) { return h.toAcc(acc, in, dt, n); });
  }
  Result accumulate(void* acc, const void* in, bool inIsAcc, zcollDataType_t dt, zcollRedOp_t op,
                    size_t n) override {
    return defer([=](Executor& h) { return h.accumulate(acc, in, inIsAcc, dt, op, n); });
  }
  Result combine(void* out, const void* a, const void* b, zcollDataType_t dt, zcollRedOp_t op,
                 int div, size_t n) override {
    return defer([=](Executor& h) { return h.combine(out, a, b, dt, op, div, n); });
  }
  Result fromAcc(void* out, const void* acc, zcollDataType_t dt, zcollRedOp_t op, int nranks,
                 size_t n) override {
    return defer([=](Executor& h) { return h.fromAcc(out, acc, dt, op, nranks, n); });
  }
  Result quantize(const void* in, zcollDataType_t dt, size_t n, const quant::QuantParams& p,
                  void* out) override {
    return defer([=](Executor& h) { return h.quantize(in, dt, n, p, out); });
  }
  Result quantizeChunks(const void* in, zcollDataType_t dt, size_t chunkElems, size_t nChunks,
                        const int* destOrder, const quant::QuantParams& p, void* out) override {
    // The order array is read now (the contract): the caller may free it after the call.
    std::vector<int> order = destOrder ? std::vector<int>(destOrder, destOrder + nChunks)
                                       : std::vector<int>();
    return defer([=](Executor& h) {
      return h.quantizeChunks(in, dt, chunkElems, nChunks, order.empty() ? nullptr : order.data(),
                              p, out);
    });
  }
  Result dequantize(const void* q, size_t n, const quant::QuantParams& p, void* out,
                    zcollDataType_t dt) override {
    return defer([=](Executor& h) { return h.dequantize(q, n, p, out, dt); });
  }
  Result dequantizeSum(const void* const* chunks, int k, size_t n, const quant::QuantParams& p,
                       float scale, void* out, zcollDataType_t dt) override {
    std::vector<const void*> c(chunks, chunks + k);
    return defer([=](Executor& h) { return h.dequantizeSum(c.data(), k, n, p, scale, out, dt); });
  }
  Result dequantReduceRequant(const void* const* chunks, int k, size_t n,
                              const quant::QuantParams& in, const quant::QuantParams& out,
                              void* outQ) override {
    std::vector<const void*> c(chunks, chunks + k);
    return defer([=](Executor& h) { return h.dequantReduceRequant(c.data(), k, n, in, out, outQ); });
  }

  Result flush() override {
    // Run in order; a failure drops the rest, as a failed stream does.
    std::vector<std::function<Result(Executor&)>> ops;
    ops.swap(pending_);
    for (auto& op : ops) ZCOLL_CHECK(op(hostExecutor()));
    return zcollSuccess;
  }

 private:
  Result defer(std::function<Result(Executor&)> op) {
    pending_.push_back(std::move(op));
    ++issued_;
    return zcollSuccess;
  }
  std::vector<std::function<Result(Executor&)>> pending_;
  int issued_ = 0;
};

// A stand-in for device memory: an arena the CPU can touch only while the executor runs its
// operations (flush), PROT_NONE otherwise. A transport given a "device" pointer, or an algorithm
// that reads or writes one on the host instead of through its executor, faults, as it would on a
// GPU. One arena per rank thread (ranks are threads here).
class FakeDeviceArena {
 public:
  static constexpr size_t kReserve = size_t(256) << 20;  // address space only
  FakeDeviceArena() {
    base_ = static_cast<char*>(mmap(nullptr, kReserve, PROT_NONE,
                                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    EXPECT_NE(base_, MAP_FAILED);
  }
  ~FakeDeviceArena() { munmap(base_, kReserve); }
  // Makes this arena the calling thread's (tArena) for the scope's life.
  struct Scope;
  void* alloc(size_t bytes) {
    const size_t at = used_;
    used_ += (bytes + 63) / 64 * 64;
    if (used_ > kReserve) return nullptr;
    return base_ + at;
  }
  bool contains(const void* p) const {
    auto* c = static_cast<const char*>(p);
    return c >= base_ && c < base_ + kReserve;
  }
  void open() { ASSERT_EQ(mprotect(base_, kReserve, PROT_READ | PROT_WRITE), 0); }
  void close() { ASSERT_EQ(mprotect(base_, kReserve, PROT_NONE), 0); }
  // cudaMemcpy stand-ins for the test's own uploads and downloads.
  void upload(void* dev, const std::vector<unsigned char>& h) {
    open();
    std::memcpy(dev, h.data(), h.size());
    close();
  }
  std::vector<unsigned char> download(const void* dev, size_t bytes) {
    open();
    std::vector<unsigned char> h(static_cast<const unsigned char*>(dev),
                                 static_cast<const unsigned char*>(dev) + bytes);
    close();
    return h;
  }

 private:
  char* base_ = nullptr;
  size_t used_ = 0;
};

// The calling rank thread's arena (ranks are threads in these tests).
inline thread_local FakeDeviceArena* tArena = nullptr;

struct FakeDeviceArena::Scope {
  explicit Scope(FakeDeviceArena* a) { tArena = a; }
  ~Scope() { tArena = nullptr; }
};

inline Result fakeDeviceAlloc(size_t bytes, void** out) {
  *out = tArena->alloc(bytes);
  return *out ? zcollSuccess : fail(zcollSystemError, "fake device arena full");
}
inline void fakeDeviceRelease(void*) {}  // the arena goes as a whole

// A deferred executor of the fake device kind: scratch from the arena, staging in host memory.
class FakeDeviceExecutor final : public DeferredExecutor {
 public:
  const char* name() const override { return "fake-device"; }
  MemKind memKind() const override { return MemKind::kDevice; }
  const MemoryOps& memory() const override {
    static const MemoryOps ops{"fake-device", fakeDeviceAlloc, fakeDeviceRelease,
                               hostMemory().allocStaging, hostMemory().releaseStaging};
    return ops;
  }
  Result flush() override {
    tArena->open();
    Result r = DeferredExecutor::flush();
    tArena->close();
    return r;
  }
};

// Installs the fake device as the device component for its lifetime. Arena pointers of the
// calling thread (FakeDeviceArena::Scope) are then device buffers to every entry point.
inline Result fakeDeviceExecutorOn(zcollStream_t, std::unique_ptr<Executor>* out) {
  *out = std::make_unique<FakeDeviceExecutor>();
  return zcollSuccess;
}

inline bool fakeDeviceOwns(const void* p) { return tArena != nullptr && tArena->contains(p); }

class FakeDevice {
 public:
  FakeDevice() { setDeviceComponent(&kComponent); }
  ~FakeDevice() { setDeviceComponent(nullptr); }

 private:
  static constexpr DeviceComponent kComponent{"fake-device", fakeDeviceOwns, fakeDeviceExecutorOn};
};

}  // namespace zcoll::test
