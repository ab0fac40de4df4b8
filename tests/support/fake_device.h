// Test doubles for executors and device memory, so the device path runs on a CPU:
//  - DeferredExecutor: records operations and runs them, in issue order, at flush(), as a
//    stream runs kernels after the launch returns.
//  - FakeDeviceArena / FakeStream / FakeDeviceExecutor: "device" memory the CPU can touch only
//    while a stream runs an operation, and streams: a worker thread per stream that runs the
//    operations queued on it in order, after the call that queued them returned, as a GPU runs
//    a CUDA stream. Events and host functions (the side streams and gates of calls that return
//    once enqueued, api/launch.h) are operations that wait.
//  - FakeIpc: the device's memory shared between ranks (transport/device_ipc.h) for the cuda_ipc
//    transport: ranks are threads, so a handle is an address; copies run on a stream of their
//    own with both arenas open; a mapped peer arena is open whenever the mapping rank's streams
//    run (its kernels read peers in place: transport/peer_memory.h). Memory from
//    allocUnexportable() refuses export, as CUDA's stream-ordered allocations do.
//  - FakeDevice: installs them as the device memory component (exec/device_component.h), so the public
//    entry points take arena pointers as device buffers.
#pragma once

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "exec/device_component.h"
#include "exec/executor.h"
#include "transport/device_ipc.h"

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

 protected:
  // Takes an operation (run later with the host executor).
  virtual Result defer(std::function<Result(Executor&)> op) {
    pending_.push_back(std::move(op));
    ++issued_;
    return zcollSuccess;
  }

 private:
  std::vector<std::function<Result(Executor&)>> pending_;
  int issued_ = 0;
};

class FakeStream;
class FakeDeviceArena;

// What the stand-in models of the hardware and driver, process-wide (as CUDA's are):
//  - the legacy default stream (NULL): one per process, shared by every thread;
//  - hardware queues: by default each stream runs on its own; with CUDA_DEVICE_MAX_CONNECTIONS=1
//    in the environment when a FakeDevice is made, every stream of the process feeds ONE queue,
//    in submission order, and an operation that waits blocks everything queued after it, of any
//    stream (what one hardware queue does; CUDA's warning on cuStreamWaitValue32: an order the
//    scheduler cannot see may deadlock);
//  - waits (events, stream memory operations, host functions): an operation that waits longer
//    than waitLimitMs is a deadlock on a GPU: it is recorded as a violation, fails its stream
//    (sticky error) and lets the queue go on, so a test fails instead of hanging;
//  - host functions: serialized process-wide (one driver thread runs them);
//  - a limited queue depth: a stream takes at most queueDepth operations not yet run; submitting
//    more blocks the submitting thread (as a full CUDA launch queue does), bounded by
//    waitLimitMs (a violation past it).
struct FakeHardware {
  static inline std::atomic<bool> singleQueue{false};
  static inline std::atomic<int> waitLimitMs{20000};
  static inline std::atomic<int> queueDepth{1024};
  static inline std::atomic<int> violations{0};
  static std::string lastViolation() {
    std::lock_guard<std::mutex> lock(mu());
    return last();
  }
  static void violation(const std::string& what) {
    {
      std::lock_guard<std::mutex> lock(mu());
      last() = what;
    }
    ++violations;
  }
  static std::mutex& hostFunctions() {  // held while a host function runs
    static std::mutex m;
    return m;
  }
  static FakeStream* legacyStream();  // the process's NULL stream

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::string& last() {
    static std::string s;
    return s;
  }
};

// A set-once flag an operation can test without blocking (a recorded event).
struct FakeEvent {
  std::atomic<bool> fired{false};
};

// An operation of a stream, run by a queue.
struct FakeOp {
  FakeStream* stream;
  std::function<Result()> run;
  FakeDeviceArena* arena;  // opened while it runs; null: touches no device memory
};

