// zcoll as a c10d::Backend: every operation joins one queue per process group and runs in
// submission order (zcoll host calls block and a communicator serves one thread at a time), on
// the group's worker thread, or on the thread that waits for it when nothing runs before it.
// Only the public C API (include/zcoll/zcoll.h) is used.
//
// CUDA tensors (built with ZCOLL_TORCH_CUDA), as ProcessGroupNCCL does it: the operation is
// enqueued on the group's own stream of the tensors' device, which first waits for what the
// caller's current stream held at submission; zcoll returns once enqueued there, so the Work
// completes on the host at once and Work.wait() makes the caller's current stream wait for the
// operation's end. The tensors are recorded on that stream for the caching allocator.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/python.h>
#include <torch/csrc/utils/pybind.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#ifdef ZCOLL_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "zcoll/zcoll.h"

namespace zcoll_torch {

using c10d::OpType;
using c10d::Work;

// zcoll's message about the call that failed: the communicator's, else the calling thread's
// (where calls without a communicator, zcollCommInit* and zcollGetUniqueId included, leave it).
std::string lastError(zcollComm_t comm) {
  const char* message = comm ? zcollGetLastError(comm) : nullptr;
  if (message == nullptr || *message == '\0') message = zcollGetLastError(nullptr);
  if (message == nullptr || *message == '\0') return "(zcoll gave no message)";
  return message;
}

[[noreturn]] void throwZcoll(zcollResult_t rc, zcollComm_t comm, const char* what) {
  TORCH_CHECK_WITH(DistBackendError, false, "zcoll ", what, " failed: ", zcollGetErrorString(rc),
                   " (", static_cast<int>(rc), "): ", lastError(comm));
}

zcollDataType_t toZcollType(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kChar: return zcollInt8;
    case at::kByte: return zcollUint8;
    case at::kBool: return zcollUint8;  // bytes, exact for gathers/broadcast; reductions rejected
    case at::kInt: return zcollInt32;
    case at::kLong: return zcollInt64;
    case at::kHalf: return zcollFloat16;
    case at::kFloat: return zcollFloat32;
    case at::kDouble: return zcollFloat64;
    case at::kBFloat16: return zcollBfloat16;
    default:
      TORCH_CHECK(false, "zcoll: unsupported dtype ", t.scalar_type(),
                  " (supported: int8, uint8, bool (no reductions), int32, int64, float16, "
                  "float32, float64, bfloat16)");
  }
}

zcollRedOp_t toZcollOp(const c10d::ReduceOp& op, const at::Tensor& t) {
  TORCH_CHECK(t.scalar_type() != at::kBool, "zcoll: reductions on bool tensors are not supported");
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return zcollSum;
    case c10d::ReduceOp::PRODUCT: return zcollProd;
    case c10d::ReduceOp::MIN: return zcollMin;
    case c10d::ReduceOp::MAX: return zcollMax;
    case c10d::ReduceOp::AVG: return zcollAvg;
    default: TORCH_CHECK(false, "zcoll: unsupported ReduceOp (supported: SUM, AVG, PRODUCT, MIN, MAX)");
  }
}

bool zcollTakesDeviceBuffers() {
  static const bool supported = [] {
    int s = 0;
    return zcollGetDeviceSupport(&s) == zcollSuccess && s == 1;
  }();
  return supported;
}

void checkCudaTensor(const at::Tensor& t) {
#ifdef ZCOLL_TORCH_CUDA
  TORCH_CHECK(zcollTakesDeviceBuffers(), "zcoll: got a tensor on ", t.device(),
              ", but the libzcoll in this process takes no device buffers (built without CUDA, or "
              "no CUDA device visible to it: see zcoll_info)");
#else
  TORCH_CHECK(false, "zcoll: got a tensor on ", t.device(),
              ", but this build of zcoll's torch backend has no CUDA support (torch without CUDA, "
              "or no CUDA toolkit when it was built: reinstall with pip install ./python)");
#endif
}

void checkTensor(const at::Tensor& t) {
  TORCH_CHECK(t.device().is_cpu() || t.device().is_cuda(),
              "zcoll: tensors must be on the CPU or a CUDA device (got ", t.device(), ")");
  if (t.device().is_cuda()) checkCudaTensor(t);
  TORCH_CHECK(!t.is_sparse(), "zcoll: sparse tensors are not supported");
  toZcollType(t);
}

// The one device of an operation's tensors (CPU when it has none, like a barrier).
c10::Device deviceOf(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  std::optional<c10::Device> device;
  for (const auto* list : {&a, &b}) {
    for (const auto& t : *list) {
      if (!t.defined()) continue;
      if (!device) device = t.device();
      TORCH_CHECK(t.device() == *device, "zcoll: the tensors of one operation must be on one "
                  "device (got ", *device, " and ", t.device(), ")");
    }
  }
  return device.value_or(c10::Device(c10::kCPU));
}

// What a job is given: the communicator, and the stream its zcoll calls go on (NULL for CPU
// tensors).
struct Ctx {
  zcollComm_t comm;
  zcollStream_t stream;
};

using Job = std::function<void(const Ctx&)>;

// One unit of work: run posts it (and, outside a zcoll group, completes it); finish (may be
// empty) copies results back once it has completed.
struct Step {
  Job run;
  std::function<void()> finish;
  bool p2p;
};

#ifdef ZCOLL_TORCH_CUDA
// Where a CUDA operation runs: the group's stream on the tensors' device, after `submitted`
// (recorded on the caller's current stream when the operation was issued); `done` is recorded
// on it once the operation is enqueued there.
struct CudaPlace {
  c10::cuda::CUDAStream stream;
  std::shared_ptr<at::cuda::CUDAEvent> submitted, done;
};

// The step run on the place's stream: the job's zcoll calls, and any tensor work of the job
// (contiguous copies, concatenations, copies back), all go on it.
Step onCudaStream(Step step, const CudaPlace& place) {
  Step s;
  s.p2p = step.p2p;
  s.run = [job = std::move(step.run), place](const Ctx& c) {
    c10::cuda::CUDAStreamGuard guard(place.stream);
    place.submitted->block(place.stream);
    job(Ctx{c.comm, reinterpret_cast<zcollStream_t>(place.stream.stream())});
  };
  // A batch of point-to-point steps is enqueued by zcollGroupEnd, after every run: the end is
  // marked in finish.
  s.finish = [finish = std::move(step.finish), place] {
    c10::cuda::CUDAStreamGuard guard(place.stream);
    if (finish) finish();
    place.done->record(place.stream);
  };
  return s;
}
#endif

class ZcollWork;

