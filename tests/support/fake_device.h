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
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <chrono>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "base/process.h"
#include "exec/device_component.h"
#include "exec/executor.h"
#include "exec/wait_words.h"
#include "transport/device_ipc.h"
#include "transport/ipc_mappings.h"

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
  // A host scalar is read now (the contract), a device one when the operation runs.
  Result scale(void* dst, const void* src, zcollDataType_t dt, size_t n, const void* scalar,
               bool scalarOnDevice) override {
    uint64_t now = 0;  // the widest element
    if (!scalarOnDevice) std::memcpy(&now, scalar, dtypeSize(dt));
    return defer([=](Executor& h) {
      return h.scale(dst, src, dt, n, scalarOnDevice ? scalar : &now, false);
    });
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

// Memory zcoll shares between ranks (probe blocks, cuda_ipc's slots and windows), which init
// allocates before a rank thread has an arena: one arena for the whole test. Every rank's
// device maps it at init (cuda_ipc's connect), so every rank's streams reach it.
inline FakeDeviceArena* gSharedArena = nullptr;

// What the stand-in models of the hardware and driver, process-wide (as CUDA's are):
//  - the legacy default stream (NULL): one per process, shared by every thread;
//  - hardware queues (FakeHardwareQueues): N per process, N = CUDA_DEVICE_MAX_CONNECTIONS in
//    the environment when a FakeDevice is made, else 8 (CUDA's default). Streams are assigned
//    to them round-robin when made (the legacy stream too, again at each FakeDevice); a queue
//    runs what its streams submit in submission order (FIFO), so an operation that waits blocks
//    everything queued after it on that queue, of any stream. With more streams than queues,
//    work submitted LATER on another stream can sit behind a stream memory wait that waits for
//    it: a deadlock on a GPU (CUDA's warning on cuStreamWaitValue32: an order the scheduler
//    cannot see may deadlock). N = 1: every stream of the process feeds one queue. The queued
//    mode (ZCOLL_DEVICE_CALLS=async, and auto with Trust::kQueuedCalls) waits for later work,
//    so its calls violate here once a side stream or copy lane comes round to the caller's
//    queue; tests that check only results run like CUDA (Trust::kLikeCuda: auto is sync), and
//    the queued mode's own tests ask explicitly for a queue per stream (FakeDevice::Queues::
//    kOnePerStream: lenient, named as such);
//  - waits (events, stream memory operations, host functions): an operation that waits longer
//    than waitLimitMs is a deadlock on a GPU: it is recorded as a violation, fails its stream
//    (sticky error) and lets the queue go on, so a test fails instead of hanging;
//  - host functions: serialized process-wide (one driver thread runs them);
//  - limited queue depths: a stream takes at most queueDepth operations not yet run, and the
//    process's launch queue (FakeLaunchQueue, shared by all its streams) at most launchDepth;
//    submitting more blocks the submitting thread (as a full CUDA launch queue does), bounded by
//    waitLimitMs (a violation past it).
// Ranks are threads here, so the ranks of a test share the process's queues, as ranks that are
// threads on one GPU do (the GPU kit's CudaDevicePath).
struct FakeHardware {
  static int initialWaitLimitMs() {
    const char* v = std::getenv("ZCOLL_FAKE_WAIT_LIMIT_MS");
    return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : 20000;
  }
  // Whether the stand-in device's stream memory waits are released (a wait's condition, while
  // its operation has not run to its end).
  using Released = std::function<bool()>;
  // ZCOLL_FAKE_WAIT_LIMIT_MS in the environment sets the initial limit (surveys of many tests).
  static inline std::atomic<int> waitLimitMs{initialWaitLimitMs()};
  static inline std::atomic<int> queueDepth{1024};   // per stream
  static inline std::atomic<int> launchDepth{4096};  // per process (FakeLaunchQueue)
  // Every executor operation ("kernel") queued from now takes this long: work still running
  // when a transport would touch its buffers.
  static inline std::atomic<int> kernelDelayUs{0};
  static inline std::atomic<int> violations{0};
  // Operations submitted to a stream by a thread the test did not mark as a caller's (a rank's
  // own thread: callerThread): zcoll's progress thread, for one. Stream-triggered calls submit
  // everything on the caller's thread, so a test expects none.
  static inline thread_local bool callerThread = false;
  static inline std::atomic<int> submitsOffCallers{0};
  // CUDA calls (any stand-in entry point: a submission, a synchronize, an event query, a
  // registration, an allocation, a capture query) made by a thread that is not a caller's: the
  // proxy of stream-triggered calls across nodes makes none (trigger/proxy.h).
  static inline std::atomic<int> cudaCallsOffCallers{0};
  static void noteCudaCall() {
    if (!callerThread) ++cudaCallsOffCallers;
  }
  static std::string lastViolation() {
    std::lock_guard<std::mutex> lock(mu());
    return last();
  }
  // Whether a violation since the last forgetViolations() said `what`: one deadlock shows as
  // several violations (the held wait, then the work queued behind it), found in any order.
  static bool violationSeen(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu());
    for (const std::string& v : seen())
      if (v.find(what) != std::string::npos) return true;
    return false;
  }
  static void forgetViolations() {
    std::lock_guard<std::mutex> lock(mu());
    seen().clear();
    last().clear();
    violations = 0;
  }
  // Recorded (FakeDevice fails the test at its end) and said at once, on stderr: what follows
  // a deadlock (a failed stream, a crash in an error path) shows after it.
  static void violation(const std::string& what) {
    {
      std::lock_guard<std::mutex> lock(mu());
      last() = what;
      if (seen().size() < 256) seen().push_back(what);
    }
    ++violations;
    std::fprintf(stderr, "stand-in device violation: %s\n", what.c_str());
  }
  // Implicit synchronization (base/stream_holds.h): an allocation or free of device or pinned
  // memory, or an IPC open or close, synchronizes the device in CUDA, so issued while a stream
  // memory wait is not yet released it puts the work that would release it behind that wait: a
  // deadlock on a GPU. The stand-in records it as a violation (the operation itself goes on).
  // Per device, as CUDA's implicit synchronization is: the calling thread's current device
  // (its arena, currentDevice()), every device when it has none.
  static void implicitSync(const std::string& what) {
    ++implicitSyncs;
    const int device = currentDevice();
    std::lock_guard<std::mutex> lock(heldMu());
    for (const auto& [id, hold] : held())
      if ((device < 0 || hold.device == device) && !hold.released()) {
        violation(what + " while a stream memory wait was not yet released (on a GPU its implicit "
                  "synchronization keeps the work that releases the wait behind it)");
        return;
      }
  }
  // Registers a stream memory wait queued and not yet run to its end; unregistered by the id.
  static uint64_t holdWait(Released released, int device) {
    std::lock_guard<std::mutex> lock(heldMu());
    const uint64_t id = ++nextHold();
    held().emplace(id, Hold{std::move(released), device});
    return id;
  }
  // The calling thread's current device (its arena's), -1 when it has none.
  static int currentDevice();
  static void endWait(uint64_t id) {
    std::lock_guard<std::mutex> lock(heldMu());
    held().erase(id);
  }
  // Operations that synchronize the device implicitly, counted (implicitSync).
  static inline std::atomic<int> implicitSyncs{0};
  // A stream zcoll gives up (a side stream's executor ends) may still have work queued, as a
  // CUDA stream given back to its pool may: it is kept, not waited for, until the FakeDevice
  // ends (after the test released whatever that work waits for).
  static void retire(std::unique_ptr<FakeStream> stream);
  static void dropRetired();
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
  static std::vector<std::string>& seen() {
    static std::vector<std::string> v;
    return v;
  }
  static std::vector<std::unique_ptr<FakeStream>>& retired();
  static std::mutex& heldMu() {
    static std::mutex m;
    return m;
  }
  struct Hold {
    Released released;
    int device;  // of the stream that waits
  };
  static std::map<uint64_t, Hold>& held() {
    static std::map<uint64_t, Hold> h;
    return h;
  }
  static uint64_t& nextHold() {
    static uint64_t n = 0;
    return n;
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

// A hardware queue: a worker thread that runs operations in the order they were submitted, one
// at a time (an operation that waits blocks the ones behind it).
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
    ++pushed_;
    changed_.notify_all();
  }
  // Waits until what was pushed so far has run, or `until` passed (false then).
  bool drain(std::chrono::steady_clock::time_point until) {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t target = pushed_;
    return changed_.wait_until(lock, until, [&] { return ran_ >= target; });
  }

 private:
  void loop();
  static void runOne(FakeOp op);
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<FakeOp> queue_;
  uint64_t pushed_ = 0, ran_ = 0;
  bool stopping_ = false;
  std::thread worker_;  // last: started once the rest is ready
};

