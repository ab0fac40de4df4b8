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
  static const MemoryOps ops{"cuda", deviceAlloc, deviceRelease, pinnedAlloc, pinnedRelease};
  return ops;
}

class CudaExecutor final : public Executor {
 public:
  explicit CudaExecutor(cudaStream_t stream) : stream_(stream) {}
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

 private:
  cudaStream_t stream_;
};

}  // namespace

std::unique_ptr<Executor> makeCudaExecutor(cudaStream_t stream) {
  return std::make_unique<CudaExecutor>(stream);
}

}  // namespace zcoll