// A process group's operations, in submission order. The worker thread runs them, except that
// a thread waiting on the operation at the front while nothing runs takes it and runs it
// itself: a synchronous call then costs no hand-off to the worker and back (two cross-thread
// wake-ups, tens of microseconds each). Once an operation fails with the communicator broken,
// every later one fails with that error instead of hanging.
class OpQueue {
 public:
  explicit OpQueue(zcollComm_t comm) : comm_(comm) {}
  void push(c10::intrusive_ptr<ZcollWork> work, Step step);
  // Runs `work` on this thread if it is next and nothing runs; false otherwise.
  bool runIfNext(const ZcollWork* work);
  // The worker thread: runs operations until stop() and the queue is empty.
  void serve();
  void stop();

 private:
  using Item = std::pair<c10::intrusive_ptr<ZcollWork>, Step>;
  void run(Item item);  // called by the one thread that set busy_

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  bool busy_ = false;
  bool stop_ = false;
  std::exception_ptr broken_;  // only the running thread reads or writes it
  zcollComm_t comm_;
};

// The result of one operation, also exposed as a c10::ivalue::Future.
// Releases the GIL only if this thread holds it (torch's bindings often released it already).
class MaybeReleaseGil {
 public:
  MaybeReleaseGil() {
    if (Py_IsInitialized() && PyGILState_Check()) release_.emplace();
  }

 private:
  std::optional<pybind11::gil_scoped_release> release_;
};

class ZcollWork : public Work {
 public:
  ZcollWork(int rank, OpType type, std::vector<at::Tensor> outputs)
      : Work(rank, type), outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {}

  // For CUDA operations: enqueued on their stream and finished there.
  bool isCompleted() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!done_) return false;
      if (error_) return true;
    }
#ifdef ZCOLL_TORCH_CUDA
    for (const auto& place : places_) {
      if (!place.done->query()) return false;
    }
#endif
    return true;
  }
  bool isSuccess() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_ && !error_;
  }
  std::exception_ptr exception() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  // Before the work is queued only (a coalesced batch collecting its operations).
  void addOutputs(const std::vector<at::Tensor>& more) {
    outputs_.insert(outputs_.end(), more.begin(), more.end());
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

#ifdef ZCOLL_TORCH_CUDA
  // Before the work is queued only: one CUDA operation of it (a batch may hold several). Its
  // future then completes on that device's stream (c10's CUDA-aware future records events).
  void addCudaPlace(const CudaPlace& place) {
    places_.push_back(place);
    c10::Device device = place.stream.device();
    if (std::find(devices_.begin(), devices_.end(), device) != devices_.end()) return;
    devices_.push_back(device);
    future_ = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()), devices_);
  }
#endif

  // Orders later work after this one: waits until it has run on the host (CPU tensors) or has
  // been enqueued (CUDA tensors; the caller's current stream then waits for its end).
  void synchronize() override { wait(kNoTimeout); }

  // The queue the work joined (a work may outlive its process group).
  void attach(std::weak_ptr<OpQueue> queue) { queue_ = std::move(queue); }

  // Without a timeout, runs the operation on this thread when it is next (zcoll's own timeout
  // bounds it then). With one, leaves it to the worker and waits at most `timeout`, whichever
  // thread would otherwise have run it: every rank honours the timeout alike. A wait that
  // times out cancels nothing: the operation still runs in its turn.
  bool wait(std::chrono::milliseconds timeout) override {
    std::exception_ptr error;
    {
      MaybeReleaseGil noGil;
      if (timeout == kNoTimeout) {
        if (auto queue = queue_.lock()) queue->runIfNext(this);
      }
      std::unique_lock<std::mutex> lock(mu_);
      if (timeout == kNoTimeout) {
        cv_.wait(lock, [&] { return done_; });
      } else if (!cv_.wait_for(lock, timeout, [&] { return done_; })) {
        TORCH_CHECK_WITH(DistBackendError, false, "zcoll: Work.wait timed out after ",
                         timeout.count(), " ms (the operation is not cancelled: it still runs "
                         "in its turn; wait() without a timeout waits for its end)");
      }
      error = error_;
    }
    if (error) std::rethrow_exception(error);
#ifdef ZCOLL_TORCH_CUDA
    for (const auto& place : places_)
      place.done->block(at::cuda::getCurrentCUDAStream(place.stream.device_index()));
#endif
    return true;
  }

  void finish(std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      error_ = error;
    }
    cv_.notify_all();
#ifdef ZCOLL_TORCH_CUDA
    // The future's events go on the operation's stream, after its end.
    std::optional<c10::cuda::CUDAStreamGuard> onStream;
    if (!places_.empty()) onStream.emplace(places_.front().stream);
#endif
    if (error) {
      future_->setError(error);
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
  }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::weak_ptr<OpQueue> queue_;
#ifdef ZCOLL_TORCH_CUDA
  std::vector<CudaPlace> places_;
  std::vector<c10::Device> devices_;
#endif
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

void OpQueue::push(c10::intrusive_ptr<ZcollWork> work, Step step) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    items_.emplace_back(std::move(work), std::move(step));
  }
  cv_.notify_all();
}

bool OpQueue::runIfNext(const ZcollWork* work) {
  Item item;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (busy_ || items_.empty() || items_.front().first.get() != work) return false;
    item = std::move(items_.front());
    items_.pop_front();
    busy_ = true;
  }
  run(std::move(item));
  return true;
}

void OpQueue::serve() {
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return (stop_ && !busy_) || (!busy_ && !items_.empty()); });
      if (items_.empty()) return;
      item = std::move(items_.front());
      items_.pop_front();
      busy_ = true;
    }
    run(std::move(item));
  }
}

void OpQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

void OpQueue::run(Item item) {
  std::exception_ptr error = broken_;
  if (!error) {
    try {
      item.second.run(Ctx{comm_, nullptr});
      if (item.second.finish) item.second.finish();
    } catch (...) {
      error = std::current_exception();
      zcollResult_t async = zcollSuccess;
      if (zcollCommGetAsyncError(comm_, &async) == zcollSuccess && async != zcollSuccess)
        broken_ = error;
    }
  }
  item.second = Step{};  // drop the tensors the step holds before the work completes
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
  }
  cv_.notify_all();  // the worker may take the next one
  item.first->finish(error);
}

