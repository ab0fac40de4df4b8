// Executors: the data work of an algorithm step (copy, reduce, scale, quantize, dequantize,
// dequantize-sum, dequantize-reduce-requantize), named by operation and carried out for one
// memory kind, in the shape of UCC's executor (ec) component. Algorithms call these operations
// through their Stage and never ask where the bytes live: the entry point picks the executor from
// the memory kind of the call's buffers (host: the caller's thread and the SIMD kernels of
// src/quant and src/exec/reduce_kernels; CUDA: the kernels of cuda/ on the call's stream).
//
// Semantics of every operation are those of the functions they wrap (exec/reduce_kernels.h,
// quant/quant.h); every executor produces the same bytes for the same inputs. Ordering: the
// operations of one executor run in issue order. An executor may run them asynchronously
// (CUDA); flush() returns once everything issued so far is done. Before a send or a receive is
// posted (core/progress.h postSend/postRecv with the executor), either the device transport's
// copies wait for a fence of the executor's work (fence()), or the executor is flushed, so a
// transport never reads a buffer an operation is still writing, nor writes one an operation is
// still reading.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/device_fence.h"
#include "base/result.h"
#include "exec/device_component.h"
#include "exec/wait_words.h"
#include "quant/quant.h"
#include "zcoll/zcoll.h"

namespace zcoll {

// Memory of one kind, as UCC's memory components (mc) give it: scratch for the algorithms
// (`alloc`: device memory for CUDA). The pinned host memory device bytes travel through belongs
// to the device transports (transport/device_ipc.h). One static object per kind, so memory can
// outlive the executor that asked for it. alloc returns 64-byte aligned memory or an error with
// a message. For device memory, alloc and release run inside calls whose callers' streams wait
// for them, so they must not synchronize the device implicitly (CUDA: stream-ordered allocation,
// never cudaMalloc/cudaFree; base/stream_holds.h).
struct MemoryOps {
  const char* name;
  Result (*alloc)(size_t bytes, void** out);
  void (*release)(void* p);
  // release() is not ordered after work still queued on a call's stream (CUDA: a free in stream
  // order on another stream): a region outgrown during a call is kept until its owner goes
  // (exec/scratch.h), when no call runs.
  bool deferRelease = false;
};

// Aligned host memory (the host executor's MemoryOps).
const MemoryOps& hostMemory();

// How long flush() may wait, and what stops it (Executor::limitWaits).
struct WaitLimits {
  const std::atomic<bool>* stop = nullptr;
  int timeoutMs = 0;
  std::atomic<bool>* abandoned = nullptr;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual const char* name() const = 0;
  // The memory kind every pointer given to this executor must have.
  virtual MemKind memKind() const = 0;
  // Where this executor's scratch and staging memory come from.
  virtual const MemoryOps& memory() const = 0;

  // dst[0, bytes) = src[0, bytes). dst == src is a no-op; otherwise they must not overlap.
  virtual Result copy(void* dst, const void* src, size_t bytes) = 0;

  // Reductions in the accumulator type (reduce_kernels.h: toAcc, accumulate, combineInto,
  // fromAcc).
  virtual Result toAcc(void* acc, const void* in, zcollDataType_t dtype, size_t n) = 0;
  virtual Result accumulate(void* acc, const void* in, bool inIsAcc, zcollDataType_t dtype,
                            zcollRedOp_t op, size_t n) = 0;
  virtual Result combine(void* out, const void* a, const void* b, zcollDataType_t dtype,
                         zcollRedOp_t op, int avgDivisor, size_t n) = 0;
  virtual Result fromAcc(void* out, const void* acc, zcollDataType_t dtype, zcollRedOp_t op,
                         int nranks, size_t n) = 0;

  // dst[i] = src[i] * scalar for i < n (reduce_math.h scaleElement: in the accumulator type,
  // rounded once), dst == src allowed: NCCL's PreMulSum (zcollScale). `scalar` is one element of
  // dtype: in host memory, read before the call returns, or with scalarOnDevice in memory of
  // this executor's kind, read when the operation runs.
  virtual Result scale(void* dst, const void* src, zcollDataType_t dtype, size_t n,
                       const void* scalar, bool scalarOnDevice) = 0;

  // Block quantization (quant/quant.h). Arrays of chunk pointers and destOrder are host memory,
  // read before the call returns.
  virtual Result quantize(const void* in, zcollDataType_t dtype, size_t n,
                          const quant::QuantParams& p, void* out) = 0;
  virtual Result quantizeChunks(const void* in, zcollDataType_t dtype, size_t chunkElems,
                                size_t nChunks, const int* destOrder, const quant::QuantParams& p,
                                void* out) = 0;
  virtual Result dequantize(const void* q, size_t n, const quant::QuantParams& p, void* out,
                            zcollDataType_t dtype) = 0;
  virtual Result dequantizeSum(const void* const* chunks, int k, size_t n,
                               const quant::QuantParams& p, float scale, void* out,
                               zcollDataType_t dtype) = 0;
  virtual Result dequantReduceRequant(const void* const* chunks, int k, size_t n,
                                      const quant::QuantParams& in,
                                      const quant::QuantParams& out, void* outQ) = 0;

  // Returns once every operation issued so far has completed.
  virtual Result flush() = 0;
  // A fence after every operation issued so far (base/device_fence.h; CUDA: an event recorded on
  // the stream), for a device transport's copies to wait for instead of flush(). Null when there
  // is nothing to wait for (the host executor: its operations are done when they return).
  virtual Result fence(std::shared_ptr<DeviceFence>* out) {
    out->reset();
    return zcollSuccess;
  }