// A hardware queue: a worker thread that runs operations in the order they were submitted.
class FakeQueue {
 public:
  FakeQueue() : worker_([this] { loop(); }) {}
  ~FakeQueue() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    changed_.notify_all();
    worker_.join();  // after everything queued has run
  }
  void push(FakeOp op) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(op));
    changed_.notify_all();
  }
  // The queue every stream feeds with CUDA_DEVICE_MAX_CONNECTIONS=1 (never destroyed).
  static FakeQueue& single() {
    static FakeQueue* q = new FakeQueue;
    return *q;
  }

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<FakeOp> queue_;
  bool stopping_ = false;
  std::thread worker_;  // last: started once the rest is ready
};

// A stand-in for device memory: an arena the CPU can touch only while one of its streams runs an
// operation, PROT_NONE otherwise. A transport given a "device" pointer, or an algorithm that
// reads or writes one on the host instead of through its executor, faults, as it would on a
// GPU. One arena per rank thread (ranks are threads here), with the rank's own non-blocking
// stream (stream()): ranks must not share a stream, the legacy default one (NULL) included.
class FakeDeviceArena {
 public:
  static constexpr size_t kReserve = size_t(256) << 20;  // address space only
  FakeDeviceArena();
  ~FakeDeviceArena();
  // Makes this arena the calling thread's (tArena) for the scope's life.
  struct Scope;
  void* alloc(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t at = used_;
    used_ += (bytes + 63) / 64 * 64;
    if (used_ > kReserve) return nullptr;
    return base_ + at;
  }
  // Memory that DeviceIpc::exportRange refuses (CUDA: cudaMallocAsync, VMM allocations).
  void* allocUnexportable(size_t bytes) {
    void* p = alloc(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    unexportable_.push_back({static_cast<char*>(p), bytes});
    return p;
  }
  bool exportable(const void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [at, bytes] : unexportable_)
      if (p >= at && p < at + bytes) return false;
    return true;
  }
  bool contains(const void* p) const {
    auto* c = static_cast<const char*>(p);
    return c >= base_ && c < base_ + kReserve;
  }
  // The live arena that holds `p`, or null (host memory).
  static FakeDeviceArena* holding(const void* p) {
    std::lock_guard<std::mutex> lock(registryMu());
    for (FakeDeviceArena* a : registry())
      if (a->contains(p)) return a;
    return nullptr;
  }
  // Opened while any of its streams runs an operation (counted: streams run concurrently),
  // with the arenas its device reaches: those it mapped (FakeIpc::map, CUDA's peer access to
  // memory opened by cudaIpcOpenMemHandle) and the shared arena it allocated from.
  void open() {
    openSelf();
    std::lock_guard<std::mutex> live(registryMu());  // no reached arena goes meanwhile
    for (FakeDeviceArena* a : reached()) a->openSelf();
  }
  void close() {
    {
      std::lock_guard<std::mutex> live(registryMu());
      for (FakeDeviceArena* a : reached()) a->closeSelf();
    }
    closeSelf();
  }
  // From now on this arena's device reaches `other`'s memory.
  void noteReached(FakeDeviceArena* other) {
    std::lock_guard<std::mutex> lock(mu_);
    if (other != this && std::find(reached_.begin(), reached_.end(), other) == reached_.end())
      reached_.push_back(other);
  }
  // The rank's own stream (cudaStreamCreateWithFlags(cudaStreamNonBlocking)).
  FakeStream* stream() { return stream_.get(); }
  zcollStream_t handle();
  // cudaMemcpy stand-ins for the test's own uploads and downloads, after synchronizing the
  // rank's stream (the test's cudaStreamSynchronize).
  void upload(void* dev, const std::vector<unsigned char>& h);
  std::vector<unsigned char> download(const void* dev, size_t bytes);