// The hardware queues (CUDA_DEVICE_MAX_CONNECTIONS): `count()` FIFO queues per device (each GPU
// has its own, as each CUDA context does), which a device's streams are assigned to round-robin
// when they first submit. Queues are never destroyed (a stream assigned under an earlier count
// keeps its queue); configure() sets the count for streams assigned from now and starts every
// device's round robin again at queue 0.
class FakeHardwareQueues {
 public:
  static constexpr int kDefault = 8;  // CUDA's default
  // The count CUDA would use: CUDA_DEVICE_MAX_CONNECTIONS when set (1..32), else kDefault.
  // ZCOLL_FAKE_HW_QUEUES, when set, overrides it for the stand-in only (zcoll itself reads
  // CUDA_DEVICE_MAX_CONNECTIONS: =1 turns its queued mode off): the suite runs at 1, 2 and 8
  // queues with zcoll's behaviour unchanged (tests/CMakeLists.txt).
  static int fromEnvironment() {
    const char* v = std::getenv("ZCOLL_FAKE_HW_QUEUES");
    if (v == nullptr) v = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    const int n = v != nullptr ? std::atoi(v) : 0;
    return n >= 1 ? std::min(n, 32) : kDefault;
  }
  // n queues; 0: a queue of its own for every stream (FakeDevice::Queues::kOnePerStream).
  static void configure(int n) {
    std::lock_guard<std::mutex> lock(mu());
    count_ = n;
    for (auto& [device, pool] : pools()) pool.next = 0;
  }
  static int count() {
    std::lock_guard<std::mutex> lock(mu());
    return count_;
  }
  static std::string describe() {
    const int n = count();
    return n == 0 ? "a hardware queue per stream" : std::to_string(n) + " hardware queues";
  }
  // Waits until every queue ran what was submitted to it so far (the device synchronized), or
  // waitLimitMs passed: a wait that failed may leave work of other streams behind it for a while.
  static void drainAll() {
    std::vector<FakeQueue*> queues;
    {
      std::lock_guard<std::mutex> lock(mu());
      for (auto& [device, pool] : pools())
        queues.insert(queues.end(), pool.queues.begin(), pool.queues.end());
    }
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(FakeHardware::waitLimitMs.load());
    for (FakeQueue* q : queues) (void)q->drain(until);
  }
  // The queue of a stream of `device` that submits for the first time; null: the stream makes
  // its own (count 0).
  static FakeQueue* assign(int device) {
    std::lock_guard<std::mutex> lock(mu());
    if (count_ == 0) return nullptr;
    Pool& pool = pools()[device];
    while (static_cast<int>(pool.queues.size()) < count_) pool.queues.push_back(new FakeQueue);
    pool.next %= count_;
    return pool.queues[pool.next++];
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  struct Pool {
    std::vector<FakeQueue*> queues;  // never destroyed, as a device's queues
    int next = 0;                    // the queue the device's next stream gets
  };
  static std::map<int, Pool>& pools() {  // by device ordinal; never destroyed
    static auto* p = new std::map<int, Pool>;
    return *p;
  }
  static inline int count_ = kDefault;  // under mu()
};

// The process's launch queue: operations submitted on any of its streams and not yet run, at
// most FakeHardware::launchDepth. A submission to a full one blocks the submitting thread until
// an operation runs; past FakeHardware::waitLimitMs it is a violation (and goes on).
class FakeLaunchQueue {
 public:
  static void enter() {
    std::unique_lock<std::mutex> lock(mu());
    const auto limit = std::chrono::milliseconds(FakeHardware::waitLimitMs.load());
    if (!changed().wait_for(lock, limit,
                            [] { return pending() < FakeHardware::launchDepth.load(); }))
      FakeHardware::violation("a launch blocked on the process's full launch queue past the "
                              "wait limit");
    ++pending();
  }
  static void leave() {
    std::lock_guard<std::mutex> lock(mu());
    --pending();
    changed().notify_all();
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::condition_variable& changed() {
    static std::condition_variable c;
    return c;
  }
  static int& pending() {  // under mu()
    static int n = 0;
    return n;
  }
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
  // First fit among the ranges freed, else the next unused one; 64-byte aligned.
  void* alloc(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t want = std::max<size_t>((bytes + 63) / 64 * 64, 64);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < want) continue;
      const size_t at = it->first, left = it->second - want;
      free_.erase(it);
      if (left > 0) free_[at + want] = left;
      sizes_[at] = want;
      return base_ + at;
    }
    if (used_ + want > kReserve) return nullptr;
    const size_t at = used_;
    used_ += want;
    sizes_[at] = want;
    return base_ + at;
  }
  // Gives a range alloc() returned back (others are ignored), merged with free neighbours.
  void free(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sizes_.find(static_cast<size_t>(static_cast<char*>(p) - base_));
    if (!contains(p) || it == sizes_.end()) return;
    size_t at = it->first, bytes = it->second;
    sizes_.erase(it);
    auto next = free_.find(at + bytes);
    if (next != free_.end()) {
      bytes += next->second;
      free_.erase(next);
    }
    auto prev = free_.lower_bound(at);
    if (prev != free_.begin() && std::prev(prev)->first + std::prev(prev)->second == at) {
      --prev;
      at = prev->first;
      bytes += prev->second;
      free_.erase(prev);
    }
    free_[at] = bytes;
  }
  // The allocation that holds `p` (what CUDA's cuMemGetAddressRange gives): its start.
  bool allocationOf(const void* p, void** start) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!contains(p)) return false;
    const size_t off = static_cast<size_t>(static_cast<const char*>(p) - base_);
    auto it = sizes_.upper_bound(off);
    if (it == sizes_.begin()) return false;
    --it;
    if (off >= it->first + it->second) return false;
    *start = base_ + it->first;
    return true;
  }
  // The device this arena stands for (its ordinal), 0 unless a test says otherwise.
  int device = 0;
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
  // with the arenas its device reaches: the shared arena (zcoll's slots and windows, mapped by
  // every rank at init) and those it mapped (FakeIpc::map, CUDA's peer access to memory opened
  // by cudaIpcOpenMemHandle).
  // What open() opened, which close() closes exactly: an arena the device came to reach in
  // between (a peer's mapping noted meanwhile) is not closed, and one destroyed in between is
  // skipped (its id is no longer registered; a new arena at its address has another id).
  using Opened = std::vector<std::pair<FakeDeviceArena*, uint64_t>>;
  Opened open() {
    openSelf();
    Opened opened;
    std::lock_guard<std::mutex> live(registryMu());  // no reached arena goes meanwhile
    for (FakeDeviceArena* a : reached()) {
      a->openSelf();
      opened.emplace_back(a, a->id_);
    }
    return opened;
  }
  void close(const Opened& opened) {
    {
      std::lock_guard<std::mutex> live(registryMu());
      for (const auto& [a, id] : opened)
        if (registered(a, id)) a->closeSelf();
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
  static bool registered(const FakeDeviceArena* a, uint64_t id) {  // under registryMu()
    const auto& all = registry();
    return std::find(all.begin(), all.end(), a) != all.end() && a->id_ == id;
  }
  static uint64_t nextId() {
    static std::atomic<uint64_t> n{0};
    return ++n;
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
    std::vector<FakeDeviceArena*> all = reached_;
    if (gSharedArena != nullptr && gSharedArena != this &&
        std::find(all.begin(), all.end(), gSharedArena) == all.end())
      all.push_back(gSharedArena);
    return all;
  }

  const uint64_t id_ = nextId();  // tells a destroyed arena from a new one at its address
  std::mutex mu_;
  char* base_ = nullptr;
  size_t used_ = 0;
  std::map<size_t, size_t> sizes_;  // offset -> bytes, of what alloc() handed out
  std::map<size_t, size_t> free_;   // offset -> bytes, given back
  int opened_ = 0;
  std::vector<FakeDeviceArena*> reached_;
  std::vector<std::pair<char*, size_t>> unexportable_;
  std::unique_ptr<FakeStream> stream_;
};

// A captured graph (FakeStream::beginCapture / endCapture): what the stream queued while
// capturing, in order, queued again on a stream at each launch (cudaGraphLaunch).
struct FakeGraph {
  std::vector<std::function<void(FakeStream&)>> steps;
  void launch(FakeStream& stream) {
    for (auto& step : steps) step(stream);
  }
};

// A stream: what is queued on it runs in order, on the hardware queue it was assigned when made
// (FakeHardwareQueues), behind what other streams of that queue submitted before. An operation
// that touches device memory runs with its arena open; a failure is kept (sticky, as on a GPU)
// and the operations after it still run, so waits queued behind it are released.
class FakeStream {
 public:
  explicit FakeStream(FakeDeviceArena* arena) : arena_(arena) {}
  ~FakeStream() { (void)synchronize(); }  // nothing of it left in its queue; own_ joins
  FakeDeviceArena* arena() const { return arena_; }
  // The stream is being captured into a graph (cudaStreamBeginCapture), as
  // FakeDeviceExecutor::isCapturing reports it: set by beginCapture, or by a test alone (then
  // what is queued still runs: for tests that expect nothing to be queued).
  std::atomic<bool> capturing{false};
  // Graph capture (cudaStreamBeginCapture / cudaStreamEndCapture): from beginCapture on, what
  // is queued on the stream is recorded, not run, until endCapture returns the record as a
  // graph; FakeGraph::launch (cudaGraphLaunch) queues it on a stream, the same operations with
  // the same values at every launch, as a CUDA graph replays its nodes.
  void beginCapture() {
    std::lock_guard<std::mutex> lock(mu_);
    captured_ = std::make_shared<FakeGraph>();
    capturing = true;
  }
  std::shared_ptr<FakeGraph> endCapture() {
    std::lock_guard<std::mutex> lock(mu_);
    capturing = false;
    return std::move(captured_);
  }
  // Runs `queueOn(stream)` for this stream now, or, while capturing, for the launch stream at
  // each launch of the graph (what a queued operation registers, such as a held wait, is then
  // registered at each launch).
  void enqueue(std::function<void(FakeStream&)> queueOn);
  // Queues `op`; with touchesDevice, `arena` (default: the stream's) is open while it runs.
  void submit(std::function<Result()> op, bool touchesDevice, FakeDeviceArena* arena = nullptr) {
    FakeHardware::noteCudaCall();
    FakeDeviceArena* opens = touchesDevice ? (arena ? arena : arena_) : nullptr;
    if (recordIfCapturing([op, touchesDevice, opens](FakeStream& s) {
          s.submit(op, touchesDevice, opens);
        }))
      return;
    if (!FakeHardware::callerThread) ++FakeHardware::submitsOffCallers;
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
    FakeLaunchQueue::enter();  // left once the operation ran (FakeQueue::runOne)
    queue()->push({this, std::move(op), opens});
  }
  // Lets the stream be assigned a queue again at its next submission (the legacy stream, at
  // each FakeDevice), when nothing of it is queued; else it stays where it is.
  void reassign() {
    std::lock_guard<std::mutex> lock(mu_);
    if (ran_ == submitted_) queue_ = nullptr;
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
          FakeHardware::violation(what + " still waited after the wait limit (" +
                                  FakeHardwareQueues::describe() + ")");
          return zcollInternalError;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(500));
      }
      return zcollSuccess;
    }, false);
  }
  // Waits until everything queued so far has run (cudaStreamSynchronize); the first failure.
  Result synchronize() {
    FakeHardware::noteCudaCall();
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t target = submitted_;
    changed_.wait(lock, [&] { return ran_ >= target; });
    return error_;
  }
  // synchronize(), giving up (false) once `giveUp()` says so; polled every millisecond.
  template <typename GiveUp>
  bool synchronizeUntil(GiveUp giveUp, Result* error) {
    FakeHardware::noteCudaCall();
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t target = submitted_;
    while (ran_ < target) {
      if (giveUp()) return false;
      changed_.wait_for(lock, std::chrono::milliseconds(1));
    }
    *error = error_;
    return true;
  }
  // Operations queued so far (the n of ranUpTo for the newest).
  uint64_t submittedCount() {
    std::lock_guard<std::mutex> lock(mu_);
    return submitted_;
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
  // Records `queueOn` in the graph being captured; false when the stream is not capturing.
  bool recordIfCapturing(std::function<void(FakeStream&)> queueOn);
  // The stream's hardware queue, assigned at its first submission (when a test has set its
  // arena's device): its device's next one, or a queue of its own (count 0). The legacy stream
  // (no arena) is device 0's.
  FakeQueue* queue() {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_ != nullptr) return queue_;
    queue_ = FakeHardwareQueues::assign(arena_ != nullptr ? arena_->device : 0);
    if (queue_ == nullptr) {
      if (!own_) own_ = std::make_unique<FakeQueue>();
      queue_ = own_.get();
    }
    return queue_;
  }
  FakeDeviceArena* arena_;
  std::mutex mu_;
  std::condition_variable changed_;
  uint64_t submitted_ = 0, ran_ = 0;
  Result error_ = zcollSuccess;
  std::shared_ptr<FakeGraph> captured_;  // while capturing (beginCapture)
  FakeQueue* queue_ = nullptr;  // its device's (never destroyed) or own_; null until it submits
  std::unique_ptr<FakeQueue> own_;  // last: joined before the rest goes
};

