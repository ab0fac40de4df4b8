// zcoll as a c10d::Backend. Each operation maps to zcoll calls on the group's communicator:
// CPU tensors end in zcollGroupEndNonBlocking and the Work wraps the request (no queue or thread
// of the backend's own: zcoll's engine keeps the order, runs requests on its progress thread,
// or on a thread that waits for the next one); CUDA tensors go on the group's stream of their
// device (zcoll's device calls return once enqueued). Only the public C API is used.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/version.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "common.h"
#include "work.h"

// torch's Backend::supportsShrinking / shrink (dist.shrink_group) came with torch 2.10; older
// torch has neither, and the backend then reports no shrinking (torch's default).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 10)
#define ZCOLL_TORCH_SHRINK 1
#else
#define ZCOLL_TORCH_SHRINK 0
#endif

#ifdef ZCOLL_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace zcoll_torch ZCOLL_TORCH_HIDDEN {

// How a job reaches zcoll and the caller's tensors. A job makes an operation's zcoll calls on
// buffers it gets through in/out/inout, which make contiguous copies where needed and arrange
// the copies back (run once the operation is complete: by the completion callback for CPU
// tensors, at once on the stream for CUDA tensors).
class Ctx {
 public:
  zcollComm_t comm = nullptr;
  zcollStream_t stream = nullptr;  // NULL for host buffers
  Completion* completion = nullptr;
  // Called once before the job first copies a caller's tensor (CPU: waits for the operation
  // before, which may still be writing it).
  std::function<void()> beforeRead;

  // t, or a contiguous copy of it: read by zcoll.
  at::Tensor in(const at::Tensor& t);
  // A contiguous buffer for t (t itself when contiguous) that zcoll writes; copied into t after.
  at::Tensor out(const at::Tensor& t);
  // Read and written: in(t), copied back into t after.
  at::Tensor inout(const at::Tensor& t);
  // A copy made from the caller's tensors (a concatenation, a scaled input): kept alive.
  at::Tensor made(const std::function<at::Tensor()>& make);
  // A fresh buffer zcoll writes (no read of the caller's tensors).
  at::Tensor keep(at::Tensor t);
  void after(std::function<void()> copy) { completion->after.push_back(std::move(copy)); }
  // The zcoll call an error of the operation names (its first).
  const char* name(const char* call) {
    if (!named_) completion->what = call;
    named_ = true;
    return call;
  }

 private:
  void reading();
  bool read_ = false;
  bool named_ = false;
};

using Job = std::function<void(Ctx&)>;

class ZcollBackend : public c10d::Backend {
 public:
  // A new communicator (init_process_group, new_group): every rank of the group calls it.
  // commName: the communicator's name (torchCommName of torch's group name), shown by
  // zcoll_info --status, in flight records and in zcoll's log lines.
  ZcollBackend(const std::string& uniqueId, int rank, int size, int timeoutSec,
               const std::string& commName = "torch");
  // A communicator zcollCommSplit or zcollCommShrink made, named commName.
  ZcollBackend(zcollComm_t comm, int rank, int size, int timeoutSec,
               std::chrono::milliseconds workTimeout, const std::string& commName);
  ~ZcollBackend() override;

