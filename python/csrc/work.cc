#include "work.h"

#include <algorithm>

#ifdef ZCOLL_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <ATen/cuda/CUDAContext.h>
#endif

namespace zcoll_torch ZCOLL_TORCH_HIDDEN {

void Reaper::add(zcollRequest_t request) {
  std::lock_guard<std::mutex> lock(mu_);
  requests_.push_back(request);
  count_.store(requests_.size());
}

void Reaper::sweep() {
  if (count_.load() == 0) return;
  MaybeReleaseGil noGil;  // freeing waits for a callback that may need the GIL
  std::lock_guard<std::mutex> lock(mu_);
  auto done = [](zcollRequest_t r) {
    int complete = 0;
    zcollRequestTest(r, &complete);  // its result went to its Work's callback already
    if (!complete) return false;
    zcollRequestFree(r);
    return true;
  };
  requests_.erase(std::remove_if(requests_.begin(), requests_.end(), done), requests_.end());
  count_.store(requests_.size());
}

void Reaper::drain() {
  MaybeReleaseGil noGil;
  std::lock_guard<std::mutex> lock(mu_);
  for (zcollRequest_t r : requests_) zcollRequestFree(r);  // waits for it to complete
  requests_.clear();
  count_.store(0);
}

void Completion::complete(std::exception_ptr failure) {
  if (!failure) {
    try {
      for (auto& copy : after) copy();
    } catch (...) {
      failure = std::current_exception();
    }
  }
  after.clear();
  keep.clear();  // drop the buffers before the work completes
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    error = failure;
  }
  cv.notify_all();
  if (failure) {
    future->setError(failure);
  } else {
    future->markCompleted(c10::IValue(outputs));
  }
}

bool Completion::waitDone(std::chrono::milliseconds timeout) {
  MaybeReleaseGil noGil;
  std::unique_lock<std::mutex> lock(mu);
  if (timeout == ::kNoTimeout) {
    cv.wait(lock, [&] { return done; });
    return true;
  }
  return cv.wait_for(lock, timeout, [&] { return done; });
}

// ---- DeviceWatch ---------------------------------------------------------------------------

std::exception_ptr asyncFailure(zcollResult_t rc, const std::string& name) {
  try {
    TORCH_CHECK_WITH(DistBackendError, false, "zcoll: the communicator ", name, " failed after "
                     "operations were enqueued on it (zcollCommGetAsyncError): ",
                     zcollGetErrorString(rc), " (", static_cast<int>(rc), "); its next operation "
                     "raises zcoll's message");
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

void DeviceWatch::attach(zcollComm_t comm, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  comm_ = comm;
  name_ = name;
  detached_ = false;  // a new communicator after an abort (shrink_group): asked from now on
  final_ = nullptr;
}

void DeviceWatch::track(const std::shared_ptr<DeviceOutcome>& outcome) {
  std::lock_guard<std::mutex> lock(mu_);
  if (detached_) {  // cannot happen: no operation is enqueued after the communicator went
    outcome->settle(final_);
    return;
  }
  auto gone = [](const std::weak_ptr<DeviceOutcome>& w) {
    auto o = w.lock();
    return o == nullptr || o->isSettled();
  };
  outstanding_.erase(std::remove_if(outstanding_.begin(), outstanding_.end(), gone),
                     outstanding_.end());
  outstanding_.push_back(outcome);
}

std::exception_ptr DeviceWatch::asyncErrorLocked() {
  if (detached_ || comm_ == nullptr) return final_;
  zcollResult_t async = zcollSuccess;
  if (zcollCommGetAsyncError(comm_, &async) != zcollSuccess || async == zcollSuccess)
    return nullptr;
  return asyncFailure(async, name_);
}

std::exception_ptr DeviceWatch::asyncError() {
  std::lock_guard<std::mutex> lock(mu_);
  return asyncErrorLocked();
}

void DeviceWatch::settlePassed(DeviceOutcome& outcome) {
  std::lock_guard<std::mutex> lock(mu_);
  outcome.settle(asyncErrorLocked());
}

void DeviceWatch::failOutstanding(std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& w : outstanding_)
    if (auto o = w.lock()) o->settle(error);
  outstanding_.clear();
}

void DeviceWatch::detach(std::exception_ptr final) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& w : outstanding_)
    if (auto o = w.lock()) o->settle(final);
  outstanding_.clear();
  final_ = final;
  detached_ = true;
  comm_ = nullptr;
}

// ---- ZcollWork ------------------------------------------------------------------------------

ZcollWork::ZcollWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
                     std::shared_ptr<Reaper> reaper, std::chrono::milliseconds timeout)
    : Work(rank, type), completion_(std::make_shared<Completion>()),
      reaper_(std::move(reaper)), timeout_(timeout) {
  completion_->outputs = std::move(outputs);
  completion_->future =
      c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
}

ZcollWork::~ZcollWork() {
  if (request_ == nullptr) return;
  if (completion_->isDone()) {
    MaybeReleaseGil noGil;  // its callback may still be returning
    zcollRequestFree(request_);
  } else {
    reaper_->add(request_);
  }
}