class ZcollBackend : public c10d::Backend {
 public:
  ZcollBackend(const std::string& uniqueId, int rank, int size, int timeoutSec)
      : Backend(rank, size) {
    TORCH_CHECK(uniqueId.size() == ZCOLL_UNIQUE_ID_BYTES, "zcoll: bad unique id size");
    zcollUniqueId id;
    std::memcpy(id.internal, uniqueId.data(), ZCOLL_UNIQUE_ID_BYTES);
    zcollConfig_t config = ZCOLL_CONFIG_INITIALIZER;
    config.timeoutSec = timeoutSec;
    config.commName = "torch";
    zcollResult_t rc;
    {
      MaybeReleaseGil noGil;
      rc = zcollCommInitRankConfig(&comm_, size, id, rank, &config);
    }
    if (rc != zcollSuccess) throwZcoll(rc, nullptr, "zcollCommInitRankConfig");
    check(zcollCommNodeCount(comm_, &nodes_), comm_, "zcollCommNodeCount");
    queue_ = std::make_shared<OpQueue>(comm_);
    worker_ = std::thread([queue = queue_] {
      pthread_setname_np(pthread_self(), "zcoll-torch");  // as top and perf show it
      queue->serve();
    });
  }

  ~ZcollBackend() override {
    queue_->stop();
    // destroy_process_group runs this with the GIL held, and the worker may need the GIL to
    // release the last reference of a Python-owned tensor: join (and destroy) without it.
    MaybeReleaseGil noGil;
    if (worker_.joinable()) worker_.join();
    if (comm_) zcollCommDestroy(comm_);
  }

  const std::string getBackendName() const override { return "zcoll"; }
  bool supportsCoalescing() const override { return true; }

  // The number of collectives issued on this group so far (point to point excluded, as
  // ProcessGroupNCCL's collective sequence number): equal on every rank while they agree.
  // TORCH_DISTRIBUTED_DEBUG=DETAIL's ProcessGroupWrapper compares it across ranks before each
  // collective. It starts at 0 on every rank, so torch's setSequenceNumberForGroup (a no-op)
  // is kept.
  uint64_t getSequenceNumberForGroup() override { return seq_.load(); }

  c10::intrusive_ptr<Work> broadcast(std::vector<at::Tensor>& tensors,
                                     const c10d::BroadcastOptions& opts) override {
    at::Tensor t = single(tensors);
    int root = static_cast<int>(opts.rootRank);
    return enqueue(OpType::BROADCAST, {t}, {}, [=](const Ctx& c) {
      at::Tensor buf = t.contiguous();
      check(zcollBroadcast(buf.data_ptr(), buf.data_ptr(), buf.numel(), toZcollType(buf), root,
                           c.comm, c.stream),
            c.comm, "zcollBroadcast");
      copyBack(t, buf);
    });
  }

