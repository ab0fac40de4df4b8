// CUDA executor (see executor_cuda.h). Every operation only enqueues; flush() synchronizes the
// stream, and the first CUDA error (launch or asynchronous) becomes zcollCudaError.
#include "cuda/executor_cuda.h"

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
Result pinnedAlloc(size_t bytes, void** out) {
  return cudaResult(cudaHostAlloc(out, bytes == 0 ? 1 : bytes, cudaHostAllocPortable),
                    "cudaHostAlloc (zcoll staging)");
}
void pinnedRelease(void* p) { (void)cudaFreeHost(p); }

const MemoryOps& cudaMemory() {
  static const MemoryOps ops{"cuda",      deviceAlloc,   deviceRelease, pinnedAlloc,
                             pinnedRelease, /*releaseWaitsForDevice=*/true};
  return ops;
}

// A host function on a stream that holds it until the gate opens (holdUntil). It owns one
// reference to the gate.
void CUDART_CB waitForGate(void* gate) {
  auto* ref = static_cast<std::shared_ptr<Gate>*>(gate);
  (void)(*ref)->wait();
  delete ref;
}

class CudaExecutor final : public Executor {
 public:
  // On `stream` of `device`; owns the stream (and destroys it) when `owned`.
  CudaExecutor(cudaStream_t stream, int device, bool owned)
      : stream_(stream), device_(device), ownsStream_(owned) {}
  ~CudaExecutor() override {
    if (ownsStream_) (void)cudaStreamDestroy(stream_);  // its work still completes
  }
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

  Result flush() override { return cudaResult(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

  Result makeSideExecutor(std::unique_ptr<Executor>* out) override {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    ZCOLL_CHECK(cudaResult(cudaStreamIsCapturing(stream_, &capture), "cudaStreamIsCapturing"));
    if (capture != cudaStreamCaptureStatusNone)
      return fail(zcollInvalidUsage, "the stream is being captured into a CUDA graph: zcoll calls "
                  "cannot be captured (they wait on the host for the network)");
    cudaStream_t side = nullptr;
    ZCOLL_CHECK(cudaResult(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking),
                           "cudaStreamCreateWithFlags"));
    auto exec = std::make_unique<CudaExecutor>(side, device_, true);
    cudaEvent_t issued = nullptr;
    ZCOLL_CHECK(cudaResult(cudaEventCreateWithFlags(&issued, cudaEventDisableTiming),
                           "cudaEventCreateWithFlags"));
    Result r = cudaResult(cudaEventRecord(issued, stream_), "cudaEventRecord");
    if (r == zcollSuccess) r = cudaResult(cudaStreamWaitEvent(side, issued, 0), "cudaStreamWaitEvent");
    (void)cudaEventDestroy(issued);  // released once the wait has used it
    ZCOLL_CHECK(r);
    *out = std::move(exec);
    return zcollSuccess;
  }

  Result holdUntil(std::shared_ptr<Gate> gate) override {
    auto* ref = new std::shared_ptr<Gate>(std::move(gate));
    Result r = cudaResult(cudaLaunchHostFunc(stream_, waitForGate, ref), "cudaLaunchHostFunc");
    if (r != zcollSuccess) delete ref;
    return r;
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
  bool ownsStream_;
};

}  // namespace

Result makeCudaExecutor(cudaStream_t stream, std::unique_ptr<Executor>* out) {
  int device = 0;
  ZCOLL_CHECK(cudaResult(cudaGetDevice(&device), "cudaGetDevice"));
  *out = std::make_unique<CudaExecutor>(stream, device, false);
  return zcollSuccess;
}

}  // namespace zcoll
