// CUDA executor (see executor_cuda.h). Every operation only enqueues; flush() synchronizes the
// stream, and the first CUDA error (launch or asynchronous) becomes zcollCudaError.
#include "cuda/executor_cuda.h"

#include <cuda.h>  // driver types only: the functions come from cudaGetDriverEntryPointByVersion

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "base/params.h"
#include "cuda/cuda_result.h"
#include "cuda/fence_cuda.h"
#include "cuda/quant_cuda.h"
#include "cuda/reduce_cuda.h"

namespace zcoll {

namespace {

// Waits until `stream` has run everything queued on it. Unbounded without limits
// (cudaStreamSynchronize); with them, polls cudaStreamQuery, yielding for the first 2 ms and then
// sleeping 50 us between polls, until the stream is done, `limits.stop` is set (the communicator
// was aborted), or the timeout passes (Executor::limitWaits); then the stream's work is marked
// abandoned. `what` names the work in the messages.
Result waitForStream(cudaStream_t stream, const WaitLimits& limits, const char* what) {
  if (limits.stop == nullptr && limits.timeoutMs <= 0)
    return cudaResult(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (;;) {
    const cudaError_t err = cudaStreamQuery(stream);
    if (err != cudaErrorNotReady) return cudaResult(err, "cudaStreamQuery");
    const bool stopped = limits.stop != nullptr && limits.stop->load();
    const auto waited = Clock::now() - start;
    const bool late = limits.timeoutMs > 0 && waited > std::chrono::milliseconds(limits.timeoutMs);
    if (stopped || late) {
      if (limits.abandoned != nullptr) limits.abandoned->store(true);
      if (stopped)
        return fail(zcollRemoteError, "the communicator was aborted while %s was still queued "
                    "on a stream; that work is abandoned (its memory is kept)", what);
      return fail(zcollTimeout, "%s did not finish within %d ms (ZCOLL_TIMEOUT): the stream is "
                  "stuck behind work that does not end; that work is abandoned (its memory is "
                  "kept)", what, limits.timeoutMs);
    }
    if (waited < std::chrono::milliseconds(2)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

// Scratch is allocated in stream order (cudaMallocFromPoolAsync), never with cudaMalloc: a call's
// scratch grows on the progress thread while the caller's stream waits for the call, and
// cudaMalloc/cudaFree "cause the GPU to synchronize across all executing CUDA streams" (CUDA
// programming guide, stream-ordered allocator): the call's later work would sit behind the wait
// that waits for it (base/stream_holds.h). Per device, a memory pool of zcoll's own, its release
// threshold at the maximum (freed memory stays reserved for the next allocation instead of going
// back to the OS at each synchronization), and a non-blocking stream of zcoll's own on which only
// these allocations and frees are ordered. An allocation is waited for on that stream before it
// is handed out, so every stream may use it (the allocator's rule for other streams). Pools and
// streams are never destroyed (process-wide, like the side-stream pool).
class ScratchPools {
 public:
  static ScratchPools& instance() {
    static ScratchPools* pools = new ScratchPools;  // never destroyed (see above)
    return *pools;
  }
  // Memory of the current device.
  Result alloc(size_t bytes, void** out) {
    int device = 0;
    ZCOLL_CHECK(cudaResult(cudaGetDevice(&device), "cudaGetDevice"));
    PerDevice* d = nullptr;
    ZCOLL_CHECK(of(device, &d));
    ZCOLL_CHECK(cudaResult(cudaMallocFromPoolAsync(out, bytes == 0 ? 1 : bytes, d->pool, d->stream),
                           "cudaMallocFromPoolAsync (zcoll scratch)"));
    // Bounded by ZCOLL_TIMEOUT: a device that never runs the allocation fails the call instead
    // of hanging it (issue 38's review: the scratch stream's unbounded synchronize).
    WaitLimits bound;
    const int64_t timeoutSec = std::min<int64_t>(paramInt("ZCOLL_TIMEOUT"), 1 << 20);
    bound.timeoutMs = static_cast<int>(timeoutSec * 1000);
    Result r = waitForStream(d->stream, bound, "a scratch allocation (zcoll's scratch stream)");
    if (r != zcollSuccess) {
      (void)cudaFreeAsync(*out, d->stream);
      return r;
    }
    std::lock_guard<std::mutex> lock(mu_);
    owner_[*out] = device;
    return zcollSuccess;
  }
  // Freed in stream order on zcoll's stream: whoever releases scratch guarantees that no work
  // still uses it (exec/scratch.h).
  void release(void* p) {
    PerDevice* d = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = owner_.find(p);
      if (it == owner_.end()) return;
      d = &devices_[it->second];
      owner_.erase(it);
    }
    if (cudaFreeAsync(p, d->stream) != cudaSuccess) (void)cudaGetLastError();
  }

 private:
  struct PerDevice {
    cudaMemPool_t pool = nullptr;
    cudaStream_t stream = nullptr;
  };
  Result of(int device, PerDevice** out) {
    std::lock_guard<std::mutex> lock(mu_);
    PerDevice& d = devices_[device];
    if (d.pool == nullptr) {
      int supported = 0;
      ZCOLL_CHECK(cudaResult(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported,
                                                    device),
                             "cudaDeviceGetAttribute(cudaDevAttrMemoryPoolsSupported)"));
      if (!supported)
        return fail(zcollUnsupported, "device %d has no stream-ordered memory pools, which zcoll's "
                    "device scratch needs (cudaMalloc would synchronize the device while a stream "
                    "waits for a call)", device);
      cudaMemPoolProps props{};
      props.allocType = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = device;
      cudaMemPool_t pool = nullptr;
      ZCOLL_CHECK(
          cudaResult(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate (zcoll scratch)"));
      uint64_t keep = UINT64_MAX;
      ZCOLL_CHECK(cudaResult(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
                             "cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold)"));
      cudaStream_t stream = nullptr;
      ZCOLL_CHECK(cudaResult(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                             "cudaStreamCreateWithFlags (zcoll scratch)"));
      d.pool = pool;
      d.stream = stream;
    }
    *out = &d;
    return zcollSuccess;
  }
  std::mutex mu_;
  std::map<int, PerDevice> devices_;  // std::map: pointers to its values stay valid
  std::map<void*, int> owner_;        // each allocation's device
};

Result deviceAlloc(size_t bytes, void** out) { return ScratchPools::instance().alloc(bytes, out); }
void deviceRelease(void* p) { ScratchPools::instance().release(p); }

const MemoryOps& cudaMemory() {
  // Outgrown regions are kept until the communicator goes (exec/scratch.h): freeing one in
  // stream order on zcoll's stream is not ordered after the call's own kernels.
  static const MemoryOps ops{"cuda", deviceAlloc, deviceRelease, /*deferRelease=*/true};
  return ops;
}

// The streams and ordering events of side executors (makeSideExecutor), kept per device
// ordinal and reused: a queued call takes a stream (non-blocking) and an event from its device's
// free list, or creates them when the list is empty, and gives both back when its side executor
// dies. The pool is never shrunk (an idle stream or event costs little to keep) and caps nothing.
// Process-wide and never destroyed, so no CUDA call runs in a static destructor at exit.
//
// Reuse is safe without waiting:
//  - A stream given back may still have work queued (a call dropped before it ran leaves its
//    wait for the caller's stream there, and nothing flushed it). That is fine: the next user's
//    work is queued behind it, in stream order, and runs once it is done (it always ends: a side
//    stream never waits on a word itself, and the words of the caller's streams it may wait
//    behind are always set, api/launch.cc).
//  - An event given back may be recorded again at once: cudaStreamWaitEvent waits for the record
//    that was the event's latest when the wait was issued, and later records do not change it.
class SidePool {
 public:
  static SidePool& instance() {
    static SidePool* pool = new SidePool;  // never destroyed (see above)
    return *pool;
  }

  // A stream of the current device, which must be `device`.
  Result takeStream(int device, cudaStream_t* out) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<cudaStream_t>& idle = devices_[device].streams;
      if (!idle.empty()) {
        *out = idle.back();
        idle.pop_back();
        return zcollSuccess;
      }
    }
    return cudaResult(cudaStreamCreateWithFlags(out, cudaStreamNonBlocking),
                      "cudaStreamCreateWithFlags");
  }
  // An event of the current device, which must be `device`.
  Result takeEvent(int device, cudaEvent_t* out) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<cudaEvent_t>& idle = devices_[device].events;
      if (!idle.empty()) {
        *out = idle.back();
        idle.pop_back();
        return zcollSuccess;
      }
    }
    return cudaResult(cudaEventCreateWithFlags(out, cudaEventDisableTiming),
                      "cudaEventCreateWithFlags");
  }
  // No CUDA call: may run on any thread, with any device current.
  void give(int device, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mu_);
    devices_[device].streams.push_back(stream);
  }
  void give(int device, cudaEvent_t event) {
    std::lock_guard<std::mutex> lock(mu_);
    devices_[device].events.push_back(event);
  }

