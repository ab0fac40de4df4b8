// zcoll as a c10d::Backend: every operation joins one queue per process group and runs in
// submission order (zcoll host calls block and a communicator serves one thread at a time), on
// the group's worker thread, or on the thread that waits for it when nothing runs before it.
// Only the public C API (include/zcoll/zcoll.h) is used.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/python.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "zcoll/zcoll.h"

namespace zcoll_torch {

using c10d::OpType;
using c10d::Work;

[[noreturn]] void throwZcoll(zcollResult_t rc, zcollComm_t comm, const char* what) {
  const char* last = comm ? zcollGetLastError(comm) : "";
  TORCH_CHECK_WITH(DistBackendError, false, "zcoll ", what, " failed: ", zcollGetErrorString(rc),
                   " (", static_cast<int>(rc), "): ", last ? last : "");
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

void checkTensor(const at::Tensor& t) {
  TORCH_CHECK(t.device().is_cpu(), "zcoll: tensors must be on the CPU (got ", t.device(),
              "); the torch backend does not take CUDA tensors yet");
  TORCH_CHECK(!t.is_sparse(), "zcoll: sparse tensors are not supported");
  toZcollType(t);
}

using Job = std::function<void(zcollComm_t)>;

// One unit of work: run posts it (and, outside a zcoll group, completes it); finish (may be
// empty) copies results back once it has completed.
struct Step {
  Job run;
  std::function<void()> finish;
  bool p2p;
};

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

  bool isCompleted() override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
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

  // The queue the work joined (a work may outlive its process group).
  void attach(std::weak_ptr<OpQueue> queue) { queue_ = std::move(queue); }

  // Runs the operation on this thread when it is next (zcoll's own timeout bounds it then).
  bool wait(std::chrono::milliseconds timeout) override {
    std::exception_ptr error;
    {
      MaybeReleaseGil noGil;
      if (auto queue = queue_.lock()) queue->runIfNext(this);
      std::unique_lock<std::mutex> lock(mu_);
      if (timeout == kNoTimeout) {
        cv_.wait(lock, [&] { return done_; });
      } else if (!cv_.wait_for(lock, timeout, [&] { return done_; })) {
        TORCH_CHECK_WITH(DistBackendError, false, "zcoll: Work.wait timed out after ",
                         timeout.count(), " ms");
      }
      error = error_;
    }
    if (error) std::rethrow_exception(error);
    return true;
  }

  void finish(std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      error_ = error;
    }
    cv_.notify_all();
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
      item.second.run(comm_);
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
    worker_ = std::thread([queue = queue_] { queue->serve(); });
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

  c10::intrusive_ptr<Work> broadcast(std::vector<at::Tensor>& tensors,
                                     const c10d::BroadcastOptions& opts) override {
    at::Tensor t = single(tensors);
    int root = static_cast<int>(opts.rootRank);
    return enqueue(OpType::BROADCAST, {t}, [=](zcollComm_t c) {
      at::Tensor buf = t.contiguous();
      check(zcollBroadcast(buf.data_ptr(), buf.data_ptr(), buf.numel(), toZcollType(buf), root, c,
                           nullptr), c, "zcollBroadcast");
      copyBack(t, buf);
    });
  }

  c10::intrusive_ptr<Work> allreduce(std::vector<at::Tensor>& tensors,
                                     const c10d::AllreduceOptions& opts) override {
    at::Tensor t = single(tensors);
    zcollRedOp_t op = toZcollOp(opts.reduceOp, t);
    return enqueue(OpType::ALLREDUCE, {t}, [=](zcollComm_t c) {
      at::Tensor buf = t.contiguous();
      check(zcollAllReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), toZcollType(buf), op, c,
                           nullptr), c, "zcollAllReduce");
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
    return enqueue(OpType::ALLREDUCE_COALESCED, ts, [=](zcollComm_t c) {
      if (oneType && ts.size() > 1) {  // one call over the concatenation: one latency, not n
        std::vector<at::Tensor> flat;
        for (const auto& t : ts) flat.push_back(t.reshape({-1}));
        at::Tensor buf = at::cat(flat);
        check(zcollAllReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), toZcollType(buf), op, c,
                             nullptr), c, "zcollAllReduce");
        int64_t off = 0;
        for (const auto& t : ts) {
          t.copy_(buf.narrow(0, off, t.numel()).view(t.sizes()));
          off += t.numel();
        }
        return;
      }
      for (const auto& t : ts) {
        at::Tensor buf = t.contiguous();
        check(zcollAllReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), toZcollType(buf), op, c,
                             nullptr), c, "zcollAllReduce");
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
    return enqueue(OpType::COALESCED, outs, [=](zcollComm_t c) {
      for (size_t i = 0; i < ins.size(); ++i) {
        at::Tensor src = ins[i].contiguous();
        at::Tensor dst = outs[i].contiguous();
        check(zcollAllGather(src.data_ptr(), dst.data_ptr(), src.numel(), toZcollType(src), c,
                             nullptr), c, "zcollAllGather");
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
    return enqueue(OpType::COALESCED, outs, [=](zcollComm_t c) {
      for (size_t i = 0; i < ins.size(); ++i) {
        at::Tensor src = ins[i].contiguous();
        at::Tensor dst = outs[i].contiguous();
        check(zcollReduceScatter(src.data_ptr(), dst.data_ptr(), dst.numel(), toZcollType(src),
                                 ops[i], c, nullptr), c, "zcollReduceScatter");
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
    return enqueue(OpType::_ALLGATHER_BASE, {out}, [=](zcollComm_t c) {
      at::Tensor src = in.contiguous();
      at::Tensor dst = out.contiguous();
      check(zcollAllGather(src.data_ptr(), dst.data_ptr(), src.numel(), toZcollType(src), c,
                           nullptr), c, "zcollAllGather");
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
    return enqueue(OpType::ALLGATHER, outs, [=](zcollComm_t c) {
      at::Tensor src = in.contiguous();
      at::Tensor flat = at::empty({size_ * src.numel()}, src.options());
      check(zcollAllGather(src.data_ptr(), flat.data_ptr(), src.numel(), toZcollType(src), c,
                           nullptr), c, "zcollAllGather");
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
    return enqueue(OpType::_REDUCE_SCATTER_BASE, {out}, [=](zcollComm_t c) {
      at::Tensor src = in.contiguous();
      at::Tensor dst = out.contiguous();
      check(zcollReduceScatter(src.data_ptr(), dst.data_ptr(), dst.numel(), toZcollType(src), op,
                               c, nullptr), c, "zcollReduceScatter");
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
    return enqueue(OpType::REDUCE_SCATTER, {out}, [=](zcollComm_t c) {
      std::vector<at::Tensor> flatIns;
      for (const auto& i : ins) flatIns.push_back(i.reshape({-1}));
      at::Tensor src = at::cat(flatIns);
      at::Tensor dst = out.contiguous();
      check(zcollReduceScatter(src.data_ptr(), dst.data_ptr(), dst.numel(), toZcollType(src), op,
                               c, nullptr), c, "zcollReduceScatter");
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
      return enqueue(OpType::ALLTOALL_BASE, {out}, [=](zcollComm_t c) {
        at::Tensor src = in.contiguous();
        at::Tensor dst = out.contiguous();
        check(zcollAllToAll(src.data_ptr(), dst.data_ptr(), src.numel() / size_,
                            toZcollType(src), c, nullptr), c, "zcollAllToAll");
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
    return enqueue(OpType::ALLTOALL_BASE, {out}, [=](zcollComm_t c) {
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
    return enqueue(OpType::ALLTOALL, outs, [=](zcollComm_t c) {
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
    return enqueue(OpType::REDUCE, {t}, [=](zcollComm_t c) {
      at::Tensor buf = t.contiguous();
      check(zcollReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), toZcollType(buf), op, root,
                        c, nullptr), c, "zcollReduce");
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
    return enqueue(OpType::GATHER, outs, [=](zcollComm_t c) {
      at::Tensor src = in.contiguous();
      at::Tensor flat = rank_ == root ? at::empty({size_ * src.numel()}, src.options()) : at::Tensor();
      check(zcollGather(src.data_ptr(), rank_ == root ? flat.data_ptr() : nullptr, src.numel(),
                        toZcollType(src), root, c, nullptr), c, "zcollGather");
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
    return enqueue(OpType::SCATTER, {out}, [=](zcollComm_t c) {
      at::Tensor src;
      if (!ins.empty()) {
        std::vector<at::Tensor> flat;
        for (const auto& t : ins) flat.push_back(t.reshape({-1}));
        src = at::cat(flat);
      }
      at::Tensor dst = out.contiguous();
      check(zcollScatter(src.defined() ? src.data_ptr() : nullptr, dst.data_ptr(), dst.numel(),
                         toZcollType(dst), root, c, nullptr), c, "zcollScatter");
      copyBack(out, dst);
    });
  }

  c10::intrusive_ptr<Work> barrier(const c10d::BarrierOptions&) override {
    return enqueue(OpType::BARRIER, {}, [](zcollComm_t c) {
      check(zcollBarrier(c, nullptr), c, "zcollBarrier");
    });
  }

  // Point to point: the contiguous buffer is made at call time, so a send snapshots its data
  // and a recv can be copied back after a batch (startCoalescing / batch_isend_irecv) completes.
  c10::intrusive_ptr<Work> send(std::vector<at::Tensor>& tensors, int dst, int) override {
    at::Tensor t = single(tensors);
    at::Tensor buf = t.contiguous();
    return enqueueP2P(OpType::SEND, {t}, [=](zcollComm_t c) {
      check(zcollSend(buf.data_ptr(), buf.numel(), toZcollType(buf), dst, c, nullptr), c,
            "zcollSend");
    }, nullptr);
  }

  c10::intrusive_ptr<Work> recv(std::vector<at::Tensor>& tensors, int src, int) override {
    at::Tensor t = single(tensors);
    at::Tensor buf = t.is_contiguous() ? t : at::empty_like(t, at::MemoryFormat::Contiguous);
    return enqueueP2P(OpType::RECV, {t}, [=](zcollComm_t c) {
      check(zcollRecv(buf.data_ptr(), buf.numel(), toZcollType(buf), src, c, nullptr), c,
            "zcollRecv");
    }, [=] { copyBack(t, buf); });
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
    push(batch.work, Step{[steps](zcollComm_t c) { runBatch(*steps, c); }, nullptr, false});
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
    return enqueue(OpType::_ALLGATHER_BASE, {output}, [=](zcollComm_t c) {
      at::Tensor src = input.contiguous();
      at::Tensor dst = output.contiguous();
      check(zcollQuantizedAllGather(src.data_ptr(), dst.data_ptr(), src.numel(), toZcollType(src),
                                    &quant, c, nullptr), c, "zcollQuantizedAllGather");
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
    return enqueue(OpType::_ALLGATHER_BASE, outs, [=](zcollComm_t c) {
      at::Tensor src = input.contiguous();
      at::Tensor dst = output.contiguous();
      at::Tensor sec = secondary ? secondary->contiguous() : at::Tensor();
      check(zcollAllGatherHier(src.data_ptr(), dst.data_ptr(), sec.defined() ? sec.data_ptr() : nullptr,
                               src.numel(), toZcollType(src), quant ? &*quant : nullptr, c, nullptr),
            c, "zcollAllGatherHier");
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
    return enqueue(OpType::_ALLGATHER_BASE, {output}, [=](zcollComm_t c) {
      at::Tensor sec = secondary.contiguous();
      at::Tensor dst = output.contiguous();
      check(zcollAllGatherFromSecondary(sec.data_ptr(), dst.data_ptr(), sec.numel() / nodes_,
                                        toZcollType(sec), c, nullptr), c,
            "zcollAllGatherFromSecondary");
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
    return enqueue(OpType::_REDUCE_SCATTER_BASE, {output}, [=](zcollComm_t c) {
      at::Tensor src = input.contiguous();
      at::Tensor dst = output.contiguous();
      check(zcollQuantizedReduceScatter(src.data_ptr(), dst.data_ptr(), dst.numel(),
                                        toZcollType(src), op, &quant, c, nullptr), c,
            "zcollQuantizedReduceScatter");
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
                        zcollComm_t c) {
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
    check(zcollAllToAllv(src.data_ptr(), sc.data(), sd.data(), dst.data_ptr(), rc.data(),
                         rd.data(), toZcollType(src), c, nullptr), c, "zcollAllToAllv");
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
  static void runBatch(const std::vector<Step>& steps, zcollComm_t c) {
    bool allP2P = std::all_of(steps.begin(), steps.end(), [](const Step& s) { return s.p2p; });
    if (allP2P && !steps.empty()) {
      check(zcollGroupStart(), c, "zcollGroupStart");
      for (const auto& s : steps) s.run(c);
      check(zcollGroupEnd(), c, "zcollGroupEnd");
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

  c10::intrusive_ptr<Work> enqueue(OpType type, std::vector<at::Tensor> outputs, Job job) {
    return enqueueStep(type, std::move(outputs), Step{std::move(job), nullptr, false});
  }

  c10::intrusive_ptr<Work> enqueueP2P(OpType type, std::vector<at::Tensor> outputs, Job job,
                                      std::function<void()> finish) {
    return enqueueStep(type, std::move(outputs), Step{std::move(job), std::move(finish), true});
  }

  // Inside startCoalescing / endCoalescing the step joins the batch (and returns its Work).
  c10::intrusive_ptr<Work> enqueueStep(OpType type, std::vector<at::Tensor> outputs, Step step) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (batch_) {
        batch_->work->addOutputs(outputs);
        batch_->steps.push_back(std::move(step));
        return batch_->work;
      }
    }
    auto work = c10::make_intrusive<ZcollWork>(rank_, type, std::move(outputs));
    push(work, std::move(step));
    return work;
  }

  void push(c10::intrusive_ptr<ZcollWork> work, Step step) {
    work->attach(queue_);
    queue_->push(std::move(work), std::move(step));
  }

  zcollComm_t comm_ = nullptr;
  int nodes_ = 1;
  std::mutex mu_;  // guards batch_
  std::optional<Batch> batch_;
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
}