  // Stream ordering, for calls that return once enqueued (api/launch.h). Device executors
  // implement them; the host executor, whose operations are done when they return, refuses.
  //
  // An executor of this kind on a stream of its own, whose operations start only after every
  // operation issued on this one so far (CUDA: an event recorded here, waited for there). The
  // engine's progress thread runs the call's work on it while the caller's stream waits (waitValue).
  virtual Result makeSideExecutor(std::unique_ptr<Executor>* out);
  // Operations issued on this executor after this call start only once
  // (int32_t)(*word - value) >= 0, a cyclic greater-or-equal (CUDA: cuStreamWaitValue32 with
  // CU_STREAM_WAIT_VALUE_GEQ on a word of exec/wait_words.h). The host releases it by storing
  // `value` (or a later one) into *word. Such a wait must never be queued in front of work it
  // waits for that is not yet submitted on a queue it may share (src/README.md).
  virtual Result waitValue(const uint32_t* word, uint32_t value);
  // Operations issued on this executor after this call start only once (*word & mask) != 0
  // (CUDA: cuStreamWaitValue32 with CU_STREAM_WAIT_VALUE_AND). The flags of the stream-triggered
  // calls (src/trigger/ring.h) are handshakes whose values never grow, so a call captured into a
  // CUDA graph waits for the same values at every replay; one stored value with every bit set
  // releases a wait for any mask (an abort). The same rule as waitValue's holds.
  virtual Result waitBits(const uint32_t* word, uint32_t mask);
  // Operations issued on this executor after this call start only once the stream that queued
  // `mark` (Executor::markStream, on any executor of this device) got past it (CUDA:
  // cudaStreamWaitEvent on the mark's event): work already submitted, so no wait on later work.
  virtual Result waitMark(StreamMark& mark);
  // Stores `value` into *word once every operation issued on this executor before it is done,
  // with a memory fence first, so whoever sees the value sees their writes (CUDA:
  // cuStreamWriteValue32, default flags). *word is host memory the device reaches (registered or
  // mapped, DeviceComponent::registerHostMemory): another rank's stream waits on it (waitValue),
  // the pair's half of a flag that only GPU work and the host set (src/trigger).
  virtual Result writeValue(uint32_t* word, uint32_t value);
  // Memory of this executor's kind in its stream's order (CUDA: cudaMallocAsync/cudaFreeAsync on
  // the stream, no implicit device synchronization): usable by operations issued on this stream
  // after allocOnStream, given back once the stream has run everything issued before
  // freeOnStream (zcollMemAllocAsync). Device executors implement them; the host refuses.
  virtual Result allocOnStream(size_t bytes, void** out);
  virtual Result freeOnStream(void* p);
  // A mark queued on this executor's stream now (CUDA: an event recorded): passed() once the
  // stream got past it, so past every wait queued before it (exec/wait_words.h). On a stream
  // being captured the mark is a node of the graph (CUDA: cudaEventRecordExternal): passed()
  // once the graph's latest launch got past it, and while it was never launched. Waiting for
  // such a mark (waitMark) is not allowed.
  virtual Result markStream(std::shared_ptr<StreamMark>* out);
  // The identity of this executor's stream when threads of the process may share it (CUDA:
  // every stream but cudaStreamPerThread; the legacy default stream is 0). Ranks of one process
  // must not share a stream (zcoll.h); api/launch.cc refuses a call that would.
  virtual bool sharedStreamKey(uintptr_t* key) const {
    (void)key;
    return false;
  }
  // Makes this executor usable from the calling thread (CUDA: its device becomes the thread's
  // current one, so scratch is allocated and kernels launch there). The progress thread calls
  // it before running a call's work.
  virtual Result bindThread() { return zcollSuccess; }
  // The device this executor works on (its ordinal in this process), -1 for the host.
  virtual int device() const { return -1; }
  // Whether this executor's stream is being captured into a graph (CUDA: cudaStreamIsCapturing,
  // which is legal on a capturing stream and records nothing on it). Only stream-triggered calls
  // (src/trigger) can be captured: the entry point (api/launch.h, checkDeviceCall) refuses the
  // others before it touches the stream. The host executor, which has no stream, never is.
  virtual Result isCapturing(bool* capturing) {
    *capturing = false;
    return zcollSuccess;
  }
  // Bounds flush(): it gives up once *limits.stop is set (the communicator is being aborted), or
  // after limits.timeoutMs, instead of waiting for a device that may never finish (a stream
  // behind work that never ends), leaving the work queued and setting *limits.abandoned: what
  // that work uses must then never be freed (core/init.cc destroyComm). Unset: unbounded.
  virtual void limitWaits(const WaitLimits& limits) { (void)limits; }
};

// The host executor: synchronous, on the calling thread, stateless (one shared instance).
Executor& hostExecutor();

// The executor for a call whose buffers are of `kind`, on `device` (device kinds: the ordinal that
// holds them), work ordered on `stream`.
// Host: hostExecutor(). Device: the device component's executor (exec/device_component.h: CUDA's when
// CUDA support is built and a device is present), else zcollUnsupported with a message saying
// which is missing.
Result makeExecutor(MemKind kind, zcollStream_t stream, int device,
                    std::unique_ptr<Executor>* owned, Executor** out);

// One line for zcoll_info: the executors this build and machine offer ("host, cuda (2 devices)",
// "host; cuda: built, no device (cudaErrorNoDevice)", "host; cuda: not built").
std::string executorSummary();

}  // namespace zcoll