 private:
  struct PerDevice {
    std::vector<cudaStream_t> streams;
    std::vector<cudaEvent_t> events;
  };
  std::mutex mu_;
  std::map<int, PerDevice> devices_;
};

// What a side executor took from the pool; given back when it dies.
struct SideLease {
  int device = -1;
  cudaStream_t stream = nullptr;
  cudaEvent_t event = nullptr;
  bool hasStream = false, hasEvent = false;
  SideLease() = default;
  SideLease(const SideLease&) = delete;
  SideLease& operator=(const SideLease&) = delete;
  ~SideLease() {
    if (hasStream) SidePool::instance().give(device, stream);
    if (hasEvent) SidePool::instance().give(device, event);
  }
};

// Makes `device` current for the scope (restoring the previous one) when it is not already.
class DeviceScope {
 public:
  ~DeviceScope() {
    if (switched_) (void)cudaSetDevice(previous_);
  }
  Result enter(int device) {
    ZCOLL_CHECK(cudaResult(cudaGetDevice(&previous_), "cudaGetDevice"));
    if (previous_ == device) return zcollSuccess;
    ZCOLL_CHECK(cudaResult(cudaSetDevice(device), "cudaSetDevice"));
    switched_ = true;
    return zcollSuccess;
  }

 private:
  int previous_ = -1;
  bool switched_ = false;
};

// cuStreamWaitValue32 from the driver, looked up once with cudaGetDriverEntryPointByVersion
// (libcuda is never linked, as in cuda/cuda_ipc.cc).
using StreamWaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

Result streamWaitValue32(StreamWaitValue32* out) {
  static StreamWaitValue32 fn = nullptr;
  static Result found = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    cudaError_t err = cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &f, 12000,
                                                       cudaEnableDefault, &status);
    if (err != cudaSuccess || status != cudaDriverEntryPointSuccess || f == nullptr)
      return fail(zcollCudaError, "the driver has no cuStreamWaitValue32 (%s): queued device "
                  "calls need stream memory operations; ZCOLL_DEVICE_CALLS=sync runs without",
                  cudaGetErrorName(err));
    fn = reinterpret_cast<StreamWaitValue32>(f);
    return zcollSuccess;
  }();
  *out = fn;
  return found;
}