  const std::string getBackendName() const override { return "zcoll"; }
  bool supportsCoalescing() const override { return true; }
  bool supportsSplitting() const override { return true; }
  // The options split() gets when torch passes none (ProcessGroup::splitGroup).
  c10::intrusive_ptr<Options> getBackendOptions() override;
  bool supportsTensorAlloc(c10::DeviceIndex deviceIdx) override;
  at::Tensor allocateTensor(long size, at::TensorOptions options) override;
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
  // split's work, the new communicator named `name` (new_group splitting a group passes
  // torchCommName of the new group's name; python/zcoll/__init__.py).
  c10::intrusive_ptr<c10d::Backend> splitAs(const std::vector<int>& ranks,
                                            const c10::intrusive_ptr<Options>& opts,
                                            const std::string& name);
  // Non-members' part of a split of this group (new_group with the default group split).
  void splitNoColor();
  // The name of the group's host communicator (its CUDA one adds ":cuda").
  const std::string& commName() const { return commName_; }
  void eagerConnectSingleDevice(at::Device device) override;
  // dist.shrink_group over zcollCommShrink: the ranks of this group not in ranksToExclude (ranks
  // of this group) get a new group on a new communicator, renumbered in this group's order.
  // shrinkFlags: torch's SHRINK_DEFAULT (0, this group healthy) or SHRINK_ABORT (1, a broken
  // group: revoked first, as ZCOLL_SHRINK_ABORT). Collective over the ranks that stay.
  c10::intrusive_ptr<c10d::Backend> shrinkGroup(const std::vector<int64_t>& ranksToExclude,
                                                int shrinkFlags,
                                                const c10::intrusive_ptr<Options>& opts);
#if ZCOLL_TORCH_SHRINK
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t>& ranksToExclude,
                                           int shrinkFlags = 0,
                                           const c10::intrusive_ptr<Options>& opts = nullptr)
      override {
    return shrinkGroup(ranksToExclude, shrinkFlags, opts);
  }