  c10::intrusive_ptr<Work> allreduce(std::vector<at::Tensor>& tensors,
                                     const c10d::AllreduceOptions& opts) override {
    at::Tensor t = single(tensors);
    zcollRedOp_t op = toZcollOp(opts.reduceOp, t);
    return enqueue(OpType::ALLREDUCE, {t}, {}, [=](const Ctx& c) {
      at::Tensor buf = t.contiguous();
      check(zcollAllReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), toZcollType(buf), op,
                           c.comm, c.stream),
            c.comm, "zcollAllReduce");
      copyBack(t, buf);
    });
  }

  c10::intrusive_ptr<Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                               const c10d::AllreduceCoalescedOptions& opts) override {
    for (auto& t : tensors) checkTensor(t);
    std::vector<at::Tensor> ts = tensors;
    zcollRedOp_t op = ts.empty() ? zcollSum : toZcollOp(opts.reduceOp, ts[0]);
    bool oneType = std::all_of(ts.begin(), ts.end(), [&](const at::Tensor& t) {
      return t.scalar_type() == ts[0].scalar_type();
    });
    return enqueue(OpType::ALLREDUCE_COALESCED, ts, {}, [=](const Ctx& c) {
      if (oneType && ts.size() > 1) {  // one call over the concatenation: one latency, not n
        std::vector<at::Tensor> flat;
        for (const auto& t : ts) flat.push_back(t.reshape({-1}));
        at::Tensor buf = at::cat(flat);
        check(zcollAllReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), toZcollType(buf), op,
                             c.comm, c.stream),
              c.comm, "zcollAllReduce");
        int64_t off = 0;
        for (const auto& t : ts) {
          t.copy_(buf.narrow(0, off, t.numel()).view(t.sizes()));
          off += t.numel();
        }
        return;
      }
      for (const auto& t : ts) {
        at::Tensor buf = t.contiguous();
        check(zcollAllReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), toZcollType(buf), op,
                             c.comm, c.stream),
              c.comm, "zcollAllReduce");
        copyBack(t, buf);
      }
    });
  }

  c10::intrusive_ptr<Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions&) override {
    TORCH_CHECK(outputs.size() == inputs.size(),
                "zcoll: all_gather_into_tensor_coalesced needs as many outputs as inputs");
    for (size_t i = 0; i < inputs.size(); ++i) checkGatherShapes(outputs[i], inputs[i], "all_gather_into_tensor");
    std::vector<at::Tensor> outs = outputs, ins = inputs;
    return enqueue(OpType::COALESCED, outs, ins, [=](const Ctx& c) {
      for (size_t i = 0; i < ins.size(); ++i) {
        at::Tensor src = ins[i].contiguous();
        at::Tensor dst = outs[i].contiguous();
        check(zcollAllGather(src.data_ptr(), dst.data_ptr(), src.numel(), toZcollType(src), c.comm,
                             c.stream),
              c.comm, "zcollAllGather");
        copyBack(outs[i], dst);
      }
    });
  }

  c10::intrusive_ptr<Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override {
    TORCH_CHECK(outputs.size() == inputs.size(),
                "zcoll: reduce_scatter_tensor_coalesced needs as many outputs as inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      checkTensor(outputs[i]);
      checkTensor(inputs[i]);
      TORCH_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type() &&
                      inputs[i].numel() == outputs[i].numel() * size_,
                  "zcoll: reduce_scatter_tensor_coalesced: input ", i,
                  " must have the output's dtype and world_size * its elements");
    }
    std::vector<at::Tensor> outs = outputs, ins = inputs;
    std::vector<zcollRedOp_t> ops;
    for (const auto& in : ins) ops.push_back(toZcollOp(opts.reduceOp, in));
    return enqueue(OpType::COALESCED, outs, ins, [=](const Ctx& c) {
      for (size_t i = 0; i < ins.size(); ++i) {
        at::Tensor src = ins[i].contiguous();
        at::Tensor dst = outs[i].contiguous();
        check(zcollReduceScatter(src.data_ptr(), dst.data_ptr(), dst.numel(), toZcollType(src),
                                 ops[i], c.comm, c.stream),
              c.comm, "zcollReduceScatter");
        copyBack(outs[i], dst);
      }
    });
  }

  c10::intrusive_ptr<Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                           const c10d::AllgatherOptions&) override {
    checkTensor(output);
    checkTensor(input);
    TORCH_CHECK(output.scalar_type() == input.scalar_type(),
                "zcoll: all_gather_into_tensor output and input dtypes differ");
    TORCH_CHECK(output.numel() == input.numel() * size_,
                "zcoll: all_gather_into_tensor output must have world_size * input.numel() "
                "elements (got ", output.numel(), " vs ", input.numel(), " * ", size_, ")");
    at::Tensor out = output, in = input;
    return enqueue(OpType::_ALLGATHER_BASE, {out}, {in}, [=](const Ctx& c) {
      at::Tensor src = in.contiguous();
      at::Tensor dst = out.contiguous();
      check(zcollAllGather(src.data_ptr(), dst.data_ptr(), src.numel(), toZcollType(src), c.comm,
                           c.stream),
            c.comm, "zcollAllGather");
      copyBack(out, dst);
    });
  }

  c10::intrusive_ptr<Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                     std::vector<at::Tensor>& inputs,
                                     const c10d::AllgatherOptions&) override {
    at::Tensor in = single(inputs);
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                "zcoll: allgather expects one list of world_size output tensors");
    std::vector<at::Tensor> outs = outputs[0];
    for (auto& o : outs) {
      checkTensor(o);
      TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                  "zcoll: allgather output tensors must match the input's size and dtype");
    }
    return enqueue(OpType::ALLGATHER, outs, {in}, [=, this](const Ctx& c) {
      at::Tensor src = in.contiguous();
      at::Tensor flat = at::empty({size_ * src.numel()}, src.options());
      check(zcollAllGather(src.data_ptr(), flat.data_ptr(), src.numel(), toZcollType(src), c.comm,
                           c.stream),
            c.comm, "zcollAllGather");
      for (int r = 0; r < size_; ++r) {
        outs[r].copy_(flat.narrow(0, r * src.numel(), src.numel()).view(outs[r].sizes()));
      }
    });
  }

  c10::intrusive_ptr<Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                const c10d::ReduceScatterOptions& opts) override {
    checkTensor(output);
    checkTensor(input);
    TORCH_CHECK(output.scalar_type() == input.scalar_type(),
                "zcoll: reduce_scatter_tensor output and input dtypes differ");
    TORCH_CHECK(input.numel() == output.numel() * size_,
                "zcoll: reduce_scatter_tensor input must have world_size * output.numel() "
                "elements (got ", input.numel(), " vs ", output.numel(), " * ", size_, ")");
    zcollRedOp_t op = toZcollOp(opts.reduceOp, input);
    at::Tensor out = output, in = input;
    return enqueue(OpType::_REDUCE_SCATTER_BASE, {out}, {in}, [=](const Ctx& c) {
      at::Tensor src = in.contiguous();
      at::Tensor dst = out.contiguous();
      check(zcollReduceScatter(src.data_ptr(), dst.data_ptr(), dst.numel(), toZcollType(src), op,
                               c.comm, c.stream),
            c.comm, "zcollReduceScatter");
      copyBack(out, dst);
    });
  }

  c10::intrusive_ptr<Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                          std::vector<std::vector<at::Tensor>>& inputs,
                                          const c10d::ReduceScatterOptions& opts) override {
    at::Tensor out = single(outputs);
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                "zcoll: reduce_scatter expects one list of world_size input tensors");
    for (auto& i : inputs[0]) {
      checkTensor(i);
      TORCH_CHECK(i.numel() == out.numel() && i.scalar_type() == out.scalar_type(),
                  "zcoll: reduce_scatter input tensors must match the output's size and dtype");
    }
    zcollRedOp_t op = toZcollOp(opts.reduceOp, out);
    std::vector<at::Tensor> ins = inputs[0];
    return enqueue(OpType::REDUCE_SCATTER, {out}, ins, [=](const Ctx& c) {
      std::vector<at::Tensor> flatIns;
      for (const auto& i : ins) flatIns.push_back(i.reshape({-1}));
      at::Tensor src = at::cat(flatIns);
      at::Tensor dst = out.contiguous();
      check(zcollReduceScatter(src.data_ptr(), dst.data_ptr(), dst.numel(), toZcollType(src), op,
                               c.comm, c.stream),
            c.comm, "zcollReduceScatter");
      copyBack(out, dst);
    });
  }

  c10::intrusive_ptr<Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                         std::vector<int64_t>& outSplits,
                                         std::vector<int64_t>& inSplits,
                                         const c10d::AllToAllOptions&) override {
    checkTensor(output);
    checkTensor(input);
    TORCH_CHECK(output.scalar_type() == input.scalar_type(),
                "zcoll: all_to_all_single output and input dtypes differ");
    at::Tensor out = output, in = input;
    if (outSplits.empty() && inSplits.empty()) {
      TORCH_CHECK(in.numel() == out.numel() && in.size(0) % size_ == 0,
                  "zcoll: all_to_all_single needs equal-size tensors whose first dimension "
                  "divides by world_size");
      return enqueue(OpType::ALLTOALL_BASE, {out}, {in}, [=, this](const Ctx& c) {
        at::Tensor src = in.contiguous();
        at::Tensor dst = out.contiguous();
        check(zcollAllToAll(src.data_ptr(), dst.data_ptr(), src.numel() / size_, toZcollType(src),
                            c.comm, c.stream),
              c.comm, "zcollAllToAll");
        copyBack(out, dst);
      });
    }
    // Uneven splits: zcollAllToAllv with per-peer counts in elements.
    std::vector<int64_t> outRows = splitsOrEqual(outSplits, out), inRows = splitsOrEqual(inSplits, in);
    int64_t outRowElems = out.dim() ? out.numel() / std::max<int64_t>(out.size(0), 1) : 1;
    int64_t inRowElems = in.dim() ? in.numel() / std::max<int64_t>(in.size(0), 1) : 1;
    std::vector<int64_t> sendElems, recvElems;
    for (int p = 0; p < size_; ++p) {
      sendElems.push_back(inRows[p] * inRowElems);
      recvElems.push_back(outRows[p] * outRowElems);
    }
    return enqueue(OpType::ALLTOALL_BASE, {out}, {in}, [=](const Ctx& c) {
      at::Tensor src = in.contiguous();
      at::Tensor dst = out.contiguous();
      allToAllv(src, sendElems, dst, recvElems, c);
      copyBack(out, dst);
    });
  }

  // all_to_all with tensor lists: tensors may differ in size per peer; one zcollAllToAllv over
  // the concatenations.
  c10::intrusive_ptr<Work> alltoall(std::vector<at::Tensor>& outputs,
                                    std::vector<at::Tensor>& inputs,
                                    const c10d::AllToAllOptions&) override {
    TORCH_CHECK(static_cast<int>(outputs.size()) == size_ &&
                    static_cast<int>(inputs.size()) == size_,
                "zcoll: all_to_all expects world_size output and world_size input tensors");
    std::vector<int64_t> sendElems, recvElems;
    for (int p = 0; p < size_; ++p) {
      checkTensor(outputs[p]);
      checkTensor(inputs[p]);
      TORCH_CHECK(outputs[p].scalar_type() == inputs[0].scalar_type() &&
                      inputs[p].scalar_type() == inputs[0].scalar_type(),
                  "zcoll: all_to_all tensors must all have one dtype");
      sendElems.push_back(inputs[p].numel());
      recvElems.push_back(outputs[p].numel());
    }
    std::vector<at::Tensor> outs = outputs, ins = inputs;
    return enqueue(OpType::ALLTOALL, outs, ins, [=, this](const Ctx& c) {
      std::vector<at::Tensor> flatIns, flatOuts;
      for (const auto& t : ins) flatIns.push_back(t.reshape({-1}));
      at::Tensor src = at::cat(flatIns);
      int64_t total = 0;
      for (auto n : recvElems) total += n;
      at::Tensor dst = at::empty({total}, src.options());
      allToAllv(src, sendElems, dst, recvElems, c);
      int64_t off = 0;
      for (int p = 0; p < size_; ++p) {
        outs[p].copy_(dst.narrow(0, off, recvElems[p]).view(outs[p].sizes()));
        off += recvElems[p];
      }
    });
  }

  c10::intrusive_ptr<Work> reduce(std::vector<at::Tensor>& tensors,
                                  const c10d::ReduceOptions& opts) override {
    at::Tensor t = single(tensors);
    zcollRedOp_t op = toZcollOp(opts.reduceOp, t);
    int root = checkRoot(opts.rootRank, "reduce");
    return enqueue(OpType::REDUCE, {t}, {}, [=, this](const Ctx& c) {
      at::Tensor buf = t.contiguous();
      check(zcollReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), toZcollType(buf), op, root,
                        c.comm, c.stream),
            c.comm, "zcollReduce");
      if (rank_ == root) copyBack(t, buf);
    });
  }

  // gather / scatter: the list exists on the root only (torch passes an empty one elsewhere).
  c10::intrusive_ptr<Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                  std::vector<at::Tensor>& inputs,
                                  const c10d::GatherOptions& opts) override {
    at::Tensor in = single(inputs);
    int root = checkRoot(opts.rootRank, "gather");
    std::vector<at::Tensor> outs = rootList(outputs, in, root, "gather", "output");
    return enqueue(OpType::GATHER, outs, {in}, [=, this](const Ctx& c) {
      at::Tensor src = in.contiguous();
      at::Tensor flat = rank_ == root ? at::empty({size_ * src.numel()}, src.options()) : at::Tensor();
      check(zcollGather(src.data_ptr(), rank_ == root ? flat.data_ptr() : nullptr, src.numel(),
                        toZcollType(src), root, c.comm, c.stream),
            c.comm, "zcollGather");
      for (size_t r = 0; r < outs.size(); ++r)
        outs[r].copy_(flat.narrow(0, r * src.numel(), src.numel()).view(outs[r].sizes()));
    });
  }

  c10::intrusive_ptr<Work> scatter(std::vector<at::Tensor>& outputs,
                                   std::vector<std::vector<at::Tensor>>& inputs,
                                   const c10d::ScatterOptions& opts) override {
    at::Tensor out = single(outputs);
    int root = checkRoot(opts.rootRank, "scatter");
    std::vector<at::Tensor> ins = rootList(inputs, out, root, "scatter", "input");
    return enqueue(OpType::SCATTER, {out}, ins, [=](const Ctx& c) {
      at::Tensor src;
      if (!ins.empty()) {
        std::vector<at::Tensor> flat;
        for (const auto& t : ins) flat.push_back(t.reshape({-1}));
        src = at::cat(flat);
      }
      at::Tensor dst = out.contiguous();
      check(zcollScatter(src.defined() ? src.data_ptr() : nullptr, dst.data_ptr(), dst.numel(),
                         toZcollType(dst), root, c.comm, c.stream),
            c.comm, "zcollScatter");
      copyBack(out, dst);
    });
  }

  c10::intrusive_ptr<Work> barrier(const c10d::BarrierOptions&) override {
    return enqueue(OpType::BARRIER, {}, {}, [](const Ctx& c) {
      check(zcollBarrier(c.comm, c.stream), c.comm, "zcollBarrier");
    });
  }

  // Point to point: the contiguous buffer is made at call time, so a send snapshots its data
  // and a recv can be copied back after a batch (startCoalescing / batch_isend_irecv) completes.
  c10::intrusive_ptr<Work> send(std::vector<at::Tensor>& tensors, int dst, int) override {
    at::Tensor t = single(tensors);
    at::Tensor buf = t.contiguous();
    return enqueueP2P(
        OpType::SEND, {t}, {buf},
        [=](const Ctx& c) {
          check(zcollSend(buf.data_ptr(), buf.numel(), toZcollType(buf), dst, c.comm, c.stream),
                c.comm, "zcollSend");
        },
        nullptr);
  }

  c10::intrusive_ptr<Work> recv(std::vector<at::Tensor>& tensors, int src, int) override {
    at::Tensor t = single(tensors);
    at::Tensor buf = t.is_contiguous() ? t : at::empty_like(t, at::MemoryFormat::Contiguous);
    return enqueueP2P(
        OpType::RECV, {t}, {buf},
        [=](const Ctx& c) {
          check(zcollRecv(buf.data_ptr(), buf.numel(), toZcollType(buf), src, c.comm, c.stream),
                c.comm, "zcollRecv");
        },
        [=] { copyBack(t, buf); });
  }

  // Coalescing (torch's _coalescing_manager with a device, batch_isend_irecv): operations issued
  // between start and end are collected and run as one job at end, point-to-point ones
  // concurrently in one zcoll group (a ring of blocking sends cannot deadlock); every call in
  // the batch returns the batch's Work.
  void startCoalescing() override {
    std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK(!batch_, "zcoll: startCoalescing called twice without endCoalescing");
    batch_.emplace();
    batch_->work = c10::make_intrusive<ZcollWork>(rank_, OpType::COALESCED, std::vector<at::Tensor>{});
  }

  c10::intrusive_ptr<Work> endCoalescing() override {
    Batch batch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      TORCH_CHECK(batch_, "zcoll: endCoalescing without startCoalescing");
      batch = std::move(*batch_);
      batch_.reset();
    }
    auto steps = std::make_shared<std::vector<Step>>(std::move(batch.steps));
    push(batch.work, Step{[steps](const Ctx& c) { runBatch(*steps, c); }, nullptr, false});
    return batch.work;
  }

  c10::intrusive_ptr<Work> recvAnysource(std::vector<at::Tensor>&, int) override {
    TORCH_CHECK(false, "zcoll: recv from any source is not supported (zcoll matches point-to-"
                       "point operations per (sender, receiver) pair); pass src");
  }

  // ---- ZeRO++ collectives (python/zcoll/zeropp.py and the torch.ops.zcoll ops) ----------
  int nodeCount() const { return nodes_; }

  c10::intrusive_ptr<Work> quantizedAllGather(at::Tensor output, at::Tensor input,
                                              zcollQuantConfig_t quant) {
    checkGatherShapes(output, input, "quantized_all_gather");
    return enqueue(OpType::_ALLGATHER_BASE, {output}, {input}, [=](const Ctx& c) {
      at::Tensor src = input.contiguous();
      at::Tensor dst = output.contiguous();
      check(zcollQuantizedAllGather(src.data_ptr(), dst.data_ptr(), src.numel(), toZcollType(src),
                                    &quant, c.comm, c.stream),
            c.comm, "zcollQuantizedAllGather");
      copyBack(output, dst);
    });
  }

  // secondary: nodes * input.numel() elements, or undefined when the caller does not keep it.
  c10::intrusive_ptr<Work> allGatherHier(at::Tensor output, at::Tensor input,
                                         std::optional<at::Tensor> secondary,
                                         std::optional<zcollQuantConfig_t> quant) {
    checkGatherShapes(output, input, "all_gather_hier");
    std::vector<at::Tensor> outs = {output};
    if (secondary) {
      checkSecondary(*secondary, input, "all_gather_hier");
      outs.push_back(*secondary);
    }
    return enqueue(OpType::_ALLGATHER_BASE, outs, {input}, [=](const Ctx& c) {
      at::Tensor src = input.contiguous();
      at::Tensor dst = output.contiguous();
      at::Tensor sec = secondary ? secondary->contiguous() : at::Tensor();
      check(zcollAllGatherHier(src.data_ptr(), dst.data_ptr(),
                               sec.defined() ? sec.data_ptr() : nullptr, src.numel(),
                               toZcollType(src), quant ? &*quant : nullptr, c.comm, c.stream),
            c.comm, "zcollAllGatherHier");
      copyBack(output, dst);
      if (secondary) copyBack(*secondary, sec);
    });
  }

  c10::intrusive_ptr<Work> allGatherFromSecondary(at::Tensor output, at::Tensor secondary) {
    checkTensor(output);
    checkTensor(secondary);
    TORCH_CHECK(output.scalar_type() == secondary.scalar_type(),
                "zcoll: all_gather_from_secondary output and secondary dtypes differ");
    TORCH_CHECK(secondary.numel() % nodes_ == 0 && output.numel() == secondary.numel() / nodes_ * size_,
                "zcoll: all_gather_from_secondary needs a secondary shard of nodes * n elements "
                "and an output of world_size * n (nodes ", nodes_, ", world_size ", size_,
                ", got ", secondary.numel(), " and ", output.numel(), ")");
    return enqueue(OpType::_ALLGATHER_BASE, {output}, {secondary}, [=, this](const Ctx& c) {
      at::Tensor sec = secondary.contiguous();
      at::Tensor dst = output.contiguous();
      check(zcollAllGatherFromSecondary(sec.data_ptr(), dst.data_ptr(), sec.numel() / nodes_,
                                        toZcollType(sec), c.comm, c.stream),
            c.comm, "zcollAllGatherFromSecondary");
      copyBack(output, dst);
    });
  }

  c10::intrusive_ptr<Work> quantizedReduceScatter(at::Tensor output, at::Tensor input,
                                                  const c10d::ReduceOp& reduceOp,
                                                  zcollQuantConfig_t quant) {
    checkTensor(output);
    checkTensor(input);
    TORCH_CHECK(output.scalar_type() == input.scalar_type(),
                "zcoll: quantized_reduce_scatter output and input dtypes differ");
    TORCH_CHECK(input.numel() == output.numel() * size_,
                "zcoll: quantized_reduce_scatter input must have world_size * output.numel() "
                "elements (got ", input.numel(), " vs ", output.numel(), " * ", size_, ")");
    TORCH_CHECK(reduceOp.op_ == c10d::ReduceOp::SUM || reduceOp.op_ == c10d::ReduceOp::AVG,
                "zcoll: quantized_reduce_scatter supports ReduceOp SUM and AVG");
    zcollRedOp_t op = toZcollOp(reduceOp, input);
    return enqueue(OpType::_REDUCE_SCATTER_BASE, {output}, {input}, [=](const Ctx& c) {
      at::Tensor src = input.contiguous();
      at::Tensor dst = output.contiguous();
      check(zcollQuantizedReduceScatter(src.data_ptr(), dst.data_ptr(), dst.numel(),
                                        toZcollType(src), op, &quant, c.comm, c.stream),
            c.comm, "zcollQuantizedReduceScatter");
      copyBack(output, dst);
    });
  }

 private:
  void checkGatherShapes(const at::Tensor& output, const at::Tensor& input, const char* what) {
    checkTensor(output);
    checkTensor(input);
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "zcoll: ", what,
                " output and input dtypes differ");
    TORCH_CHECK(output.numel() == input.numel() * size_, "zcoll: ", what,
                " output must have world_size * input.numel() elements (got ", output.numel(),
                " vs ", input.numel(), " * ", size_, ")");
  }

  void checkSecondary(const at::Tensor& secondary, const at::Tensor& input, const char* what) {
    checkTensor(secondary);
    TORCH_CHECK(secondary.scalar_type() == input.scalar_type(), "zcoll: ", what,
                " secondary and input dtypes differ");
    TORCH_CHECK(secondary.numel() == input.numel() * nodes_, "zcoll: ", what,
                " secondary shard must have nodes * input.numel() elements (nodes ", nodes_,
                ", got ", secondary.numel(), " vs ", input.numel(), ")");
  }

  static void check(zcollResult_t rc, zcollComm_t c, const char* what) {
    if (rc != zcollSuccess) throwZcoll(rc, c, what);
  }

  static at::Tensor single(std::vector<at::Tensor>& tensors) {
    TORCH_CHECK(tensors.size() == 1, "zcoll: expects exactly one tensor per call (got ",
                tensors.size(), ")");
    checkTensor(tensors[0]);
    return tensors[0];
  }

  static void copyBack(const at::Tensor& target, const at::Tensor& buf) {
    if (!target.is_same(buf)) target.copy_(buf);
  }

  int checkRoot(int64_t root, const char* what) const {
    TORCH_CHECK(root >= 0 && root < size_, "zcoll: ", what, " root ", root,
                " is not a rank of this group (size ", size_, ")");
    return static_cast<int>(root);
  }

  // The tensor list of a gather (outputs) or scatter (inputs): world_size tensors shaped like
  // `like` on the root, none elsewhere.
  std::vector<at::Tensor> rootList(const std::vector<std::vector<at::Tensor>>& lists,
                                   const at::Tensor& like, int root, const char* what,
                                   const char* kind) const {
    if (rank_ != root) {
      TORCH_CHECK(lists.empty() || (lists.size() == 1 && lists[0].empty()), "zcoll: ", what,
                  ": only the root (rank ", root, ") passes ", kind, " tensors");
      return {};
    }
    TORCH_CHECK(lists.size() == 1 && static_cast<int>(lists[0].size()) == size_, "zcoll: ", what,
                " expects one list of world_size ", kind, " tensors on the root");
    for (const auto& t : lists[0]) {
      checkTensor(t);
      TORCH_CHECK(t.numel() == like.numel() && t.scalar_type() == like.scalar_type(), "zcoll: ",
                  what, " ", kind, " tensors must match the other tensor's size and dtype");
    }
    return lists[0];
  }

  // zcollAllToAllv over contiguous 1-D views, counts in elements (blocks back to back).
  static void allToAllv(const at::Tensor& src, const std::vector<int64_t>& sendElems,
                        const at::Tensor& dst, const std::vector<int64_t>& recvElems,
                        const Ctx& c) {
    std::vector<size_t> sc, sd, rc, rd;
    size_t so = 0, ro = 0;
    for (size_t p = 0; p < sendElems.size(); ++p) {
      sc.push_back(sendElems[p]);
      sd.push_back(so);
      so += sendElems[p];
      rc.push_back(recvElems[p]);
      rd.push_back(ro);
      ro += recvElems[p];
    }
    check(zcollAllToAllv(src.data_ptr(), sc.data(), sd.data(), dst.data_ptr(), rc.data(), rd.data(),
                         toZcollType(src), c.comm, c.stream),
          c.comm, "zcollAllToAllv");
  }

  std::vector<int64_t> splitsOrEqual(const std::vector<int64_t>& splits, const at::Tensor& t) {
    if (!splits.empty()) {
      TORCH_CHECK(static_cast<int>(splits.size()) == size_,
                  "zcoll: all_to_all_single split sizes must have world_size entries");
      int64_t sum = 0;
      for (auto v : splits) sum += v;
      TORCH_CHECK(sum == (t.dim() ? t.size(0) : 1),
                  "zcoll: all_to_all_single split sizes must sum to the first dimension");
      return splits;
    }
    TORCH_CHECK(t.size(0) % size_ == 0,
                "zcoll: all_to_all_single without splits needs a first dimension divisible by "
                "world_size");
    return std::vector<int64_t>(size_, t.size(0) / size_);
  }

  struct Batch {
    c10::intrusive_ptr<ZcollWork> work;
    std::vector<Step> steps;
  };

  // All point to point: posted in one zcoll group (concurrently at zcollGroupEnd), then
  // finished; otherwise one after the other in submission order.
  static void runBatch(const std::vector<Step>& steps, const Ctx& c) {
    bool allP2P = std::all_of(steps.begin(), steps.end(), [](const Step& s) { return s.p2p; });
    if (allP2P && !steps.empty()) {
      check(zcollGroupStart(), c.comm, "zcollGroupStart");
      for (const auto& s : steps) s.run(c);
      check(zcollGroupEnd(), c.comm, "zcollGroupEnd");
      for (const auto& s : steps) {
        if (s.finish) s.finish();
      }
      return;
    }
    for (const auto& s : steps) {
      s.run(c);
      if (s.finish) s.finish();
    }
  }

  // `inputs`: the tensors the job reads besides `outputs` (all on one device).
  c10::intrusive_ptr<Work> enqueue(OpType type, std::vector<at::Tensor> outputs,
                                   const std::vector<at::Tensor>& inputs, Job job) {
    return enqueueStep(type, std::move(outputs), inputs, Step{std::move(job), nullptr, false});
  }

  c10::intrusive_ptr<Work> enqueueP2P(OpType type, std::vector<at::Tensor> outputs,
                                      const std::vector<at::Tensor>& inputs, Job job,
                                      std::function<void()> finish) {
    return enqueueStep(type, std::move(outputs), inputs,
                       Step{std::move(job), std::move(finish), true});
  }

  // Inside startCoalescing / endCoalescing the step joins the batch (and returns its Work).
  c10::intrusive_ptr<Work> enqueueStep(OpType type, std::vector<at::Tensor> outputs,
                                       const std::vector<at::Tensor>& inputs, Step step) {
    const bool collective = !step.p2p;
    c10::Device device = deviceOf(outputs, inputs);
#ifdef ZCOLL_TORCH_CUDA
    std::optional<CudaPlace> place;
    if (device.is_cuda()) {
      place = cudaPlace(device, outputs, inputs);
      step = onCudaStream(std::move(step), *place);
    }
#else
    (void)device;
#endif
    c10::intrusive_ptr<ZcollWork> work;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (batch_) {
        work = batch_->work;
        work->addOutputs(outputs);
        batch_->steps.push_back(std::move(step));
      }
    }
    bool batched = static_cast<bool>(work);
    if (collective) seq_.fetch_add(1);
    if (!batched) work = c10::make_intrusive<ZcollWork>(rank_, type, std::move(outputs));