// cuStreamWriteValue32, looked up as cuStreamWaitValue32 is.
using StreamWriteValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

Result streamWriteValue32(StreamWriteValue32* out) {
  static StreamWriteValue32 fn = nullptr;
  static Result found = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    cudaError_t err = cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &f, 12000,
                                                       cudaEnableDefault, &status);
    if (err != cudaSuccess || status != cudaDriverEntryPointSuccess || f == nullptr)
      return fail(zcollCudaError, "the driver has no cuStreamWriteValue32 (%s): stream-triggered "
                  "device calls need stream memory operations; ZCOLL_DEVICE_CALLS=sync runs "
                  "without", cudaGetErrorName(err));
    fn = reinterpret_cast<StreamWriteValue32>(f);
    return zcollSuccess;
  }();
  *out = fn;
  return found;
}

// A recorded event as a StreamMark (exec/wait_words.h). An error from the event (a broken
// context) counts as not passed: the words it guards are then kept, never freed under a stream.
struct EventMark final : StreamMark {
  explicit EventMark(int d) : device(d) {}
  ~EventMark() override {
    if (taken) SidePool::instance().give(device, event);
  }
  bool passed() override {
    const cudaError_t err = cudaEventQuery(event);
    if (err != cudaSuccess && err != cudaErrorNotReady) (void)cudaGetLastError();
    return err == cudaSuccess;
  }
  int device;
  cudaEvent_t event = nullptr;
  bool taken = false;
};