 private:
  static std::mutex& registryMu() {
    static std::mutex mu;
    return mu;
  }
  static std::vector<FakeDeviceArena*>& registry() {
    static std::vector<FakeDeviceArena*> all;
    return all;
  }
  void openSelf() {
    std::lock_guard<std::mutex> lock(mu_);
    if (opened_++ == 0) {
      EXPECT_EQ(mprotect(base_, kReserve, PROT_READ | PROT_WRITE), 0);
    }
  }
  void closeSelf() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--opened_ == 0) {
      EXPECT_EQ(mprotect(base_, kReserve, PROT_NONE), 0);
    }
  }
  // A copy taken under the lock: another arena's open() must not wait for this one's.
  std::vector<FakeDeviceArena*> reached() {
    std::lock_guard<std::mutex> lock(mu_);
    return reached_;
  }

  std::mutex mu_;
  char* base_ = nullptr;
  size_t used_ = 0;
  int opened_ = 0;
  std::vector<FakeDeviceArena*> reached_;
  std::vector<std::pair<char*, size_t>> unexportable_;
  std::unique_ptr<FakeStream> stream_;
};

// A stream: what is queued on it runs in order, on its own queue (a worker thread) or, with
// FakeHardware::singleQueue, on the process's one queue. An operation that touches device memory
// runs with its arena open; a failure is kept (sticky, as on a GPU) and the operations after it
// still run, so waits queued behind it are released.
class FakeStream {
 public:
  explicit FakeStream(FakeDeviceArena* arena) : arena_(arena) {}
  ~FakeStream() { (void)synchronize(); }  // then own_ drains (nothing left) and joins
  FakeDeviceArena* arena() const { return arena_; }
  // Queues `op`; with touchesDevice, `arena` (default: the stream's) is open while it runs.
  void submit(std::function<Result()> op, bool touchesDevice, FakeDeviceArena* arena = nullptr) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      // A full launch queue blocks the launching thread until the stream catches up.
      const auto limit = std::chrono::milliseconds(FakeHardware::waitLimitMs.load());
      if (!changed_.wait_for(lock, limit, [&] {
            return submitted_ - ran_ < uint64_t(FakeHardware::queueDepth.load());
          }))
        FakeHardware::violation("a launch blocked on a full stream queue past the wait limit");
      ++submitted_;
    }
    FakeOp fop{this, std::move(op), touchesDevice ? (arena ? arena : arena_) : nullptr};
    if (FakeHardware::singleQueue) {
      FakeQueue::single().push(std::move(fop));
    } else {
      std::call_once(ownOnce_, [&] { own_ = std::make_unique<FakeQueue>(); });
      own_->push(std::move(fop));
    }
  }
  // Queues an operation that waits until ready() (polled, sleeping in between): an event
  // wait, a stream memory wait, a host function's wait. Past FakeHardware::waitLimitMs it is a
  // deadlock on a GPU: a violation naming `what`, and the stream fails.
  void submitWait(std::function<bool()> ready, std::string what, bool hostFunction = false) {
    submit([ready = std::move(ready), what = std::move(what), hostFunction]() -> Result {
      std::unique_lock<std::mutex> serial(FakeHardware::hostFunctions(), std::defer_lock);
      if (hostFunction) serial.lock();
      const auto start = std::chrono::steady_clock::now();
      const auto limit = std::chrono::milliseconds(FakeHardware::waitLimitMs.load());
      while (!ready()) {
        if (std::chrono::steady_clock::now() - start > limit) {
          FakeHardware::violation(what + " still waited after the wait limit" +
                                  (FakeHardware::singleQueue ? " (one hardware queue)" : ""));
          return zcollInternalError;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(500));
      }
      return zcollSuccess;
    }, false);
  }
  // Waits until everything queued so far has run (cudaStreamSynchronize); the first failure.
  Result synchronize() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t target = submitted_;
    changed_.wait(lock, [&] { return ran_ >= target; });
    return error_;
  }
  // Everything queued has run.
  bool idle() {
    std::lock_guard<std::mutex> lock(mu_);
    return ran_ == submitted_;
  }
  // The n-th operation queued (counting from 1) has run; its failure if it or one before failed.
  bool ranUpTo(uint64_t n, Result* error) {
    std::lock_guard<std::mutex> lock(mu_);
    *error = error_;
    return ran_ >= n;
  }
  zcollStream_t handle() { return reinterpret_cast<zcollStream_t>(this); }
  // Called by the queue that ran one of its operations.
  void ran(Result r) {
    std::lock_guard<std::mutex> lock(mu_);
    if (r != zcollSuccess && error_ == zcollSuccess) error_ = r;
    ++ran_;
    changed_.notify_all();
  }

 private:
  FakeDeviceArena* arena_;
  std::mutex mu_;
  std::condition_variable changed_;
  uint64_t submitted_ = 0, ran_ = 0;
  Result error_ = zcollSuccess;
  std::once_flag ownOnce_;
  std::unique_ptr<FakeQueue> own_;  // last: joined before the rest goes
};