#ifdef ZCOLL_TORCH_CUDA
    if (place) work->addCudaPlace(*place);
#endif
    if (!batched) push(work, std::move(step));
    return work;
  }

#ifdef ZCOLL_TORCH_CUDA
  // Marks the caller's current stream (the operation starts after it) and keeps the tensors'
  // memory from being reused before the operation is done with it on the group's stream.
  CudaPlace cudaPlace(c10::Device device, const std::vector<at::Tensor>& outputs,
                      const std::vector<at::Tensor>& inputs) {
    CudaPlace place{streamOf(device), std::make_shared<at::cuda::CUDAEvent>(),
                    std::make_shared<at::cuda::CUDAEvent>()};
    place.submitted->record(at::cuda::getCurrentCUDAStream(device.index()));
    for (const auto* list : {&outputs, &inputs}) {
      for (const auto& t : *list) {
        if (t.defined() && t.is_cuda())
          c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), place.stream);
      }
    }
    return place;
  }

  // The group's stream on `device` (one per device, from torch's pool, as ProcessGroupNCCL).
  c10::cuda::CUDAStream streamOf(c10::Device device) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(device.index());
    if (it == streams_.end())
      it = streams_.emplace(device.index(), at::cuda::getStreamFromPool(false, device.index()))
               .first;
    return it->second;
  }