#endif
  void abort() override;
  void shutdown() override;
  c10d::ErrorType getError() override;
  void setTimeout(std::chrono::milliseconds timeout) override;

  // The number of collectives issued on this group so far (point to point excluded, as
  // ProcessGroupNCCL's collective sequence number): equal on every rank while they agree.
  // TORCH_DISTRIBUTED_DEBUG=DETAIL's ProcessGroupWrapper compares it across ranks before each
  // collective. It starts at 0 on every rank, so there is nothing to agree on: torch 2.11's
  // default setSequenceNumberForGroup throws (2.15's is a deprecated no-op), hence this one.
  uint64_t getSequenceNumberForGroup() override { return seq_.load(); }
  void setSequenceNumberForGroup() override {}

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outSplits,
                                               std::vector<int64_t>& inSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  // ---- byte counters (zcoll.get_stats / zcoll.reset_stats) ------------------------------
  // zcollCommGetStats of the group's communicators (the host one, plus the CUDA one once the
  // group is connected to a device), summed field by field, read once the CPU operations
  // issued on the group so far have completed (each is then counted in full).
  zcollStats_t stats();
  // zcollCommResetStats of the same communicators, once the CPU operations issued so far have
  // completed (none of their bytes is counted after the reset).
  void resetStats();

  // ---- ZeRO++ collectives (python/zcoll/zeropp.py and the torch.ops.zcoll ops) ----------
  int nodeCount() const { return nodes_; }
  c10::intrusive_ptr<c10d::Work> quantizedAllGather(at::Tensor output, at::Tensor input,
                                                    zcollQuantConfig_t quant);
  // secondary: nodes * input.numel() elements, or undefined when the caller does not keep it.
  c10::intrusive_ptr<c10d::Work> allGatherHier(at::Tensor output, at::Tensor input,
                                               std::optional<at::Tensor> secondary,
                                               std::optional<zcollQuantConfig_t> quant);
  c10::intrusive_ptr<c10d::Work> allGatherFromSecondary(at::Tensor output, at::Tensor secondary);
  c10::intrusive_ptr<c10d::Work> quantizedReduceScatter(at::Tensor output, at::Tensor input,
                                                        const c10d::ReduceOp& reduceOp,
                                                        zcollQuantConfig_t quant);
  // zcollQuantizedAllReduce in place on `tensor` (SUM, AVG or PREMUL_SUM); with `residual`
  // (contiguous, quantizedAllReduceResidualBytes bytes, on tensor's device, zeroed before the
  // first call) zcollQuantizedAllReduceWithResidual: error feedback.
  c10::intrusive_ptr<c10d::Work> quantizedAllReduce(at::Tensor tensor,
                                                    const c10d::ReduceOp& reduceOp,
                                                    zcollQuantConfig_t quant,
                                                    std::optional<at::Tensor> residual);
  // zcollQuantizedAllReduceResidualSize for `numel` elements of `dtype` on this group. The
  // size depends only on numel and the group's layout: asked once per numel (the C call waits
  // for the operations queued before it) and remembered, so that checking a residual does not
  // wait for the buckets reduced before it.
  int64_t quantizedAllReduceResidualBytes(int64_t numel, at::ScalarType dtype,
                                          zcollQuantConfig_t quant);
  // This rank's node's number of ranks (zcollCommLocalSize).
  int localSize();

 private:
  // Runs `call` (a blocking zcoll call on the host communicator) once the operations issued
  // before have completed, without the GIL; throws its error.
  void runBlocking(const char* name, const std::function<zcollResult_t(zcollComm_t)>& call);

 public:

  // ---- Keep training after shrink_group (zcoll.zeropp.rebuild_*; docs/FAULT_TOLERANCE.md) --
  // CPU tensors, blocking: each runs on the calling thread once the operations issued before it
  // have completed (zcoll runs these calls outside groups, where the other operations run). The
  // old group is the one shrink_group made this group from (oldComm NULL).
  void rebuildFromSecondary(at::Tensor output, at::Tensor secondary,
                            std::optional<at::Tensor> primary, int64_t shardNumel,
                            int64_t totalNumel);
  void rebuildFromBuddy(at::Tensor output, at::Tensor primary, at::Tensor copy,
                        int64_t totalNumel);
  void buddyCopy(at::Tensor copy, at::Tensor shard);
  int64_t buddyCopyNumel(int64_t numel);

 private:
  struct Batch {
    c10::intrusive_ptr<ZcollWork> work;
    std::vector<Job> jobs;
    std::vector<at::Tensor> inputs;
    std::optional<c10::Device> device;
  };

  void initAfterComm();

  // ---- the watchdog (python/README.md, "Failures and the watchdog") ----------------------
  // A thread per group, as ProcessGroupNCCL's: every kWatchdogInterval it reads the
  // communicators' async errors (zcollCommGetAsyncError). On one it reports it once, fails the
  // group's outstanding CUDA Works (a failure of the CUDA communicator), and acts per
  // ZCOLL_TORCH_ASYNC_ERROR_HANDLING (asyncHandling_): 0 nothing more, 1 abort the group then
  // end the process, 2 abort the group, 3 end the process.
  static constexpr std::chrono::milliseconds kWatchdogInterval{100};
  void startWatchdog();
  // Stops it and waits for it (not when called on the watchdog itself: it is ending then).
  void stopWatchdog();
  void watchdogLoop();
  // One look; false once there is nothing more to watch (the group closed, or acted on).
  bool watchdogLook();
  // Waits (without the GIL) until the last CPU operation issued on the group has completed;
  // they complete in submission order, so every one before it has too.
  void waitIssued();
  // Issues one operation (or adds it to the open batch). `inputs`: the tensors it reads besides
  // `outputs` (all on one device). `p2p`: point to point (not counted as a collective).
  c10::intrusive_ptr<c10d::Work> issue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                       const std::vector<at::Tensor>& inputs, Job job,
                                       bool p2p = false);
  // Runs `jobs` as one operation of `work` on `device`.
  void launch(const c10::intrusive_ptr<ZcollWork>& work, std::vector<Job> jobs,
              c10::Device device, const std::vector<at::Tensor>& outputs,
              const std::vector<at::Tensor>& inputs);
  void launchHost(const c10::intrusive_ptr<ZcollWork>& work, const std::vector<Job>& jobs);
#ifdef ZCOLL_TORCH_CUDA
  void launchCuda(const c10::intrusive_ptr<ZcollWork>& work, const std::vector<Job>& jobs,
                  c10::Device device, const std::vector<at::Tensor>& outputs,
                  const std::vector<at::Tensor>& inputs);
  CudaPlace cudaPlace(c10::Device device, const std::vector<at::Tensor>& outputs,
                      const std::vector<at::Tensor>& inputs);
  c10::cuda::CUDAStream streamOf(c10::Device device);
  // Refuses (before anything is recorded) an operation while the caller's current stream or the
  // group's stream of `device` is being captured into a CUDA graph.
  void checkNotCapturing(c10::Device device, c10d::OpType type);
  // Waits for the group's streams (shutdown: its CUDA operations have run); errors ignored.
  void synchronizeStreams();
