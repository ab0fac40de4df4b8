// A c10d Work for one zcoll operation.
//
// CPU tensors: the operation is a zcoll request (zcollGroupEndNonBlocking), run in the
// communicator's order by zcoll's progress thread, or by the thread that waits for it when it
// is next (zcoll's engine does that: zcollRequestWait). zcollRequestOnComplete's callback, on
// whichever thread completed it, copies results back into the caller's tensors where the call
// needed a buffer of its own, drops the buffers and completes the future: a future completes
// with valid outputs even if nobody waits.
//
// CUDA tensors: the operation is enqueued on the group's stream when it is issued (zcoll's
// device calls return once enqueued, or complete with ZCOLL_DEVICE_CALLS=auto/sync), so the Work
// is complete on the host at once; wait() makes the caller's current stream wait for the
// operation's end (ProcessGroupNCCL's semantics). A queued call that fails once it runs breaks
// the communicator (zcollCommGetAsyncError) and releases the stream: its Work's DeviceOutcome
// settles as a failure once the communicator reports the error (the Work asked, or the group's
// watchdog), and as a success once the call's done events have passed with the communicator
// clear (zcoll breaks it before it releases the stream of a failed call).
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#ifdef ZCOLL_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "common.h"

namespace zcoll_torch ZCOLL_TORCH_HIDDEN {

// Requests of Works dropped before their operation completed: freed once complete (zcollRequestFree
// would wait), at the group's next operation or when it shuts down.
class Reaper {
 public:
  void add(zcollRequest_t request);
  void sweep();  // frees the complete ones
  void drain();  // frees all, waiting for each

 private:
  std::mutex mu_;
  std::vector<zcollRequest_t> requests_;
  std::atomic<size_t> count_{0};
};

// What the completion callback needs; shared by the Work and the callback, so either may go first.
struct Completion {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  std::vector<std::function<void()>> after;  // copies back into the caller's tensors
  std::vector<at::Tensor> keep;              // what zcoll reads and writes until complete
  std::vector<at::Tensor> outputs;           // the future's value
  c10::intrusive_ptr<c10::ivalue::Future> future;
  zcollComm_t comm = nullptr;  // for the error's message
  const char* what = "operation";

  // Runs the copies back (unless it failed), drops the buffers, wakes the waiters and completes
  // the future, on the calling thread. Takes no GIL itself.
  void complete(std::exception_ptr failure);
  bool isDone() {
    std::lock_guard<std::mutex> lock(mu);
    return done;
  }
  // Waits (without the GIL) until complete; false when `timeout` passed first.
  bool waitDone(std::chrono::milliseconds timeout);
};

// How the device part of a CUDA operation went, settled once (the first settlement stands).
struct DeviceOutcome {
  std::mutex mu;
  bool settled = false;
  std::exception_ptr error;
  void settle(std::exception_ptr failure) {
    std::lock_guard<std::mutex> lock(mu);
    if (settled) return;
    settled = true;
    error = failure;
  }
  bool isSettled() {
    std::lock_guard<std::mutex> lock(mu);
    return settled;
  }
  std::exception_ptr failure() {
    std::lock_guard<std::mutex> lock(mu);
    return error;
  }
};

// The group's CUDA communicator as its Works see it (one per backend, shared with its Works, so
// a Work may outlive the backend): its async error, and the outcomes not yet settled. The
// communicator is asked only while attached; the backend detaches it before destroying or
// aborting it, settling what is left (and attaches the next one a SHRINK_ABORT leads to).
// A failure zcollCommGetAsyncError reported on communicator `name`, as a DistBackendError. Only
// the result's code and text: zcollGetLastError(comm) is not for a thread other than the one
// using the communicator (the watchdog's), so zcoll's message comes with the next operation.
std::exception_ptr asyncFailure(zcollResult_t rc, const std::string& name);

class DeviceWatch {
 public:
  // `name`: the communicator's, for the message.
  void attach(zcollComm_t comm, const std::string& name);
  void track(const std::shared_ptr<DeviceOutcome>& outcome);
  // The communicator's async error as the exception an outcome fails with (null while clear;
  // after detach, the final one).
  std::exception_ptr asyncError();
  // For an operation whose done events have all passed: success unless the communicator has an
  // error (a failed call breaks it before its stream is released).
  void settlePassed(DeviceOutcome& outcome);
  // Fails every outcome not yet settled (the watchdog saw `error`).
  void failOutstanding(std::exception_ptr error);
  // The communicator goes: what is not settled settles with `final` (null: success, for a
  // shutdown once the group's streams are synchronized and the communicator was clear).
  void detach(std::exception_ptr final);