#endif

  void push(c10::intrusive_ptr<ZcollWork> work, Step step) {
    work->attach(queue_);
    queue_->push(std::move(work), std::move(step));
  }

  zcollComm_t comm_ = nullptr;
  int nodes_ = 1;
  std::atomic<uint64_t> seq_{0};  // collectives issued (getSequenceNumberForGroup)
  std::mutex mu_;  // guards batch_ and streams_
  std::optional<Batch> batch_;
#ifdef ZCOLL_TORCH_CUDA
  std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams_;
#endif
  std::shared_ptr<OpQueue> queue_;
  std::thread worker_;
};

// Quantization settings from Python keyword arguments; 0 keeps zcoll's documented default.
zcollQuantConfig_t quantConfig(int bits, int intraBits, int blockSize, bool symmetric,
                               bool stochastic, uint64_t seed, int pipelineDepth) {
  zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
  q.bits = bits;
  q.intraBits = intraBits;
  q.blockSize = blockSize;
  q.mode = symmetric ? zcollQuantSymmetric : zcollQuantAsymmetric;
  q.rounding = stochastic ? zcollRoundStochastic : zcollRoundNearestEven;
  q.seed = seed;
  q.pipelineDepth = pipelineDepth;
  return q;
}

pybind11::bytes getUniqueId() {
  zcollUniqueId id;
  zcollResult_t rc = zcollGetUniqueId(&id);
  if (rc != zcollSuccess) throwZcoll(rc, nullptr, "zcollGetUniqueId");
  return pybind11::bytes(id.internal, ZCOLL_UNIQUE_ID_BYTES);
}