#endif
  // The communicator of CUDA operations: split from the group's at this rank's first CUDA
  // operation of any kind (or eagerConnectSingleDevice), with that device current: zcoll binds a
  // communicator to the device current at its creation (python/README.md, "CUDA tensors").
  // Collective over the group: each rank takes part at its own first CUDA operation, so a
  // first send meets the other ranks' first operations, whatever they are.
  zcollComm_t deviceComm(c10::Device device);
  zcollComm_t connectDevice(c10::Device device);
  // A child communicator's config, named `name` (which must outlive the config's use).
  zcollConfig_t childConfig(const std::string& name, int* timeoutSec) const;
  zcollComm_t hostComm() const;
  static std::exception_ptr abortedFailure();

  void checkGatherShapes(const at::Tensor& output, const at::Tensor& input, const char* what);
  void checkSecondary(const at::Tensor& secondary, const at::Tensor& input, const char* what);
  int checkRoot(int64_t root, const char* what) const;
  std::vector<at::Tensor> rootList(const std::vector<std::vector<at::Tensor>>& lists,
                                   const at::Tensor& like, int root, const char* what,
                                   const char* kind) const;
  std::vector<int64_t> splitsOrEqual(const std::vector<int64_t>& splits, const at::Tensor& t);

  zcollComm_t comm_ = nullptr;
  std::string commName_;
  // The last split's group_name and result (split: torch may ask twice for one split_group).
  std::string lastSplitName_;
  // Weak: the child's lifetime is its group's.
  c10::weak_intrusive_ptr<c10d::Backend> lastSplit_{c10::intrusive_ptr<c10d::Backend>()};
  int nodes_ = 1;
  int timeoutSec_ = 0;
  std::atomic<int64_t> workTimeoutMs_{-1};  // set_timeout's, -1: none
  std::atomic<uint64_t> seq_{0};  // collectives issued (getSequenceNumberForGroup)
  std::atomic<bool> closed_{false};
  bool aborted_ = false;
  std::mutex mu_;  // guards batch_, last_, streams_
  std::optional<Batch> batch_;
  std::shared_ptr<Completion> last_;  // the last CPU operation issued
  std::shared_ptr<Reaper> reaper_ = std::make_shared<Reaper>();
  std::mutex closeMu_;  // guards closing and the device communicator
  zcollComm_t deviceComm_ = nullptr;
  c10::DeviceIndex deviceIndex_ = -1;
  // Whether the CUDA communicator's calls return complete (ZCOLL_DEVICE_CALLS, read when it is
  // made, as zcoll reads it): their result is then the Works' outcome at once.
  bool deviceCallsReturnComplete_ = true;
  std::shared_ptr<DeviceWatch> deviceWatch_ = std::make_shared<DeviceWatch>();
  int asyncHandling_ = 0;  // ZCOLL_TORCH_ASYNC_ERROR_HANDLING
  std::thread watchdog_;
  std::mutex watchdogMu_;
  std::mutex watchdogJoinMu_;
  std::condition_variable watchdogWake_;
  bool watchdogStop_ = false;
  std::atomic<bool> hostErrorSeen_{false}, deviceErrorSeen_{false};  // reported by the watchdog
#ifdef ZCOLL_TORCH_CUDA
  std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams_;
#endif
};

// The communicator name of torch's group `groupName` (pg.group_name: "0" for the default group,
// "1", "2", ... for new_group, a hash for split_group's): "torch:<groupName>".
inline std::string torchCommName(const std::string& groupName) { return "torch:" + groupName; }

// A uint8 tensor of `bytes` in registered host memory (zcollMemAllocHost): node peers read it in
// place. Its storage frees the memory (zcollMemFreeHost) when the last view of it goes.
at::Tensor hostBytes(int64_t bytes);

}  // namespace zcoll_torch