class CudaExecutor final : public Executor {
 public:
  // On `stream` of `device`. A side executor holds the lease of its pooled stream and event and
  // gives them back to the pool when it dies (their queued work still completes).
  CudaExecutor(cudaStream_t stream, int device, std::unique_ptr<SideLease> lease = nullptr)
      : stream_(stream), device_(device), lease_(std::move(lease)) {}
  const char* name() const override { return "cuda"; }
  MemKind memKind() const override { return MemKind::kDevice; }
  const MemoryOps& memory() const override { return cudaMemory(); }

  Result copy(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0 || dst == src) return zcollSuccess;
    return cudaResult(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_),
                      "cudaMemcpyAsync");
  }
  Result toAcc(void* acc, const void* in, zcollDataType_t dtype, size_t n) override {
    return cuda::toAcc(acc, in, dtype, n, stream_);
  }
  Result accumulate(void* acc, const void* in, bool inIsAcc, zcollDataType_t dtype,
                    zcollRedOp_t op, size_t n) override {
    return cuda::accumulate(acc, in, inIsAcc, dtype, op, n, stream_);
  }
  Result combine(void* out, const void* a, const void* b, zcollDataType_t dtype, zcollRedOp_t op,
                 int avgDivisor, size_t n) override {
    return cuda::combine(out, a, b, dtype, op, avgDivisor, n, stream_);
  }
  Result fromAcc(void* out, const void* acc, zcollDataType_t dtype, zcollRedOp_t op, int nranks,
                 size_t n) override {
    return cuda::fromAcc(out, acc, dtype, op, nranks, n, stream_);
  }

  Result scale(void* dst, const void* src, zcollDataType_t dtype, size_t n, const void* scalar,
               bool scalarOnDevice) override {
    return cuda::scale(dst, src, dtype, n, scalar, scalarOnDevice, stream_);
  }

  Result quantize(const void* in, zcollDataType_t dtype, size_t n, const quant::QuantParams& p,
                  void* out) override {
    return quant::cuda::quantize(in, dtype, n, p, out, stream_);
  }
  Result quantizeChunks(const void* in, zcollDataType_t dtype, size_t chunkElems, size_t nChunks,
                        const int* destOrder, const quant::QuantParams& p, void* out) override {
    return quant::cuda::quantizeChunks(in, dtype, chunkElems, nChunks, destOrder, p, out,
                                       stream_);
  }
  Result dequantize(const void* q, size_t n, const quant::QuantParams& p, void* out,
                    zcollDataType_t dtype) override {
    return quant::cuda::dequantize(q, n, p, out, dtype, stream_);
  }
  Result dequantizeSum(const void* const* chunks, int k, size_t n, const quant::QuantParams& p,
                       float scale, void* out, zcollDataType_t dtype) override {
    return quant::cuda::dequantizeSum(chunks, k, n, p, scale, out, dtype, stream_);
  }
  Result dequantReduceRequant(const void* const* chunks, int k, size_t n,
                              const quant::QuantParams& in, const quant::QuantParams& out,
                              void* outQ) override {
    return quant::cuda::dequantReduceRequant(chunks, k, n, in, out, outQ, stream_);
  }

  // Waits for the stream within the call's limits (waitForStream).
  Result flush() override { return waitForStream(stream_, limits_, "device work of this call"); }
  void limitWaits(const WaitLimits& limits) override { limits_ = limits; }
  // An event from the side pool recorded on this stream, given back when the fence goes.
  Result fence(std::shared_ptr<DeviceFence>* out) override {
    DeviceScope scope;  // pooled events belong to device_
    ZCOLL_CHECK(scope.enter(device_));
    auto f = std::make_shared<CudaFence>();
    cudaEvent_t ev = nullptr;
    ZCOLL_CHECK(SidePool::instance().takeEvent(device_, &ev));
    const int device = device_;
    f->event = ev;
    f->giveBack = [device, ev] { SidePool::instance().give(device, ev); };
    ZCOLL_CHECK(cudaResult(cudaEventRecord(ev, stream_), "cudaEventRecord (a send's fence)"));
    *out = std::move(f);
    return zcollSuccess;
  }
  int device() const override { return device_; }

  // The device's default memory pool, in the caller's stream order: no implicit synchronization
  // (cudaMalloc/cudaFree would wait behind a wait a queued call holds; base/stream_holds.h).
  Result allocOnStream(size_t bytes, void** out) override {
    DeviceScope scope;
    ZCOLL_CHECK(scope.enter(device_));
    return cudaResult(cudaMallocAsync(out, bytes == 0 ? 1 : bytes, stream_), "cudaMallocAsync");
  }
  Result freeOnStream(void* p) override {
    DeviceScope scope;
    ZCOLL_CHECK(scope.enter(device_));
    return cudaResult(cudaFreeAsync(p, stream_), "cudaFreeAsync");
  }

  // cudaStreamIsCapturing: legal while the stream is captured (it queues nothing), any status
  // but None (Active, or Invalidated by an earlier illegal call) counts as capturing.
  Result isCapturing(bool* capturing) override {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    ZCOLL_CHECK(cudaResult(cudaStreamIsCapturing(stream_, &capture), "cudaStreamIsCapturing"));
    *capturing = capture != cudaStreamCaptureStatusNone;
    return zcollSuccess;
  }

  // The caller's stream is not capturing: the entry point checked (api/launch.cc).
  Result makeSideExecutor(std::unique_ptr<Executor>* out) override {
    // Pooled streams and events belong to device_ (created with it current). The caller's
    // thread normally has it current already (makeCudaExecutor read it in the same call).
    DeviceScope scope;
    ZCOLL_CHECK(scope.enter(device_));
    // Whatever is taken is given back by the lease, on every path below.
    auto lease = std::make_unique<SideLease>();
    lease->device = device_;
    SidePool& pool = SidePool::instance();
    ZCOLL_CHECK(pool.takeStream(device_, &lease->stream));
    lease->hasStream = true;
    ZCOLL_CHECK(pool.takeEvent(device_, &lease->event));
    lease->hasEvent = true;
    ZCOLL_CHECK(cudaResult(cudaEventRecord(lease->event, stream_), "cudaEventRecord"));
    ZCOLL_CHECK(cudaResult(cudaStreamWaitEvent(lease->stream, lease->event, 0),
                           "cudaStreamWaitEvent"));
    cudaStream_t side = lease->stream;
    *out = std::make_unique<CudaExecutor>(side, device_, std::move(lease));
    return zcollSuccess;
  }

  // An event from the side pool, recorded on this stream now; given back when the mark goes.
  // Under capture an external event record node: every launch of the graph records it.
  Result markStream(std::shared_ptr<StreamMark>* out) override {
    DeviceScope scope;
    ZCOLL_CHECK(scope.enter(device_));
    auto mark = std::make_shared<EventMark>(device_);
    ZCOLL_CHECK(SidePool::instance().takeEvent(device_, &mark->event));
    mark->taken = true;
    bool capturing = false;
    ZCOLL_CHECK(isCapturing(&capturing));
    ZCOLL_CHECK(cudaResult(cudaEventRecordWithFlags(mark->event, stream_,
                                                    capturing ? cudaEventRecordExternal
                                                              : cudaEventRecordDefault),
                           "cudaEventRecordWithFlags (stream mark)"));
    *out = std::move(mark);
    return zcollSuccess;
  }

  // A stream memory operation: the stream goes on once the host has stored `value` (or a later
  // one) into *word. The host never blocks the stream, and no CUDA driver thread waits.
  Result waitValue(const uint32_t* word, uint32_t value) override {
    return streamWait(word, value, CU_STREAM_WAIT_VALUE_GEQ);
  }

  // The same, until (*word & mask) != 0 (a handshake flag of src/trigger: captured into a graph
  // as a batch memory-operation node, replayed with the same mask).
  Result waitBits(const uint32_t* word, uint32_t mask) override {
    return streamWait(word, mask, CU_STREAM_WAIT_VALUE_AND);
  }

  // The mark's event, recorded on a stream of this device before (markStream): work already
  // submitted, so this wait never depends on later work.
  Result waitMark(StreamMark& mark) override {
    auto* em = dynamic_cast<EventMark*>(&mark);
    if (em == nullptr) return fail(zcollInternalError, "a stream mark not made by the cuda executor");
    return cudaResult(cudaStreamWaitEvent(stream_, em->event, 0), "cudaStreamWaitEvent (mark)");
  }

  // Default flags: a memory fence orders the stream's earlier writes before the word's
  // (CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER would drop it).
  Result writeValue(uint32_t* word, uint32_t value) override {
    StreamWriteValue32 write = nullptr;
    ZCOLL_CHECK(streamWriteValue32(&write));
    void* dev = nullptr;
    ZCOLL_CHECK(cudaResult(cudaHostGetDevicePointer(&dev, word, 0),
                           "cudaHostGetDevicePointer (zcoll flag)"));
    CUresult r = write(reinterpret_cast<CUstream>(stream_), reinterpret_cast<CUdeviceptr>(dev),
                       value, CU_STREAM_WRITE_VALUE_DEFAULT);
    if (r != CUDA_SUCCESS)
      return fail(zcollCudaError, "cuStreamWriteValue32 failed (CUresult %d)",
                  static_cast<int>(r));
    return zcollSuccess;
  }

  bool sharedStreamKey(uintptr_t* key) const override {
    if (stream_ == cudaStreamPerThread) return false;  // each thread's own
    *key = stream_ == cudaStreamLegacy ? 0 : reinterpret_cast<uintptr_t>(stream_);
    return true;
  }

  Result bindThread() override {
    int current = -1;
    ZCOLL_CHECK(cudaResult(cudaGetDevice(&current), "cudaGetDevice"));
    if (current == device_) return zcollSuccess;
    return cudaResult(cudaSetDevice(device_), "cudaSetDevice");
  }

 private:
  Result streamWait(const uint32_t* word, uint32_t value, unsigned int flags) {
    StreamWaitValue32 wait = nullptr;
    ZCOLL_CHECK(streamWaitValue32(&wait));
    void* dev = nullptr;
    ZCOLL_CHECK(cudaResult(cudaHostGetDevicePointer(&dev, const_cast<uint32_t*>(word), 0),
                           "cudaHostGetDevicePointer (zcoll wait word)"));
    CUresult r = wait(reinterpret_cast<CUstream>(stream_), reinterpret_cast<CUdeviceptr>(dev),
                      value, flags);
    if (r != CUDA_SUCCESS)
      return fail(zcollCudaError, "cuStreamWaitValue32 failed (CUresult %d)", static_cast<int>(r));
    return zcollSuccess;
  }
  cudaStream_t stream_;
  int device_;
  std::unique_ptr<SideLease> lease_;  // side executors only
  WaitLimits limits_;
};

}  // namespace

Result makeCudaExecutor(cudaStream_t stream, int device, std::unique_ptr<Executor>* out) {
  *out = std::make_unique<CudaExecutor>(stream, device);
  return zcollSuccess;
}

Result allocCudaWaitWords(size_t n, uint32_t** out) {
  void* p = nullptr;
  ZCOLL_CHECK(cudaResult(cudaHostAlloc(&p, n * sizeof(uint32_t),
                                       cudaHostAllocMapped | cudaHostAllocPortable),
                         "cudaHostAlloc (zcoll wait words)"));
  std::memset(p, 0, n * sizeof(uint32_t));
  *out = static_cast<uint32_t*>(p);
  return zcollSuccess;
}

void freeCudaWaitWords(uint32_t* words) {
  if (cudaFreeHost(words) != cudaSuccess) (void)cudaGetLastError();
}

Result registerCudaHostMemory(void* p, size_t bytes) {
  return cudaResult(cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable),
                    "cudaHostRegister (zcoll flags)");
}

void unregisterCudaHostMemory(void* p) {
  if (cudaHostUnregister(p) != cudaSuccess) (void)cudaGetLastError();
}

}  // namespace zcoll