inline bool FakeStream::recordIfCapturing(std::function<void(FakeStream&)> queueOn) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!captured_) return false;
  captured_->steps.push_back(std::move(queueOn));
  return true;
}

inline void FakeStream::enqueue(std::function<void(FakeStream&)> queueOn) {
  if (!recordIfCapturing(queueOn)) queueOn(*this);
}

inline void FakeQueue::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything ran
    FakeOp op = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    runOne(std::move(op));
    lock.lock();
    ++ran_;
    changed_.notify_all();
  }
}

// Runs `op` with its arena open, then tells its stream (which may be destroyed from then on:
// the operation is gone before).
inline void FakeQueue::runOne(FakeOp op) {
  FakeDeviceArena::Opened opened;
  if (op.arena) opened = op.arena->open();
  Result r = op.run();
  if (op.arena) op.arena->close(opened);
  op.run = nullptr;
  FakeLaunchQueue::leave();
  op.stream->ran(r);
}

inline std::vector<std::unique_ptr<FakeStream>>& FakeHardware::retired() {
  static auto* r = new std::vector<std::unique_ptr<FakeStream>>;  // drained by dropRetired
  return *r;
}

inline void FakeHardware::retire(std::unique_ptr<FakeStream> stream) {
  std::lock_guard<std::mutex> lock(mu());
  retired().push_back(std::move(stream));
}

