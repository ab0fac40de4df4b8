// CUDA executor (see executor_cuda.h). Every operation only enqueues; flush() synchronizes the
// stream, and the first CUDA error (launch or asynchronous) becomes zcollCudaError.
#include "cuda/executor_cuda.h"

#include <cuda.h>  // driver types only: the functions come from cudaGetDriverEntryPointByVersion

#include <cstring>

#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "cuda/quant_cuda.h"
#include "cuda/reduce_cuda.h"

namespace zcoll {

namespace {

Result cudaResult(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return zcollSuccess;
  return fail(zcollCudaError, "%s failed: %s (%s)", what, cudaGetErrorName(err),
              cudaGetErrorString(err));
}

Result deviceAlloc(size_t bytes, void** out) {
  // cudaMalloc aligns to at least 256 bytes.
  return cudaResult(cudaMalloc(out, bytes == 0 ? 1 : bytes), "cudaMalloc (zcoll scratch)");
}
void deviceRelease(void* p) { (void)cudaFree(p); }

const MemoryOps& cudaMemory() {
  static const MemoryOps ops{"cuda", deviceAlloc, deviceRelease,
                             /*releaseWaitsForDevice=*/true};
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

  Result flush() override {
    return cudaResult(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  Result makeSideExecutor(std::unique_ptr<Executor>* out) override {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    ZCOLL_CHECK(cudaResult(cudaStreamIsCapturing(stream_, &capture), "cudaStreamIsCapturing"));
    if (capture != cudaStreamCaptureStatusNone)
      return fail(zcollInvalidUsage, "the stream is being captured into a CUDA graph: zcoll calls "
                  "cannot be captured (their work is launched by the progress thread as the "
                  "network delivers; run them outside the capture)");
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

  Result allocWaitWords(size_t n, uint32_t** out) override {
    void* p = nullptr;
    ZCOLL_CHECK(cudaResult(cudaHostAlloc(&p, n * sizeof(uint32_t),
                                         cudaHostAllocMapped | cudaHostAllocPortable),
                           "cudaHostAlloc (zcoll wait words)"));
    std::memset(p, 0, n * sizeof(uint32_t));
    *out = static_cast<uint32_t*>(p);
    return zcollSuccess;
  }

  // A stream memory operation: the stream goes on once the host has stored `value` (or a later
  // one) into *word. The host never blocks the stream, and no CUDA driver thread waits.
  Result waitValue(const uint32_t* word, uint32_t value) override {
    StreamWaitValue32 wait = nullptr;
    ZCOLL_CHECK(streamWaitValue32(&wait));
    void* dev = nullptr;
    ZCOLL_CHECK(cudaResult(cudaHostGetDevicePointer(&dev, const_cast<uint32_t*>(word), 0),
                           "cudaHostGetDevicePointer (zcoll wait word)"));
    CUresult r = wait(reinterpret_cast<CUstream>(stream_), reinterpret_cast<CUdeviceptr>(dev),
                      value, CU_STREAM_WAIT_VALUE_GEQ);
    if (r != CUDA_SUCCESS)
      return fail(zcollCudaError, "cuStreamWaitValue32 failed (CUresult %d)", static_cast<int>(r));
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
  cudaStream_t stream_;
  int device_;
  std::unique_ptr<SideLease> lease_;  // side executors only
};

}  // namespace

Result makeCudaExecutor(cudaStream_t stream, std::unique_ptr<Executor>* out) {
  int device = 0;
  ZCOLL_CHECK(cudaResult(cudaGetDevice(&device), "cudaGetDevice"));
  *out = std::make_unique<CudaExecutor>(stream, device);
  return zcollSuccess;
}

}  // namespace zcoll