bool ZcollWork::isCompleted() {
  {
    std::lock_guard<std::mutex> lock(completion_->mu);
    if (!completion_->done) return false;
    if (completion_->error) return true;
  }
#ifdef ZCOLL_TORCH_CUDA
  settleDevice();
  if (deviceFailure()) return true;  // failed: complete, as ProcessGroupNCCL's
  return devicePassed();
#else
  return true;
#endif
}

// Complete without an error; for a CUDA operation, its device part settled as a success.
bool ZcollWork::isSuccess() const {
  {
    std::lock_guard<std::mutex> lock(completion_->mu);
    if (!completion_->done || completion_->error) return false;
  }
#ifdef ZCOLL_TORCH_CUDA
  if (outcome_) {
    settleDevice();
    return outcome_->isSettled() && !outcome_->failure();
  }
#endif
  return true;
}

std::exception_ptr ZcollWork::exception() const {
  {
    std::lock_guard<std::mutex> lock(completion_->mu);
    if (completion_->error) return completion_->error;
  }
#ifdef ZCOLL_TORCH_CUDA
  settleDevice();
  return deviceFailure();
#else
  return nullptr;
#endif
}

void ZcollWork::addOutputs(const std::vector<at::Tensor>& more) {
  auto& outs = completion_->outputs;
  outs.insert(outs.end(), more.begin(), more.end());
}

#ifdef ZCOLL_TORCH_CUDA
void ZcollWork::addCudaPlace(const CudaPlace& place) {
  places_.push_back(place);
  c10::Device device = place.stream.device();
  if (std::find(devices_.begin(), devices_.end(), device) != devices_.end()) return;
  devices_.push_back(device);
  completion_->future = c10::make_intrusive<c10::ivalue::Future>(
      c10::ListType::create(c10::TensorType::get()), devices_);
}

void ZcollWork::watchDevice(const std::shared_ptr<DeviceWatch>& watch, bool returnedComplete) {
  outcome_ = std::make_shared<DeviceOutcome>();
  watch_ = watch;
  if (returnedComplete) {
    outcome_->settle(nullptr);  // the calls returned complete and succeeded
  } else {
    watch_->track(outcome_);
  }
}

bool ZcollWork::devicePassed() const {
  for (const auto& place : places_) {
    if (!place.done->query()) return false;
  }
  return true;
}

void ZcollWork::settleDevice() const {
  if (!outcome_ || outcome_->isSettled()) return;
  if (devicePassed()) {
    watch_->settlePassed(*outcome_);
  } else if (std::exception_ptr error = watch_->asyncError()) {
    outcome_->settle(error);
  }
}

std::exception_ptr ZcollWork::deviceFailure() const {
  return outcome_ ? outcome_->failure() : nullptr;
}
#endif

namespace {
void onComplete(zcollRequest_t, zcollResult_t result, void* arg) {
  std::unique_ptr<std::shared_ptr<Completion>> state(static_cast<std::shared_ptr<Completion>*>(arg));
  Completion& c = **state;
  c.complete(result == zcollSuccess ? nullptr : zcollError(result, c.comm, c.what));
}
}  // namespace

void ZcollWork::start(zcollRequest_t request) {
  request_ = request;
  auto* arg = new std::shared_ptr<Completion>(completion_);
  zcollResult_t rc = zcollRequestOnComplete(request, &onComplete, arg);
  if (rc != zcollSuccess) {  // cannot happen for a request just made; fail it rather than leak
    delete arg;
    completion_->complete(zcollError(rc, completion_->comm, "zcollRequestOnComplete"));
  }
}

void ZcollWork::finish(std::exception_ptr error) {
#ifdef ZCOLL_TORCH_CUDA
  // The future's events go on the operation's stream, after its end.
  std::optional<c10::cuda::CUDAStreamGuard> onStream;
  if (!places_.empty()) onStream.emplace(places_.front().stream);
#endif
  completion_->complete(error);
}

bool ZcollWork::wait(std::chrono::milliseconds timeout) {
  // set_timeout's bound applies to a wait given none.
  const bool explicitTimeout = timeout != ::kNoTimeout;
  std::chrono::milliseconds limit = explicitTimeout ? timeout : timeout_;
  if (limit == ::kNoTimeout && request_ != nullptr) {
    // Returns once the callback has completed completion_, which holds the result (a failure
    // named after the operation, not after this wait).
    MaybeReleaseGil noGil;
    (void)zcollRequestWait(request_);
  }
  if (!completion_->waitDone(limit)) {
    TORCH_CHECK_WITH(DistBackendError, false, "zcoll: Work.wait timed out after ", limit.count(),
                     " ms", explicitTimeout ? "" : " (the group's set_timeout)",
                     " (the operation is not cancelled: it still runs in its turn; wait() "
                     "without a timeout waits for its end)");
  }
  // A CUDA operation's failure known by now (settled, or its communicator reports an error)
  // raises; otherwise the caller's current stream waits for its end.
  std::exception_ptr error = exception();
  if (error) std::rethrow_exception(error);
#ifdef ZCOLL_TORCH_CUDA
  for (const auto& place : places_)
    place.done->block(at::cuda::getCurrentCUDAStream(place.stream.device_index()));
#endif
  return true;
}

}  // namespace zcoll_torch
