// The host executor: the CPU reduction kernels and the SIMD quantization kernels, run on the
// calling thread. Synchronous, so flush() has nothing to wait for.
#include <cstdlib>
#include <cstring>

#include "exec/bulk_copy.h"
#include "exec/executor.h"
#include "exec/reduce_kernels.h"

namespace zcoll {

namespace {

Result hostAlloc(size_t bytes, void** out) {
  *out = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (*out == nullptr) return fail(zcollSystemError, "out of memory for %zu bytes", bytes);
  return zcollSuccess;
}

void hostRelease(void* p) { std::free(p); }

class HostExecutor final : public Executor {
 public:
  const char* name() const override { return "host"; }
  MemKind memKind() const override { return MemKind::kHost; }
  const MemoryOps& memory() const override { return hostMemory(); }

  Result copy(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0 || dst == src) return zcollSuccess;
    const char* d = static_cast<const char*>(dst);
    const char* s = static_cast<const char*>(src);
    if (d + bytes <= s || s + bytes <= d)
      bulkCopy(dst, src, bytes);
    else
      std::memmove(dst, src, bytes);
    return zcollSuccess;
  }
  Result toAcc(void* acc, const void* in, zcollDataType_t dtype, size_t n) override {
    zcoll::toAcc(acc, in, dtype, n);
    return zcollSuccess;
  }
  Result accumulate(void* acc, const void* in, bool inIsAcc, zcollDataType_t dtype,
                    zcollRedOp_t op, size_t n) override {
    zcoll::accumulate(acc, in, inIsAcc, dtype, op, n);
    return zcollSuccess;
  }
  Result combine(void* out, const void* a, const void* b, zcollDataType_t dtype, zcollRedOp_t op,
                 int avgDivisor, size_t n) override {
    combineInto(out, a, b, dtype, op, avgDivisor, n);
    return zcollSuccess;
  }
  Result fromAcc(void* out, const void* acc, zcollDataType_t dtype, zcollRedOp_t op, int nranks,
                 size_t n) override {
    zcoll::fromAcc(out, acc, dtype, op, nranks, n);
    return zcollSuccess;
  }

  Result scale(void* dst, const void* src, zcollDataType_t dtype, size_t n, const void* scalar,
               bool scalarOnDevice) override {
    (void)scalarOnDevice;  // host memory either way for the host
    scaleBy(dst, src, scalar, dtype, n);
    return zcollSuccess;
  }

  Result quantize(const void* in, zcollDataType_t dtype, size_t n, const quant::QuantParams& p,
                  void* out) override {
    return quant::quantize(in, dtype, n, p, out);
  }
  Result quantizeChunks(const void* in, zcollDataType_t dtype, size_t chunkElems, size_t nChunks,
                        const int* destOrder, const quant::QuantParams& p, void* out) override {
    return quant::quantizeChunks(in, dtype, chunkElems, nChunks, destOrder, p, out);
  }
  Result dequantize(const void* q, size_t n, const quant::QuantParams& p, void* out,
                    zcollDataType_t dtype) override {
    return quant::dequantize(q, n, p, out, dtype);
  }
  Result dequantizeSum(const void* const* chunks, int k, size_t n, const quant::QuantParams& p,
                       float scale, void* out, zcollDataType_t dtype) override {
    return quant::dequantizeSum(chunks, k, n, p, scale, out, dtype);
  }
  Result dequantReduceRequant(const void* const* chunks, int k, size_t n,
                              const quant::QuantParams& in, const quant::QuantParams& out,
                              void* outQ) override {
    return quant::dequantReduceRequant(chunks, k, n, in, out, outQ);
  }

  Result flush() override { return zcollSuccess; }
};

}  // namespace

const MemoryOps& hostMemory() {
  static const MemoryOps ops{"host", hostAlloc, hostRelease};
  return ops;
}

Result Executor::makeSideExecutor(std::unique_ptr<Executor>*) {
  return fail(zcollInternalError, "the %s executor has no stream to order work on", name());
}

Result Executor::allocOnStream(size_t, void**) {
  return fail(zcollInternalError, "the %s executor has no stream to allocate in order on", name());
}

Result Executor::freeOnStream(void*) {
  return fail(zcollInternalError, "the %s executor has no stream to free in order on", name());
}

Result Executor::markStream(std::shared_ptr<StreamMark>*) {
  return fail(zcollInternalError, "the %s executor has no stream to mark", name());
}

Result Executor::waitValue(const uint32_t*, uint32_t) {
  return fail(zcollInternalError, "the %s executor has no stream to hold", name());
}

Result Executor::waitBits(const uint32_t*, uint32_t) {
  return fail(zcollInternalError, "the %s executor has no stream to hold", name());
}

Result Executor::waitMark(StreamMark&) {
  return fail(zcollInternalError, "the %s executor has no stream to order", name());
}

Result Executor::writeValue(uint32_t*, uint32_t) {
  return fail(zcollInternalError, "the %s executor has no stream to write a flag from", name());
}

Executor& hostExecutor() {
  static HostExecutor* host = new HostExecutor();  // never destroyed: usable during exit
  return *host;
}

}  // namespace zcoll