// A uint8 tensor of `bytes` in registered host memory (zcollMemAllocHost): node peers read it in
// place. Its storage frees the memory (zcollMemFreeHost) when the last view of it goes.
at::Tensor hostBytes(int64_t bytes) {
  TORCH_CHECK(bytes >= 0, "zcoll.empty_host: the size must not be negative, got ", bytes, " bytes");
  void* p = nullptr;
  zcollResult_t rc = zcollMemAllocHost(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1)));
  if (rc != zcollSuccess) throwZcoll(rc, nullptr, "zcollMemAllocHost");
  return at::from_blob(p, {bytes}, [](void* q) { zcollMemFreeHost(q); },
                       at::TensorOptions().dtype(at::kByte));
}

}  // namespace zcoll_torch

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace py = pybind11;
  py::module::import("torch.distributed");
  py::class_<zcoll_torch::ZcollBackend, c10d::Backend,
             c10::intrusive_ptr<zcoll_torch::ZcollBackend>>(m, "ZcollBackend")
      .def(py::init<const std::string&, int, int, int>(), py::arg("unique_id"), py::arg("rank"),
           py::arg("size"), py::arg("timeout_sec"))
      .def("node_count", &zcoll_torch::ZcollBackend::nodeCount)
      .def(
          "quantized_all_gather",
          [](zcoll_torch::ZcollBackend& b, at::Tensor out, at::Tensor in, int bits, int blockSize,
             bool symmetric, bool stochastic, uint64_t seed) {
            return b.quantizedAllGather(
                out, in, zcoll_torch::quantConfig(bits, 0, blockSize, symmetric, stochastic, seed, 0));
          },
          py::arg("output"), py::arg("input"), py::arg("bits"), py::arg("block_size"),
          py::arg("symmetric"), py::arg("stochastic"), py::arg("seed"))
      .def(
          "all_gather_hier",
          [](zcoll_torch::ZcollBackend& b, at::Tensor out, at::Tensor in,
             std::optional<at::Tensor> secondary, bool quantized, int bits, int blockSize,
             bool symmetric, bool stochastic, uint64_t seed) {
            std::optional<zcollQuantConfig_t> q;
            if (quantized) q = zcoll_torch::quantConfig(bits, 0, blockSize, symmetric, stochastic, seed, 0);
            return b.allGatherHier(out, in, secondary, q);
          },
          py::arg("output"), py::arg("input"), py::arg("secondary"), py::arg("quantized"),
          py::arg("bits"), py::arg("block_size"), py::arg("symmetric"), py::arg("stochastic"),
          py::arg("seed"))
      .def("all_gather_from_secondary", &zcoll_torch::ZcollBackend::allGatherFromSecondary,
           py::arg("output"), py::arg("secondary"))
      .def(
          "quantized_reduce_scatter",
          [](zcoll_torch::ZcollBackend& b, at::Tensor out, at::Tensor in, const c10d::ReduceOp& op,
             int bits, int intraBits, int blockSize, bool symmetric, bool stochastic, uint64_t seed,
             int pipelineDepth) {
            return b.quantizedReduceScatter(
                out, in, op,
                zcoll_torch::quantConfig(bits, intraBits, blockSize, symmetric, stochastic, seed,
                                         pipelineDepth));
          },
          py::arg("output"), py::arg("input"), py::arg("op"), py::arg("bits"),
          py::arg("intra_bits"), py::arg("block_size"), py::arg("symmetric"),
          py::arg("stochastic"), py::arg("seed"), py::arg("pipeline_depth"));
  m.def("get_unique_id", &zcoll_torch::getUniqueId);
  m.def("host_bytes", &zcoll_torch::hostBytes, py::arg("bytes"));
  // Whether CUDA tensors can be passed: this extension was built with CUDA and the libzcoll it
  // loaded recognises device buffers (a CUDA build, a device visible).
#ifdef ZCOLL_TORCH_CUDA
  m.attr("built_with_cuda") = true;
#else
  m.attr("built_with_cuda") = false;
#endif
  m.def("zcoll_takes_device_buffers", &zcoll_torch::zcollTakesDeviceBuffers);
}