inline void FakeQueue::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything ran
    FakeOp op = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    if (op.arena) op.arena->open();
    Result r = op.run();
    if (op.arena) op.arena->close();
    op.stream->ran(r);
    lock.lock();
  }
}

inline FakeStream* FakeHardware::legacyStream() {
  static FakeStream* s = new FakeStream(nullptr);  // never destroyed, as the process's
  return s;
}

inline FakeDeviceArena::FakeDeviceArena() {
  base_ = static_cast<char*>(
      mmap(nullptr, kReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  EXPECT_NE(base_, MAP_FAILED);
  stream_ = std::make_unique<FakeStream>(this);
  std::lock_guard<std::mutex> lock(registryMu());
  registry().push_back(this);
}

inline FakeDeviceArena::~FakeDeviceArena() {
  {
    std::lock_guard<std::mutex> lock(registryMu());
    registry().erase(std::find(registry().begin(), registry().end(), this));
    for (FakeDeviceArena* a : registry()) {  // no arena reaches this one any more
      std::lock_guard<std::mutex> theirs(a->mu_);
      a->reached_.erase(std::remove(a->reached_.begin(), a->reached_.end(), this),
                        a->reached_.end());
    }
  }
  stream_.reset();
  munmap(base_, kReserve);
}

inline zcollStream_t FakeDeviceArena::handle() { return stream_->handle(); }

inline void FakeDeviceArena::upload(void* dev, const std::vector<unsigned char>& h) {
  EXPECT_EQ(stream_->synchronize(), zcollSuccess);
  open();
  std::memcpy(dev, h.data(), h.size());
  close();
}

inline std::vector<unsigned char> FakeDeviceArena::download(const void* dev, size_t bytes) {
  EXPECT_EQ(stream_->synchronize(), zcollSuccess);
  open();
  std::vector<unsigned char> h(static_cast<const unsigned char*>(dev),
                               static_cast<const unsigned char*>(dev) + bytes);
  close();
  return h;
}

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

// The fake device's executor: its operations run on a stream (the call's, or a side stream it
// owns); scratch from the arena.
class FakeDeviceExecutor final : public DeferredExecutor {
 public:
  // On the calling thread's arena and its own stream.
  FakeDeviceExecutor() : FakeDeviceExecutor(tArena->stream(), tArena) {}
  FakeDeviceExecutor(FakeStream* stream, FakeDeviceArena* arena,
                     std::unique_ptr<FakeStream> owned = nullptr)
      : owned_(std::move(owned)), stream_(stream), arena_(arena) {}
  const char* name() const override { return "fake-device"; }
  MemKind memKind() const override { return MemKind::kDevice; }
  const MemoryOps& memory() const override {
    static const MemoryOps ops{"fake-device", fakeDeviceAlloc, fakeDeviceRelease, true};
    return ops;
  }
  Result flush() override { return stream_->synchronize(); }
  // Side executors made so far, by every fake executor (a call queued makes at least one).
  static inline std::atomic<int> sidesMade{0};
  Result makeSideExecutor(std::unique_ptr<Executor>* out) override {
    ++sidesMade;
    auto side = std::make_unique<FakeStream>(arena_);
    auto event = std::make_shared<FakeEvent>();  // recorded here, waited for there
    stream_->submit([event] { event->fired = true; return zcollSuccess; }, false);
    side->submitWait([event] { return event->fired.load(); }, "an event wait (side stream)");
    FakeStream* s = side.get();
    *out = std::make_unique<FakeDeviceExecutor>(s, arena_, std::move(side));
    return zcollSuccess;
  }
  // Wait words: plain host memory (the stand-in's device reads it as CUDA's reads mapped
  // host memory), never freed.
  Result allocWaitWords(size_t n, uint32_t** out) override {
    *out = static_cast<uint32_t*>(std::calloc(n, sizeof(uint32_t)));
    return *out ? zcollSuccess : fail(zcollSystemError, "fake wait words: out of memory");
  }
  // cuStreamWaitValue32 with CU_STREAM_WAIT_VALUE_GEQ: a stream memory operation.
  Result waitValue(const uint32_t* word, uint32_t value) override {
    ++waitsQueued;
    stream_->submitWait([word, value] {
      return static_cast<int32_t>(__atomic_load_n(word, __ATOMIC_ACQUIRE) - value) >= 0;
    }, "a stream memory wait (cuStreamWaitValue32)");
    return zcollSuccess;
  }
  bool sharedStreamKey(uintptr_t* key) const override {
    if (owned_) return false;  // a side stream is zcoll's own
    *key = reinterpret_cast<uintptr_t>(stream_);
    return true;
  }
  // Stream memory waits queued so far, by every fake executor.
  static inline std::atomic<int> waitsQueued{0};
  Result bindThread() override {
    tArena = arena_;  // scratch comes from this arena on the thread that runs the call
    return zcollSuccess;
  }

 protected:
  Result defer(std::function<Result(Executor&)> op) override {
    stream_->submit([op = std::move(op)] { return op(hostExecutor()); }, true, arena_);
    return zcollSuccess;
  }

 private:
  std::unique_ptr<FakeStream> owned_;  // a side stream; destroyed (drained) last
  FakeStream* stream_;
  FakeDeviceArena* arena_;
};

// Installs the fake device as the device component for its lifetime. Arena pointers of the
// calling thread (FakeDeviceArena::Scope) are then device buffers to every entry point, and a
// stream is a FakeStream* (NULL: the process's legacy default stream, shared by every thread).
inline Result fakeDeviceExecutorOn(zcollStream_t stream, std::unique_ptr<Executor>* out) {
  FakeStream* s = stream ? reinterpret_cast<FakeStream*>(stream) : FakeHardware::legacyStream();
  *out = std::make_unique<FakeDeviceExecutor>(s, tArena);
  return zcollSuccess;
}

inline bool fakeDeviceOwns(const void* p) { return tArena != nullptr && tArena->contains(p); }

// Memory zcoll shares between ranks (probe blocks, blocks for sends from unexportable memory),
// which init allocates before a rank thread has an arena: one arena for the whole test.
inline FakeDeviceArena* gSharedArena = nullptr;

class FakeIpc final : public DeviceIpc {
 public:
  FakeIpc() : copies_(nullptr) {}
  ~FakeIpc() override { (void)copies_.synchronize(); }
  const char* name() const override { return "fake-device"; }
  Result exportRange(const void* ptr, size_t, IpcHandle* out) override {
    FakeDeviceArena* a = FakeDeviceArena::holding(ptr);
    if (a == nullptr || !a->exportable(ptr))
      return fail(zcollUnsupported, "fake device: %p cannot be exported", ptr);
    *out = IpcHandle{};
    out->base = reinterpret_cast<uintptr_t>(ptr);
    out->pid = getpid();
    return zcollSuccess;
  }
  Result map(const IpcHandle& h, const void** out) override {
    if (h.pid != getpid())
      return fail(zcollInternalError, "fake device: a handle of pid %d", h.pid);
    *out = reinterpret_cast<const void*>(h.base + h.offset);
    // The mapping is this rank's device's from now on (the calling thread's arena: the rank's,
    // or the one its progress thread bound).
    FakeDeviceArena* owner = FakeDeviceArena::holding(*out);
    if (tArena != nullptr && owner != nullptr) tArena->noteReached(owner);
    ++mapsMade;
    return zcollSuccess;
  }
  Result startCopy(void* dst, const void* src, size_t bytes, uint64_t* ticket) override {
    const int delayMs = copyDelayMs;
    copies_.submit([=] {
      if (delayMs > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
      FakeDeviceArena* to = FakeDeviceArena::holding(dst);
      FakeDeviceArena* from = FakeDeviceArena::holding(src);
      if (to) to->open();
      if (from) from->open();
      std::memcpy(dst, src, bytes);
      if (from == gSharedArena && corruptSharedReads > 0) {  // a probe that reads other bytes
        --corruptSharedReads;
        std::memset(dst, 0, bytes);
      }
      if (from) from->close();
      if (to) to->close();
      return zcollSuccess;
    }, false);
    *ticket = ++started_;
    ++copiesStarted;
    return zcollSuccess;
  }
  Result copyDone(uint64_t ticket, bool* done) override {
    Result error = zcollSuccess;
    *done = copies_.ranUpTo(ticket, &error);
    return error;
  }
  Result drain(int) override { return copies_.synchronize(); }
  Result allocShared(size_t bytes, void** out) override {
    *out = gSharedArena->alloc(bytes);
    if (tArena != nullptr) tArena->noteReached(gSharedArena);  // its kernels write it
    return *out ? zcollSuccess : fail(zcollSystemError, "fake shared arena full");
  }
  void freeShared(void*) override {}
  Result allocHost(size_t bytes, void** out) override { return hostMemory().alloc(bytes, out); }
  void freeHost(void* p) override { hostMemory().release(p); }
  // Copies started by every FakeIpc (the tests check that cuda_ipc carried their bytes).
  static inline std::atomic<int> copiesStarted{0};
  // Handles mapped by every FakeIpc (reads in place map the peers' memory).
  static inline std::atomic<int> mapsMade{0};
  // The next this many copies out of shared memory (the init probe) deliver zeros.
  static inline std::atomic<int> corruptSharedReads{0};
  // Every copy started from now takes this long (a device busy with other work).
  static inline std::atomic<int> copyDelayMs{0};

 private:
  FakeStream copies_;
  uint64_t started_ = 0;
};

// Every rank works on one device (the test machines' GPUs are shared the same way).
inline Result fakeDescribeDevice(DeviceIdentity* out) {
  *out = DeviceIdentity{};
  out->present = 1;
  out->ipc = 1;
  std::strncpy(out->kind, "fake-device", sizeof(out->kind) - 1);
  std::strncpy(out->busId, "0000:01:00.0", sizeof(out->busId) - 1);
  out->uuid[0] = 0xfa;
  return zcollSuccess;
}

inline Result fakeMakeIpc(std::unique_ptr<DeviceIpc>* out) {
  *out = std::make_unique<FakeIpc>();
  return zcollSuccess;
}

class FakeDevice {
 public:
  FakeDevice() {
    const char* connections = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    FakeHardware::singleQueue = connections != nullptr && std::strcmp(connections, "1") == 0;
    FakeHardware::violations = 0;
    gSharedArena = &shared_;
    setDeviceComponent(&kComponent);
  }
  ~FakeDevice() {
    EXPECT_EQ(FakeHardware::violations.load(), 0)
        << "the stand-in device saw what would deadlock a GPU: " << FakeHardware::lastViolation();
    FakeHardware::singleQueue = false;
    setDeviceComponent(nullptr);
    gSharedArena = nullptr;
  }

 private:
  static constexpr DeviceComponent kComponent{"fake-device", fakeDeviceOwns, fakeDeviceExecutorOn,
                                              fakeDescribeDevice, fakeMakeIpc};
  FakeDeviceArena shared_;
};

}  // namespace zcoll::test