inline void FakeHardware::dropRetired() {
  std::vector<std::unique_ptr<FakeStream>> all;
  {
    std::lock_guard<std::mutex> lock(mu());
    all.swap(retired());
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
  // Freeing device memory synchronizes the device (as cudaFree does): what any stream queued
  // before runs first, while copies into the arena still find it (holding) and open it. Behind
  // a wait that failed (a violation), a shared hardware queue may still hold some.
  FakeHardwareQueues::drainAll();
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
  const Opened opened = open();
  std::memcpy(dev, h.data(), h.size());
  close(opened);
}

inline std::vector<unsigned char> FakeDeviceArena::download(const void* dev, size_t bytes) {
  EXPECT_EQ(stream_->synchronize(), zcollSuccess);
  const Opened opened = open();
  std::vector<unsigned char> h(static_cast<const unsigned char*>(dev),
                               static_cast<const unsigned char*>(dev) + bytes);
  close(opened);
  return h;
}

// The calling rank thread's arena (ranks are threads in these tests).
inline thread_local FakeDeviceArena* tArena = nullptr;

inline int FakeHardware::currentDevice() { return tArena != nullptr ? tArena->device : -1; }

struct FakeDeviceArena::Scope {
  explicit Scope(FakeDeviceArena* a) { tArena = a; }
  ~Scope() { tArena = nullptr; }
};

// The stand-in's device scratch: a stream-ordered allocation (CUDA: cudaMallocFromPoolAsync on
// zcoll's own stream, cuda/executor_cuda.cc), so no implicit synchronization (base/stream_holds.h).
inline Result fakeStreamOrderedAlloc(size_t bytes, void** out) {
  *out = tArena->alloc(bytes);
  return *out ? zcollSuccess : fail(zcollSystemError, "fake device arena full");
}
inline void fakeStreamOrderedRelease(void* p) {
  if (FakeDeviceArena* a = FakeDeviceArena::holding(p)) a->free(p);
}

// A recorded event as a device fence (base/device_fence.h): FakeIpc's copies wait for it.
struct FakeFence final : DeviceFence {
  std::shared_ptr<FakeEvent> event = std::make_shared<FakeEvent>();
};

// A recorded event as a stream mark (exec/wait_words.h).
struct FakeMark final : StreamMark {
  std::shared_ptr<FakeEvent> event = std::make_shared<FakeEvent>();
  bool passed() override {
    FakeHardware::noteCudaCall();  // cudaEventQuery
    return event->fired.load();
  }
};

// The fake device's executor: its operations run on a stream (the call's, or a side stream it
// owns); scratch from the arena.
class FakeDeviceExecutor final : public DeferredExecutor {
 public:
  // On the calling thread's arena and its own stream.
  FakeDeviceExecutor() : FakeDeviceExecutor(tArena->stream(), tArena) {}
  FakeDeviceExecutor(FakeStream* stream, FakeDeviceArena* arena,
                     std::unique_ptr<FakeStream> owned = nullptr)
      : owned_(std::move(owned)), stream_(stream), arena_(arena) {}
  ~FakeDeviceExecutor() override {
    if (owned_) FakeHardware::retire(std::move(owned_));  // not waited for (see retire)
  }
  const char* name() const override { return "fake-device"; }
  MemKind memKind() const override { return MemKind::kDevice; }
  const MemoryOps& memory() const override {
    static const MemoryOps ops{"fake-device", fakeStreamOrderedAlloc, fakeStreamOrderedRelease,
                               true};
    return ops;
  }
  // Stream-ordered memory (CUDA: cudaMallocAsync/cudaFreeAsync): from the arena now, back to it
  // when the stream reaches the free.
  Result allocOnStream(size_t bytes, void** out) override {
    FakeHardware::noteCudaCall();
    *out = arena_->alloc(bytes == 0 ? 1 : bytes);
    return *out ? zcollSuccess : fail(zcollSystemError, "fake device arena full");
  }
  Result freeOnStream(void* p) override {
    stream_->submit([p] {
      fakeStreamOrderedRelease(p);
      return zcollSuccess;
    }, false);
    return zcollSuccess;
  }
  // Bounded as CUDA's (Executor::limitWaits): gives up on an abort or past the timeout.
  Result flush() override {
    ++flushes;
    if (limits_.stop == nullptr && limits_.timeoutMs <= 0) return stream_->synchronize();
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(limits_.timeoutMs);
    Result r = zcollSuccess;
    const bool done = stream_->synchronizeUntil([&] {
      return (limits_.stop != nullptr && limits_.stop->load()) ||
             (limits_.timeoutMs > 0 && std::chrono::steady_clock::now() > deadline);
    }, &r);
    if (done) return r;
    if (limits_.abandoned != nullptr) limits_.abandoned->store(true);
    return fail(limits_.stop != nullptr && limits_.stop->load() ? zcollRemoteError : zcollTimeout,
                "fake device: the stream's work did not finish; abandoned");
  }
  void limitWaits(const WaitLimits& limits) override { limits_ = limits; }
  Result fence(std::shared_ptr<DeviceFence>* out) override {
    auto f = std::make_shared<FakeFence>();
    auto event = f->event;
    stream_->submit([event] { event->fired = true; return zcollSuccess; }, false);
    ++fences;
    *out = std::move(f);
    return zcollSuccess;
  }
  // Fences made and flushes done so far, by every fake executor.
  static inline std::atomic<int> fences{0}, flushes{0};
  int device() const override {
    return device_ >= 0 ? device_ : arena_ != nullptr ? arena_->device : 0;
  }
  void onDevice(int device) { device_ = device; }
  Result isCapturing(bool* capturing) override {
    FakeHardware::noteCudaCall();
    *capturing = stream_->capturing.load();
    return zcollSuccess;
  }
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
  // cuStreamWaitValue32 with CU_STREAM_WAIT_VALUE_GEQ: a stream memory operation, held (for
  // FakeHardware::implicitSync) from when it is queued until it has run to its end. A wait that
  // reads a word after zcoll freed it is a violation (exec/wait_words.h promises it never
  // happens).
  Result waitValue(const uint32_t* word, uint32_t value) override {
    queueMemoryWait(word, [word, value] {
      return static_cast<int32_t>(__atomic_load_n(word, __ATOMIC_ACQUIRE) - value) >= 0;
    });
    return zcollSuccess;
  }
  // cuStreamWaitValue32 with CU_STREAM_WAIT_VALUE_AND: as waitValue, until (*word & mask) != 0.
  Result waitBits(const uint32_t* word, uint32_t mask) override {
    queueMemoryWait(word, [word, mask] {
      return (__atomic_load_n(word, __ATOMIC_ACQUIRE) & mask) != 0;
    });
    return zcollSuccess;
  }
  // cudaStreamWaitEvent on a mark's event (FakeMark).
  Result waitMark(StreamMark& mark) override {
    auto* fm = dynamic_cast<FakeMark*>(&mark);
    if (fm == nullptr) return fail(zcollInternalError, "a stream mark not made by the fake device");
    auto event = fm->event;
    stream_->submitWait([event] { return event->fired.load(); }, "an event wait (a stream mark)");
    return zcollSuccess;
  }
  // cuStreamWriteValue32 (default flags): the store runs in stream order, after the stream's
  // earlier operations, with a release fence. Only to host memory registered with the device
  // (registerHost): a flag in memory the device cannot reach is a violation.
  Result writeValue(uint32_t* word, uint32_t value) override {
    ++writesQueued;
    if (!hostRegistered(word))
      FakeHardware::violation("cuStreamWriteValue32 to host memory the device has not registered");
    stream_->submit([word, value] {
      __atomic_store_n(word, value, __ATOMIC_RELEASE);
      return zcollSuccess;
    }, false);
    return zcollSuccess;
  }
  static inline std::atomic<int> writesQueued{0};
  // Host memory registered with the stand-in device (DeviceComponent::registerHostMemory):
  // registering and unregistering synchronize implicitly, as cudaHostRegister does.
  static Result registerHost(void* p, size_t bytes) {
    FakeHardware::noteCudaCall();
    FakeHardware::implicitSync("cudaHostRegister");
    std::lock_guard<std::mutex> lock(wordsMu());
    registeredHost()[static_cast<char*>(p)] = bytes;
    return zcollSuccess;
  }
  static void unregisterHost(void* p) {
    FakeHardware::noteCudaCall();
    FakeHardware::implicitSync("cudaHostUnregister");
    std::lock_guard<std::mutex> lock(wordsMu());
    registeredHost().erase(static_cast<char*>(p));
  }
  static bool hostRegistered(const void* p) {
    std::lock_guard<std::mutex> lock(wordsMu());
    const char* c = static_cast<const char*>(p);
    auto it = registeredHost().upper_bound(c);
    if (it == registeredHost().begin()) return false;
    --it;
    return c < it->first + it->second;
  }
  // As a CUDA event: passed while never recorded; under capture recorded at every launch
  // (cudaEventRecordExternal), so it tells whether the latest launch got past it.
  Result markStream(std::shared_ptr<StreamMark>* out) override {
    auto mark = std::make_shared<FakeMark>();
    auto event = mark->event;
    event->fired = true;
    stream_->enqueue([event](FakeStream& s) {
      event->fired = false;
      s.submit([event] { event->fired = true; return zcollSuccess; }, false);
    });
    *out = std::move(mark);
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

  // Wait words (DeviceComponent::allocWaitWords): plain host memory (the stand-in's device reads
  // it as CUDA's reads mapped host memory). Allocating and freeing them synchronize implicitly.
  // Freed words are marked, not returned to the heap, so a wait reading one is caught.
  static Result allocWords(size_t n, uint32_t** out) {
    FakeHardware::implicitSync("cudaHostAlloc (wait words)");
    *out = static_cast<uint32_t*>(std::calloc(n, sizeof(uint32_t)));
    if (*out == nullptr) return fail(zcollSystemError, "fake wait words: out of memory");
    ++wordsAllocated;
    return zcollSuccess;
  }
  static void freeWords(uint32_t* words) {
    FakeHardware::implicitSync("cudaFreeHost (wait words)");
    std::lock_guard<std::mutex> lock(wordsMu());
    freedWords().push_back(words);
    ++wordsFreed;
  }
  static inline std::atomic<int> wordsAllocated{0}, wordsFreed{0};

 protected:
  Result defer(std::function<Result(Executor&)> op) override {
    const int delayUs = FakeHardware::kernelDelayUs;
    stream_->submit([op = std::move(op), delayUs] {
      if (delayUs > 0) std::this_thread::sleep_for(std::chrono::microseconds(delayUs));
      return op(hostExecutor());
    }, true, arena_);
    return zcollSuccess;
  }

 private:
  static std::mutex& wordsMu() {
    static std::mutex m;
    return m;
  }
  // Never destroyed: the freed words stay reachable from it, so LeakSanitizer does not count
  // them at exit (a list destroyed before its check would leave them unreferenced).
  static std::vector<const uint32_t*>& freedWords() {
    static auto* f = new std::vector<const uint32_t*>;
    return *f;
  }
  static std::map<const char*, size_t>& registeredHost() {  // never destroyed, as freedWords
    static auto* r = new std::map<const char*, size_t>;
    return *r;
  }
  // Whether `word` lies in a block of 64 words freed already.
  static bool wordFreed(const uint32_t* word) {
    std::lock_guard<std::mutex> lock(wordsMu());
    for (const uint32_t* w : freedWords())
      if (word >= w && word < w + WaitWords::kWords) return true;
    return false;
  }
  // Queues a stream memory wait until condition() (or the word was freed: a violation).
  void queueMemoryWait(const uint32_t* word, std::function<bool()> condition) {
    ++waitsQueued;
    auto released = [word, condition] { return wordFreed(word) || condition(); };
    stream_->enqueue([word, released, device = device()](FakeStream& s) {
      const uint64_t hold = FakeHardware::holdWait(released, device);
      s.submitWait([word, released, hold] {
        if (wordFreed(word)) {
          FakeHardware::violation("a stream memory wait read its word after zcoll freed it");
          FakeHardware::endWait(hold);
          return true;
        }
        const bool ok = released();
        if (ok) FakeHardware::endWait(hold);
        return ok;
      }, "a stream memory wait (cuStreamWaitValue32)");
    });
  }
  std::unique_ptr<FakeStream> owned_;  // a side stream; destroyed (drained) last
  FakeStream* stream_;
  FakeDeviceArena* arena_;
  int device_ = -1;  // the buffers' device; -1: the arena's
  WaitLimits limits_;
};

// Installs the fake device as the device component for its lifetime. Arena pointers of the
// calling thread (FakeDeviceArena::Scope) are then device buffers to every entry point, and a
// stream is a FakeStream* (NULL: the process's legacy default stream, shared by every thread).
inline Result fakeDeviceExecutorOn(zcollStream_t stream, int device,
                                   std::unique_ptr<Executor>* out) {
  FakeStream* s = stream ? reinterpret_cast<FakeStream*>(stream) : FakeHardware::legacyStream();
  auto e = std::make_unique<FakeDeviceExecutor>(s, tArena);
  e->onDevice(device);
  *out = std::move(e);
  return zcollSuccess;
}


// Whether the process "uses" the stand-in device yet (DeviceComponent::inUse; CUDA: a context
// exists), and how often a pointer was asked about (owns): a job that has not used the device
// must never be asked.
struct FakeUse {
  static inline std::atomic<bool> inUse{true};
  static inline std::atomic<int> ownsAsked{0};
};

inline bool fakeDeviceInUse() { return FakeUse::inUse.load(); }

inline bool fakeDeviceOwns(const void* p, int* device) {
  ++FakeUse::ownsAsked;
  FakeDeviceArena* a = FakeDeviceArena::holding(p);
  if (a == nullptr || a == gSharedArena) return false;
  *device = a->device;
  return true;
}

// CUDA IPC between ranks. Ranks are threads here, but each FakeIpc stands for a process: a
// handle exported by another FakeIpc is "opened" the first time it is mapped and "closed" by
// unmapAll, and both synchronize implicitly (FakeHardware::implicitSync), as
// cudaIpcOpenMemHandle/CloseMemHandle are taken to; so do allocShared/freeShared (cudaMalloc,
// cudaFree) and allocHost/freeHost (cudaHostAlloc, cudaFreeHost). Freeing memory that another
// FakeIpc still has open is a violation (CUDA: undefined behavior; importers close first).
class FakeIpc final : public DeviceIpc {
 public:
  FakeIpc() : out_(nullptr), in_(nullptr), id_(++nextId()) {}
  ~FakeIpc() override {
    (void)out_.synchronize();
    (void)in_.synchronize();
    std::lock_guard<std::mutex> lock(openMu());
    opened_.forEach([](uint64_t base) { openCount()[base] -= 1; });
  }
  const char* name() const override { return "fake-device"; }
  Result exportRange(const void* ptr, size_t, IpcHandle* out) override {
    FakeDeviceArena* a = FakeDeviceArena::holding(ptr);
    void* start = nullptr;
    if (a == nullptr || !a->exportable(ptr) || !a->allocationOf(ptr, &start))
      return fail(zcollUnsupported, "fake device: %p cannot be exported", ptr);
    *out = IpcHandle{};
    out->base = reinterpret_cast<uintptr_t>(start);
    out->offset = static_cast<const char*>(ptr) - static_cast<char*>(start);
    out->pid = getpid();
    out->process = processToken();
    out->reserved = id_;  // the exporting "process"
    return zcollSuccess;
  }
  bool mapped(const IpcHandle& h) override { return h.reserved == id_ || opened_.contains(h); }
  // Held mappings are counted as CUDA's are (transport/ipc_mappings.h): one is closed only when
  // its last holder unmaps it (openCount: how many FakeIpcs have an allocation open).
  Result map(const IpcHandle& h, const void** out, MapUse use) override {
    if (h.pid != getpid())
      return fail(zcollInternalError, "fake device: a handle of pid %d", h.pid);
    if (h.reserved != id_ && opened_.find(h, use) == nullptr) {
      FakeHardware::implicitSync("cudaIpcOpenMemHandle");
      opened_.add(h, h.base, use);
      std::lock_guard<std::mutex> lock(openMu());
      openCount()[h.base] += 1;
      ++opens;
    }
    *out = reinterpret_cast<const void*>(h.base + h.offset);
    // The mapping is this rank's device's from now on (the calling thread's arena: the rank's,
    // or the one its progress thread bound).
    FakeDeviceArena* owner = FakeDeviceArena::holding(*out);
    if (tArena != nullptr && owner != nullptr) tArena->noteReached(owner);
    ++mapsMade;
    return zcollSuccess;
  }
  void unmap(const IpcHandle& h) override {
    uint64_t base = 0;
    if (opened_.holds(h) <= 1) (void)drain(FakeHardware::waitLimitMs);
    if (!opened_.release(h, &base)) return;
    close(base);
  }
  void unmapAll() override {
    (void)drain(FakeHardware::waitLimitMs);
    opened_.forEach([this](uint64_t base) { close(base); });
    opened_.clear();
  }
  Result startCopy(void* dst, const void* src, size_t bytes, uint64_t* ticket, Lane lane,
                   const DeviceFence* after) override {
    const int delayMs = copyDelayMs;
    std::shared_ptr<FakeEvent> fence;
    if (after != nullptr) {
      const auto* f = dynamic_cast<const FakeFence*>(after);
      if (f == nullptr) return fail(zcollInternalError, "fake device: a fence of another kind");
      fence = f->event;
    }
    FakeStream& stream = lane == Lane::kOut ? out_ : in_;
    // After the call's work before the post (cudaStreamWaitEvent), then the copy.
    if (fence) stream.submitWait([fence] { return fence->fired.load(); }, "a copy's fence wait");
    ++copiesPending;
    stream.submit([=] {
      struct Done {
        ~Done() { --copiesPending; }
      } done;
      if (delayMs > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
      if (bytes == 0) return zcollSuccess;
      FakeDeviceArena* to = FakeDeviceArena::holding(dst);
      FakeDeviceArena* from = FakeDeviceArena::holding(src);
      FakeDeviceArena::Opened toOpened, fromOpened;
      if (to) toOpened = to->open();
      if (from) fromOpened = from->open();
      std::memcpy(dst, src, bytes);
      if (from == gSharedArena && corruptSharedReads > 0) {  // a probe that reads other bytes
        --corruptSharedReads;
        std::memset(dst, 0, bytes);
      }
      if (from) from->close(fromOpened);
      if (to) to->close(toOpened);
      return zcollSuccess;
    }, false);
    *ticket = ++started_;
    tickets_[*ticket] = {&stream, stream.submittedCount()};
    if (bytes != 0) ++copiesStarted;
    return zcollSuccess;
  }
  Result copyDone(uint64_t ticket, bool* done) override {
    auto it = tickets_.find(ticket);
    if (it == tickets_.end())
      return fail(zcollInvalidArgument, "fake device: ticket %llu was never issued",
                  static_cast<unsigned long long>(ticket));
    Result error = zcollSuccess;
    *done = it->second.first->ranUpTo(it->second.second, &error);
    return error;
  }
  // Bounded as CUDA's: zcollTimeout once `waitMs` passed with copies still queued.
  Result drain(int waitMs) override {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs);
    auto late = [&] { return std::chrono::steady_clock::now() > deadline; };
    Result a = zcollSuccess, b = zcollSuccess;
    if (!out_.synchronizeUntil(late, &a) || !in_.synchronizeUntil(late, &b))
      return fail(zcollTimeout, "fake device: copies still queued after %d ms", waitMs);
    return a != zcollSuccess ? a : b;
  }
  Result allocShared(size_t bytes, void** out) override {
    FakeHardware::implicitSync("cudaMalloc (cuda_ipc)");
    *out = gSharedArena->alloc(bytes);
    if (tArena != nullptr) tArena->noteReached(gSharedArena);  // its kernels write it
    return *out ? zcollSuccess : fail(zcollSystemError, "fake shared arena full");
  }
  void freeShared(void* p) override {
    FakeHardware::implicitSync("cudaFree (cuda_ipc)");
    {
      std::lock_guard<std::mutex> lock(openMu());
      auto it = openCount().find(reinterpret_cast<uintptr_t>(p));
      if (it != openCount().end() && it->second > 0)
        FakeHardware::violation("cudaFree of memory another rank still has mapped (importers "
                                "must close first)");
    }
    gSharedArena->free(p);
  }
  Result allocHost(size_t bytes, void** out) override {
    FakeHardware::implicitSync("cudaHostAlloc (staging)");
    return hostMemory().alloc(bytes, out);
  }
  void freeHost(void* p) override {
    FakeHardware::implicitSync("cudaFreeHost (staging)");
    hostMemory().release(p);
  }
  // Copies started by every FakeIpc (the tests check that cuda_ipc carried their bytes).
  static inline std::atomic<int> copiesStarted{0};
  // Handles mapped by every FakeIpc (reads in place map the peers' memory).
  static inline std::atomic<int> mapsMade{0};
  // A new device: nothing of it is mapped (a FakeIpc an earlier test leaked, as a transport
  // does when its copies never end, keeps its counts no longer).
  static void forgetMappings() {
    std::lock_guard<std::mutex> lock(openMu());
    openCount().clear();
  }
  // Copies started and not yet run, by every FakeIpc (some may wait for a fence).
  static inline std::atomic<int> copiesPending{0};
  // Handles opened by every FakeIpc.
  static inline std::atomic<int> opens{0};
  // The next this many copies out of shared memory (the init probe) deliver zeros.
  static inline std::atomic<int> corruptSharedReads{0};
  // Every copy started from now takes this long (a device busy with other work).
  static inline std::atomic<int> copyDelayMs{0};

 private:
  static std::atomic<int>& nextId() {  // ranks (threads) make theirs at once
    static std::atomic<int> n{0};
    return n;
  }
  static std::mutex& openMu() {
    static std::mutex m;
    return m;
  }
  static std::map<uintptr_t, int>& openCount() {  // allocation -> FakeIpcs that have it open
    static std::map<uintptr_t, int> c;
    return c;
  }
  FakeStream out_, in_;  // the copy lanes (DeviceIpc::Lane)
  const int id_;
  uint64_t started_ = 0;
  std::map<uint64_t, std::pair<FakeStream*, uint64_t>> tickets_;  // ticket -> lane, its count
  void close(uint64_t base) {
    FakeHardware::implicitSync("cudaIpcCloseMemHandle");
    std::lock_guard<std::mutex> lock(openMu());
    openCount()[base] -= 1;
  }
  IpcMappings<uint64_t> opened_;  // allocations of other FakeIpcs this one opened (their bases)
};

// Every rank works on one device (the test machines' GPUs are shared the same way), described
// only once the process uses it (CUDA: its primary context is active).
inline Result fakeDescribeDevice(DeviceIdentity* out) {
  *out = DeviceIdentity{};
  if (!FakeUse::inUse) return zcollSuccess;
  out->present = 1;
  out->ordinal = tArena != nullptr ? tArena->device : 0;  // the thread's current device
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
  // Whether the stand-in trusts calls queued on streams (DeviceComponent::queuedCallsTrusted):
  // kQueuedCalls: ZCOLL_DEVICE_CALLS=auto queues them; kLikeCuda (the default), as CUDA's
  // component does: auto runs calls synchronously.
  enum class Trust { kQueuedCalls, kLikeCuda };
  // The hardware queues: kLikeCuda, CUDA_DEVICE_MAX_CONNECTIONS of them (8 unset), shared by
  // the streams round-robin. kOnePerStream is NOT what a GPU does: a queue of its own for every
  // stream hides issue 38's hazard (the queued mode's waits for later work, which deadlock with
  // 8 queues: StrictStandIn.AsyncModeDeadlocksBehindLaterWork). Only for tests of the queued
  // mode's other rules (ordering, holds, the wait words, streams shared or refused), which run
  // nowhere else until a call's work is all submitted at call time.
  enum class Queues { kLikeCuda, kOnePerStream };
  explicit FakeDevice(Trust trust = Trust::kLikeCuda, Queues queues = Queues::kLikeCuda) {
    FakeHardwareQueues::configure(
        queues == Queues::kLikeCuda ? FakeHardwareQueues::fromEnvironment() : 0);
    FakeHardware::legacyStream()->reassign();
    FakeHardware::violations = 0;
    FakeUse::inUse = true;
    FakeIpc::forgetMappings();
    gSharedArena = &shared_;
    setDeviceComponent(trust == Trust::kQueuedCalls ? &kComponent : &kComponentLikeCuda);
  }
  ~FakeDevice() {
    FakeHardware::dropRetired();
    EXPECT_EQ(FakeHardware::violations.load(), 0)
        << "the stand-in device saw what would deadlock a GPU: " << FakeHardware::lastViolation();
    FakeHardwareQueues::configure(FakeHardwareQueues::kDefault);
    FakeUse::inUse = true;
    setDeviceComponent(nullptr);
    gSharedArena = nullptr;
  }

 private:
  static constexpr DeviceComponent kComponent{
      "fake-device",      fakeDeviceInUse,        fakeDeviceOwns,
      fakeDeviceExecutorOn, fakeDescribeDevice,   fakeMakeIpc,
      FakeDeviceExecutor::allocWords, FakeDeviceExecutor::freeWords,
      /*queuedCallsTrusted=*/true,
      FakeDeviceExecutor::registerHost, FakeDeviceExecutor::unregisterHost};
  static constexpr DeviceComponent kComponentLikeCuda{
      "fake-device",      fakeDeviceInUse,        fakeDeviceOwns,
      fakeDeviceExecutorOn, fakeDescribeDevice,   fakeMakeIpc,
      FakeDeviceExecutor::allocWords, FakeDeviceExecutor::freeWords,
      /*queuedCallsTrusted=*/false,
      FakeDeviceExecutor::registerHost, FakeDeviceExecutor::unregisterHost};
  FakeDeviceArena shared_;
};

}  // namespace zcoll::test