 private:
  std::exception_ptr asyncErrorLocked();
  std::mutex mu_;
  zcollComm_t comm_ = nullptr;
  std::string name_;
  bool detached_ = false;
  std::exception_ptr final_;
  std::vector<std::weak_ptr<DeviceOutcome>> outstanding_;
};

#ifdef ZCOLL_TORCH_CUDA
// Where a CUDA operation runs: the group's stream on the tensors' device, after `submitted`
// (recorded on the caller's current stream when the operation was issued); `done` is recorded
// on it once the operation is enqueued there.
struct CudaPlace {
  c10::cuda::CUDAStream stream;
  std::shared_ptr<at::cuda::CUDAEvent> submitted, done;
};
#endif

class ZcollWork : public c10d::Work {
 public:
  // `timeout`: set_timeout's bound on wait() (kNoTimeout: the communicator's timeout alone).
  ZcollWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
            std::shared_ptr<Reaper> reaper, std::chrono::milliseconds timeout);
  ~ZcollWork() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override { return completion_->outputs; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return completion_->future; }
  // Orders later work after this one: waits until it has run on the host (CPU tensors) or has
  // been enqueued (CUDA tensors; the caller's current stream then waits for its end).
  void synchronize() override { wait(kNoTimeout); }
  // Without a timeout: zcollRequestWait (runs the operation on this thread when it is next;
  // zcoll's timeout bounds it). With one: waits at most `timeout` for zcoll's progress thread
  // to run it, whichever thread would otherwise have: every rank honours it alike. A wait that
  // times out cancels nothing: the operation still runs in its turn.
  bool wait(std::chrono::milliseconds timeout) override;

  // Before start/finish only (a coalesced batch collecting its operations).
  Completion& completion() { return *completion_; }
  void addOutputs(const std::vector<at::Tensor>& more);
#ifdef ZCOLL_TORCH_CUDA
  // One CUDA operation of it: its future then completes on that device's stream (c10's
  // CUDA-aware future records events).
  void addCudaPlace(const CudaPlace& place);
  // Once enqueued: the device part's outcome, known at once (`returnedComplete`: the zcoll calls
  // returned complete, their result is the outcome) or settled later through `watch`.
  void watchDevice(const std::shared_ptr<DeviceWatch>& watch, bool returnedComplete);
#endif

  // The request that runs it; its callback completes this Work.
  void start(zcollRequest_t request);
  // Completes it now (CUDA operations once enqueued; operations that failed to start).
  void finish(std::exception_ptr error);
  // The state the next operation may wait for (an operation that copies the caller's tensors
  // when issued waits for the one before it: they may be its outputs).
  std::shared_ptr<Completion> completionState() const { return completion_; }

 private:
  std::shared_ptr<Completion> completion_;
  zcollRequest_t request_ = nullptr;
  std::shared_ptr<Reaper> reaper_;
  std::chrono::milliseconds timeout_;
#ifdef ZCOLL_TORCH_CUDA
  // Whether every done event has passed (the device got past the operation).
  bool devicePassed() const;
  // Settles the device outcome if it can be now: passed (settlePassed), or the communicator
  // reports an error (it may be this operation's: ProcessGroupNCCL's semantics).
  void settleDevice() const;
  // The device part's failure, once settled so (settleDevice first).
  std::exception_ptr deviceFailure() const;
  std::vector<CudaPlace> places_;
  std::vector<c10::Device> devices_;
  std::shared_ptr<DeviceOutcome> outcome_;
  std::shared_ptr<DeviceWatch> watch_;
#endif
};

}  // namespace zcoll_torch
