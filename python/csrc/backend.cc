#include "backend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifdef ZCOLL_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace zcoll_torch ZCOLL_TORCH_HIDDEN {

using c10d::OpType;
using c10d::Work;

// ---- Ctx ----------------------------------------------------------------------------------

void Ctx::reading() {
  if (read_) return;
  read_ = true;
  if (beforeRead) beforeRead();
}

at::Tensor Ctx::in(const at::Tensor& t) {
  completion->keep.push_back(t);
  if (t.is_contiguous()) return t;
  reading();
  return keep(t.contiguous());
}

at::Tensor Ctx::out(const at::Tensor& t) {
  completion->keep.push_back(t);
  if (t.is_contiguous()) return t;
  at::Tensor buf = keep(at::empty_like(t, at::MemoryFormat::Contiguous));
  after([t, buf] { t.copy_(buf); });
  return buf;
}

at::Tensor Ctx::inout(const at::Tensor& t) {
  at::Tensor buf = in(t);
  if (!buf.is_same(t)) after([t, buf] { t.copy_(buf); });
  return buf;
}

at::Tensor Ctx::made(const std::function<at::Tensor()>& make) {
  reading();
  return keep(make());
}

at::Tensor Ctx::keep(at::Tensor t) {
  completion->keep.push_back(t);
  return t;
}

namespace {

// zcollAllToAllv over contiguous 1-D views, counts in elements (blocks back to back).
void allToAllv(const at::Tensor& src, const std::vector<int64_t>& sendElems, const at::Tensor& dst,
               const std::vector<int64_t>& recvElems, Ctx& c) {
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
        c.comm, c.name("zcollAllToAllv"));
}

at::Tensor single(std::vector<at::Tensor>& tensors) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "zcoll: expects exactly one tensor per call (got ",
                    tensors.size(), ")");
  checkTensor(tensors[0]);
  return tensors[0];
}

// The concatenation of flattened tensors (one buffer for a list operation).
at::Tensor cat(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> flat;
  for (const auto& t : ts) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// Splits `flat` back into `outs` (after the operation).
void uncat(const at::Tensor& flat, const std::vector<at::Tensor>& outs) {
  int64_t off = 0;
  for (const auto& o : outs) {
    o.copy_(flat.narrow(0, off, o.numel()).view(o.sizes()));
    off += o.numel();
  }
}

// The buffer a reduction reads: the scaled copy for PREMUL_SUM, else the caller's.
at::Tensor reduceInput(Ctx& c, const Reduction& r, const at::Tensor& t) {
  if (!r.scales()) return c.in(t);
  return c.made([&] { return r.scaled(t).contiguous(); });
}

}  // namespace

// ---- lifecycle ----------------------------------------------------------------------------

ZcollBackend::ZcollBackend(const std::string& uniqueId, int rank, int size, int timeoutSec,
                           const std::string& commName)
    : Backend(rank, size), commName_(commName), timeoutSec_(timeoutSec) {
  TORCH_CHECK(uniqueId.size() == ZCOLL_UNIQUE_ID_BYTES, "zcoll: bad unique id size");
  asyncHandling_ = asyncErrorHandlingFromEnv();  // alike on every rank, before any waits
  zcollUniqueId id;
  std::memcpy(id.internal, uniqueId.data(), ZCOLL_UNIQUE_ID_BYTES);
  zcollConfig_t config = ZCOLL_CONFIG_INITIALIZER;
  config.timeoutSec = timeoutSec;
  config.commName = commName_.c_str();
  zcollResult_t rc;
  {
    MaybeReleaseGil noGil;
    rc = zcollCommInitRankConfig(&comm_, size, id, rank, &config);
  }
  if (rc != zcollSuccess) throwZcoll(rc, nullptr, "zcollCommInitRankConfig");
  initAfterComm();
}

ZcollBackend::ZcollBackend(zcollComm_t comm, int rank, int size, int timeoutSec,
                           std::chrono::milliseconds workTimeout, const std::string& commName)
    : Backend(rank, size), comm_(comm), commName_(commName), timeoutSec_(timeoutSec) {
  if (workTimeout != ::kNoTimeout) workTimeoutMs_.store(workTimeout.count());
  try {
    asyncHandling_ = asyncErrorHandlingFromEnv();
  } catch (...) {
    zcollCommDestroy(comm_);
    throw;
  }
  initAfterComm();
}

void ZcollBackend::initAfterComm() {
  check(zcollCommNodeCount(comm_, &nodes_), comm_, "zcollCommNodeCount");
  startWatchdog();
}

ZcollBackend::~ZcollBackend() {
  shutdown();
  stopWatchdog();  // an abort from the watchdog itself left it to end on its own
}

// ---- the watchdog -------------------------------------------------------------------------

void ZcollBackend::startWatchdog() { watchdog_ = std::thread([this] { watchdogLoop(); }); }

void ZcollBackend::stopWatchdog() {
  {
    std::lock_guard<std::mutex> lock(watchdogMu_);
    watchdogStop_ = true;
  }
  watchdogWake_.notify_all();
  if (watchdog_.get_id() == std::this_thread::get_id()) return;  // it ends on its own
  MaybeReleaseGil noGil;  // it may be aborting the group, which may wait for a callback
  std::lock_guard<std::mutex> lock(watchdogJoinMu_);  // abort and shutdown on two threads
  if (watchdog_.joinable()) watchdog_.join();
}

void ZcollBackend::watchdogLoop() {
  std::unique_lock<std::mutex> lock(watchdogMu_);
  while (!watchdogWake_.wait_for(lock, kWatchdogInterval, [&] { return watchdogStop_; })) {
    lock.unlock();
    const bool goOn = watchdogLook();
    lock.lock();
    if (!goOn) break;
  }
}

namespace {
[[noreturn]] void endProcess(const std::string& comm) {
  std::fprintf(stderr, "zcoll: watchdog: ending the process (ZCOLL_TORCH_ASYNC_ERROR_HANDLING): "
               "the communicator %s failed\n", comm.c_str());
  std::fflush(stderr);
  std::abort();
}
}  // namespace

// zcollCommGetAsyncError is an atomic read under the handle's pin (src/api/comm.cc), which any
// thread may make; closeMu_ keeps the handles alive meanwhile.
bool ZcollBackend::watchdogLook() {
  zcollResult_t host = zcollSuccess, device = zcollSuccess;
  {
    std::lock_guard<std::mutex> lock(closeMu_);
    if (closed_.load()) return false;
    if (!hostErrorSeen_ && comm_ != nullptr) (void)zcollCommGetAsyncError(comm_, &host);
    if (!deviceErrorSeen_ && deviceComm_ != nullptr)
      (void)zcollCommGetAsyncError(deviceComm_, &device);
  }
  if (host == zcollSuccess && device == zcollSuccess) return true;
  const std::string deviceName = commName_ + ":cuda";
  if (device != zcollSuccess) {
    deviceErrorSeen_ = true;
    deviceWatch_->failOutstanding(asyncFailure(device, deviceName));
  }
  if (host != zcollSuccess) hostErrorSeen_ = true;
  const std::string& which = host != zcollSuccess ? commName_ : deviceName;
  const zcollResult_t rc = host != zcollSuccess ? host : device;
  static const char* const kActions[] = {
      "no handling (0): its Works and the next operation report it",
      "tear down (1): aborting the process group, then ending the process",
      "clean up only (2): aborting the process group",
      "skip clean up (3): ending the process"};
  TORCH_WARN("zcoll: watchdog: the communicator ", which, " failed: ", zcollGetErrorString(rc),
             " (", static_cast<int>(rc), "); the group's Works outstanding on it fail; "
             "ZCOLL_TORCH_ASYNC_ERROR_HANDLING=", asyncHandling_, ", ", kActions[asyncHandling_]);
  switch (asyncHandling_) {
    case 1:
      abort();
      endProcess(which);
    case 2:
      abort();
      return false;
    case 3:
      endProcess(which);
    default:
      return true;  // goes on watching the other communicator
  }
}

// Normal end (destroy_process_group calls it, then the destructor): what is issued runs first.
// Without the GIL: a completion callback may need it to drop a Python-owned tensor.
void ZcollBackend::shutdown() {
  stopWatchdog();  // before closeMu_, which its look takes
  std::lock_guard<std::mutex> lock(closeMu_);
  if (closed_.exchange(true)) return;
  MaybeReleaseGil noGil;
  reaper_->drain();
  if (deviceComm_) {
#ifdef ZCOLL_TORCH_CUDA
    synchronizeStreams();  // the CUDA operations ran: what the communicator says is final
#endif
    deviceWatch_->detach(deviceWatch_->asyncError());
    zcollCommDestroy(deviceComm_);
  }
  if (comm_) zcollCommDestroy(comm_);  // runs the requests still queued first
  deviceComm_ = comm_ = nullptr;
}

// Ends every operation now: queued requests complete with zcollRemoteError, running ones return
// it, peers see it.
void ZcollBackend::abort() {
  stopWatchdog();
  std::lock_guard<std::mutex> lock(closeMu_);
  if (closed_.exchange(true)) return;
  aborted_ = true;
  MaybeReleaseGil noGil;
  deviceWatch_->detach(abortedFailure());
  if (deviceComm_) zcollCommAbort(deviceComm_);
  if (comm_) zcollCommAbort(comm_);
  reaper_->drain();
  deviceComm_ = comm_ = nullptr;
}

// What a CUDA operation not settled when its communicator is aborted fails with: its device work
// is dropped or left undefined.
std::exception_ptr ZcollBackend::abortedFailure() {
  try {
    TORCH_CHECK_WITH(DistBackendError, false, "zcoll: the group's CUDA communicator was aborted "
                     "before this CUDA operation was known to have completed (its outputs are "
                     "undefined)");
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

zcollComm_t ZcollBackend::hostComm() const {
  TORCH_CHECK_WITH(DistBackendError, !closed_.load(), "zcoll: the process group was ",
                   aborted_ ? "aborted" : "shut down", " (its communicator is gone)");
  return comm_;
}

c10d::ErrorType ZcollBackend::getError() {
  std::lock_guard<std::mutex> lock(closeMu_);
  if (aborted_) return c10d::ErrorType::COMM_ERROR;
  for (zcollComm_t c : {comm_, deviceComm_}) {
    zcollResult_t async = zcollSuccess;
    if (c == nullptr || zcollCommGetAsyncError(c, &async) != zcollSuccess || async == zcollSuccess)
      continue;
    if (async == zcollTimeout) return c10d::ErrorType::TIMEOUT;
    if (async == zcollRemoteError) return c10d::ErrorType::REMOTE_ERROR;
    return c10d::ErrorType::COMM_ERROR;
  }
  return c10d::ErrorType::SUCCESS;
}

// ---- byte counters -------------------------------------------------------------------------

void ZcollBackend::waitIssued() {
  std::shared_ptr<Completion> last;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last = last_;
  }
  // Bounded by the communicator's timeout: a request that cannot finish fails, which completes
  // it.
  if (last) last->waitDone(::kNoTimeout);
}

zcollStats_t ZcollBackend::stats() {
  waitIssued();
  std::lock_guard<std::mutex> lock(closeMu_);
  zcollStats_t total{};
  total.size = sizeof(zcollStats_t);
  for (zcollComm_t c : {hostComm(), deviceComm_}) {
    if (c == nullptr) continue;
    zcollStats_t s{};
    s.size = sizeof(zcollStats_t);
    check(zcollCommGetStats(c, &s), c, "zcollCommGetStats");
    for (int p = 0; p < zcollNumPaths; ++p) {
      total.bytesSent[p] += s.bytesSent[p];
      total.bytesRecv[p] += s.bytesRecv[p];
    }
    total.opCount += s.opCount;
  }
  return total;
}

void ZcollBackend::resetStats() {
  waitIssued();
  std::lock_guard<std::mutex> lock(closeMu_);
  for (zcollComm_t c : {hostComm(), deviceComm_}) {
    if (c != nullptr) check(zcollCommResetStats(c), c, "zcollCommResetStats");
  }
}

// dist.set_timeout: bounds wait() of the operations issued after it (a wait that passes it
// raises, as Work.wait(timeout) does) and the communicators split from this group after it.
// ZCOLL_TIMEOUT, when set, governs instead (python/README.md, "Timeout").
void ZcollBackend::setTimeout(std::chrono::milliseconds timeout) {
  if (zcollTimeoutFromEnv()) {
    TORCH_WARN("zcoll: set_timeout(", timeout.count(), " ms) is ignored: ZCOLL_TIMEOUT is set "
               "and governs every wait of zcoll's groups; unset it to use torch's timeouts");
    return;
  }
  TORCH_CHECK_VALUE(timeout.count() > 0, "zcoll: set_timeout needs a positive timeout");
  workTimeoutMs_.store(timeout.count());
}

c10::intrusive_ptr<c10d::Backend::Options> ZcollBackend::getBackendOptions() {
  return c10::make_intrusive<Options>(
      "zcoll", std::chrono::milliseconds(static_cast<int64_t>(timeoutSec_) * 1000));
}

zcollConfig_t ZcollBackend::childConfig(const std::string& name, int* timeoutSec) const {
  zcollConfig_t config = ZCOLL_CONFIG_INITIALIZER;
  config.commName = name.c_str();
  *timeoutSec = timeoutSec_;
  int64_t ms = workTimeoutMs_.load();
  if (ms > 0 && !zcollTimeoutFromEnv())
    *timeoutSec = static_cast<int>(std::min<int64_t>((ms + 999) / 1000, 2147483647));
  config.timeoutSec = *timeoutSec;
  return config;
}

// ---- splitting and devices ----------------------------------------------------------------

c10::intrusive_ptr<c10d::Backend> ZcollBackend::split(
    const c10::intrusive_ptr<c10d::Store>&, const std::vector<int>& ranks,
    const c10::intrusive_ptr<Options>& opts) {
  // split_group gives the new group's name (torch's group_name) in opts.
  const std::string name = opts && !opts->group_name.empty() ? torchCommName(opts->group_name)
                                                              : commName_ + ".split";
  return splitAs(ranks, opts, name);
}

c10::intrusive_ptr<c10d::Backend> ZcollBackend::splitAs(const std::vector<int>& ranks,
                                                        const c10::intrusive_ptr<Options>& opts,
                                                        const std::string& name) {
  // torch's ProcessGroup::splitGroup calls split once per device type of the parent (cpu and
  // cuda both name this backend): a member's first result is reused for the second, but a
  // non-member's null result is not, so it calls again. Every call of one split_group carries
  // the same group_name (unique per split_group): the same name again gives the same result
  // without a second zcollCommSplit, which the other ranks would never match.
  const std::string groupName = opts ? opts->group_name : std::string();
  if (!groupName.empty() && groupName == lastSplitName_) return lastSplit_.lock();
  auto me = std::find(ranks.begin(), ranks.end(), rank_);
  for (int r : ranks)
    TORCH_CHECK_VALUE(r >= 0 && r < size_, "zcoll: split: rank ", r, " is not in the parent group "
                      "(size ", size_, ")");
  int color = me == ranks.end() ? ZCOLL_SPLIT_NOCOLOR : *std::min_element(ranks.begin(), ranks.end());
  int key = static_cast<int>(me - ranks.begin());
  int timeoutSec = 0;
  zcollConfig_t config = childConfig(name, &timeoutSec);
  std::chrono::milliseconds workTimeout = ::kNoTimeout;
  if (int64_t ms = workTimeoutMs_.load(); ms > 0) workTimeout = std::chrono::milliseconds(ms);
  if (opts && !zcollTimeoutFromEnv()) {  // the new group's timeout= (torch's default if none)
    timeoutSec = static_cast<int>(std::clamp<int64_t>(
        (opts->timeout.count() + 999) / 1000, 1, 2147483647));
    config.timeoutSec = timeoutSec;
  }
  zcollComm_t child = nullptr;
  zcollComm_t parent = hostComm();
  zcollResult_t rc;
  {
    MaybeReleaseGil noGil;  // collective: waits for the other ranks and the queued operations
    rc = zcollCommSplit(parent, color, key, &child, &config);
  }
  check(rc, parent, "zcollCommSplit");
  c10::intrusive_ptr<c10d::Backend> result;
  if (child != nullptr)
    result = c10::make_intrusive<ZcollBackend>(child, key, static_cast<int>(ranks.size()),
                                               timeoutSec, workTimeout, name);
  lastSplitName_ = groupName;
  lastSplit_ = c10::weak_intrusive_ptr<c10d::Backend>(result);
  return result;
}

void ZcollBackend::splitNoColor() {
  zcollComm_t parent = hostComm();
  zcollComm_t none = nullptr;
  zcollResult_t rc;
  {
    MaybeReleaseGil noGil;
    rc = zcollCommSplit(parent, ZCOLL_SPLIT_NOCOLOR, 0, &none, nullptr);
  }
  check(rc, parent, "zcollCommSplit");
}

// torch's shrink flags (torch.distributed.SHRINK_DEFAULT / SHRINK_ABORT).
constexpr int kTorchShrinkDefault = 0;
constexpr int kTorchShrinkAbort = 1;

c10::intrusive_ptr<c10d::Backend> ZcollBackend::shrinkGroup(
    const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
    const c10::intrusive_ptr<Options>& opts) {
  // Checked here, alike on every rank, before any exchange (dist.shrink_group checks the same
  // first; a direct call of Backend.shrink gets these messages).
  TORCH_CHECK_VALUE(shrinkFlags == kTorchShrinkDefault || shrinkFlags == kTorchShrinkAbort,
                    "zcoll: shrink: unknown shrink_flags ", shrinkFlags, " (SHRINK_DEFAULT = 0 "
                    "for a healthy group, SHRINK_ABORT = 1 for a broken one)");
  TORCH_CHECK_VALUE(!ranksToExclude.empty(), "zcoll: shrink: ranks_to_exclude is empty: name "
                    "the ranks of this group to leave out");
  std::vector<int> excluded;
  for (int64_t r : ranksToExclude) {
    TORCH_CHECK_VALUE(r >= 0 && r < size_, "zcoll: shrink: rank ", r, " in ranks_to_exclude is "
                      "not a rank of this group (size ", size_, ": ranks 0 to ", size_ - 1, ")");
    TORCH_CHECK_VALUE(std::find(excluded.begin(), excluded.end(), r) == excluded.end(),
                      "zcoll: shrink: rank ", r, " is repeated in ranks_to_exclude");
    excluded.push_back(static_cast<int>(r));
  }
  TORCH_CHECK_VALUE(static_cast<int>(excluded.size()) < size_, "zcoll: shrink: ranks_to_exclude "
                    "names every rank of this group (size ", size_, "): at least one must stay");
  TORCH_CHECK_VALUE(std::find(excluded.begin(), excluded.end(), rank_) == excluded.end(),
                    "zcoll: shrink: this rank (", rank_, ") is in ranks_to_exclude: only the "
                    "ranks that stay call shrink");
  {
    std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK(!batch_, "zcoll: shrink inside a coalescing block (end it first)");
  }
  int timeoutSec = 0;
  // torch names the shrunk group only once it exists (its description: "<group name>:shrunk").
  const std::string name = commName_ + ":shrunk";
  zcollConfig_t config = childConfig(name, &timeoutSec);
  std::chrono::milliseconds workTimeout = ::kNoTimeout;
  if (int64_t ms = workTimeoutMs_.load(); ms > 0) workTimeout = std::chrono::milliseconds(ms);
  if (opts && !zcollTimeoutFromEnv()) {  // shrink_group's pg_options: its timeout
    timeoutSec = static_cast<int>(std::clamp<int64_t>(
        (opts->timeout.count() + 999) / 1000, 1, 2147483647));
    config.timeoutSec = timeoutSec;
  }
  const bool abortFirst = shrinkFlags == kTorchShrinkAbort;
  zcollComm_t parent = hostComm();
  if (abortFirst) {
    // The group's CUDA communicator (split from this one at its first CUDA operation) is not
    // shrunk: it is ended now (its enqueued calls dropped, its peers told), and the new group
    // connects its own at its first CUDA operation, as a new group does. With SHRINK_DEFAULT
    // it is left to end with this group (destroy_process_group, which torch's shrink_group
    // calls once the new group exists).
    std::lock_guard<std::mutex> lock(closeMu_);
    if (deviceComm_) {
      MaybeReleaseGil noGil;
      deviceWatch_->detach(abortedFailure());
      zcollCommAbort(deviceComm_);
      deviceComm_ = nullptr;
    }
  }
  zcollComm_t child = nullptr;
  zcollResult_t rc;
  {
    MaybeReleaseGil noGil;  // collective over the ranks that stay
    rc = zcollCommShrink(parent, excluded.data(), static_cast<int>(excluded.size()), &child,
                         &config, abortFirst ? ZCOLL_SHRINK_ABORT : ZCOLL_SHRINK_DEFAULT);
  }
  check(rc, parent, "zcollCommShrink");
  TORCH_CHECK(child != nullptr, "zcoll: zcollCommShrink made no communicator for rank ", rank_);
  int newRank = -1, newSize = 0;
  if ((rc = zcollCommUserRank(child, &newRank)) != zcollSuccess ||
      (rc = zcollCommCount(child, &newSize)) != zcollSuccess) {
    std::exception_ptr error = zcollError(rc, child, "zcollCommUserRank/zcollCommCount");
    zcollCommDestroy(child);
    std::rethrow_exception(error);
  }
  return c10::make_intrusive<ZcollBackend>(child, newRank, newSize, timeoutSec, workTimeout,
                                           name);
}

void ZcollBackend::eagerConnectSingleDevice(at::Device device) {
  if (!device.is_cuda()) return;  // CPU tensors use the group's communicator
  deviceComm(device);
}

zcollComm_t ZcollBackend::deviceComm(c10::Device device) {
  std::lock_guard<std::mutex> lock(closeMu_);
  TORCH_CHECK_WITH(DistBackendError, !closed_.load(), "zcoll: the process group was ",
                   aborted_ ? "aborted" : "shut down", " (its communicator is gone)");
  if (deviceComm_) {
    TORCH_CHECK(device.index() == deviceIndex_, "zcoll: this process group runs its CUDA "
                "operations on cuda:", static_cast<int>(deviceIndex_), " (the device of its first "
                "CUDA tensor, or init_process_group's device_id); got a tensor on ", device,
                ": one CUDA device per process and group, as ProcessGroupNCCL");
    return deviceComm_;
  }
  deviceComm_ = connectDevice(device);
  deviceIndex_ = device.index();
  deviceCallsReturnComplete_ = deviceCallsReturnCompleteFromEnv();
  deviceWatch_->attach(deviceComm_, commName_ + ":cuda");
  deviceErrorSeen_ = false;  // a new CUDA communicator (after a SHRINK_ABORT): watched anew
  return deviceComm_;
}

zcollComm_t ZcollBackend::connectDevice(c10::Device device) {
#ifdef ZCOLL_TORCH_CUDA
  TORCH_CHECK(zcollTakesDeviceBuffers(), "zcoll: CUDA device ", device, " requested, but the "
              "libzcoll in this process takes no device buffers (see zcoll_info)");
  c10::cuda::CUDAGuard guard(device);
  // zcoll binds a communicator to the device current at its creation, once the process has
  // initialized it (an allocation does).
  C10_CUDA_CHECK(cudaFree(nullptr));
  int timeoutSec = 0;
  const std::string name = commName_ + ":cuda";
  zcollConfig_t config = childConfig(name, &timeoutSec);
  zcollComm_t dc = nullptr;
  zcollResult_t rc;
  {
    MaybeReleaseGil noGil;  // collective over the group's communicator
    rc = zcollCommSplit(comm_, 0, rank_, &dc, &config);
  }
  check(rc, comm_, "zcollCommSplit (connecting the group to its CUDA device: every rank of the "
        "group connects at its first CUDA operation of any kind, or at init_process_group with "
        "device_id, and waits for the others there)");
  return dc;
#else
  TORCH_CHECK(false, "zcoll: CUDA device ", device, " requested, but this build of zcoll's torch "
              "backend has no CUDA support (reinstall with pip install ./python where torch has "
              "CUDA and a CUDA toolkit is installed)");
#endif
}

// ---- memory -------------------------------------------------------------------------------

// Host memory only: FSDP2 asks per device (CPU is index -1).
bool ZcollBackend::supportsTensorAlloc(c10::DeviceIndex deviceIdx) { return deviceIdx < 0; }

at::Tensor ZcollBackend::allocateTensor(long size, at::TensorOptions options) {
  TORCH_CHECK(!options.has_device() || options.device().is_cpu(), "zcoll: allocate_tensor gives "
              "host memory (zcollMemAllocHost), not memory on ", options.device(),
              " (supports_tensor_alloc is true for the CPU only)");
  TORCH_CHECK_VALUE(size >= 0, "zcoll: allocate_tensor: negative size ", size);
  at::ScalarType dtype = options.has_dtype() ? options.dtype().toScalarType() : at::kFloat;
  int64_t bytes = static_cast<int64_t>(size) * static_cast<int64_t>(c10::elementSize(dtype));
  return hostBytes(bytes).view(dtype);
}

at::Tensor hostBytes(int64_t bytes) {
  TORCH_CHECK_VALUE(bytes >= 0, "zcoll.empty_host: the size must not be negative, got ", bytes, " bytes");
  void* p = nullptr;
  zcollResult_t rc = zcollMemAllocHost(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1)));
  if (rc != zcollSuccess) throwZcoll(rc, nullptr, "zcollMemAllocHost");
  return at::from_blob(p, {bytes}, [](void* q) { zcollMemFreeHost(q); },
                       at::TensorOptions().dtype(at::kByte));
}

// ---- issuing ------------------------------------------------------------------------------

c10::intrusive_ptr<Work> ZcollBackend::issue(OpType type, std::vector<at::Tensor> outputs,
                                             const std::vector<at::Tensor>& inputs, Job job,
                                             bool p2p) {
  c10::Device device = deviceOf(outputs, inputs);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (batch_) {  // inside startCoalescing / endCoalescing: joins the batch, returns its Work
      TORCH_CHECK_VALUE(!batch_->device || *batch_->device == device, "zcoll: the operations of one "
                        "coalesced batch must be on one device (got ", *batch_->device, " and ",
                        device, ")");
      batch_->device = device;
      batch_->work->addOutputs(outputs);
      batch_->inputs.insert(batch_->inputs.end(), inputs.begin(), inputs.end());
      batch_->jobs.push_back(std::move(job));
      if (!p2p) seq_.fetch_add(1);
      return batch_->work;
    }
  }
  if (!p2p) seq_.fetch_add(1);
  std::chrono::milliseconds timeout = ::kNoTimeout;
  if (int64_t ms = workTimeoutMs_.load(); ms > 0) timeout = std::chrono::milliseconds(ms);
  auto work = c10::make_intrusive<ZcollWork>(rank_, type, outputs, reaper_, timeout);
  std::vector<Job> jobs;
  jobs.push_back(std::move(job));
  launch(work, std::move(jobs), device, outputs, inputs);
  return work;
}

void ZcollBackend::launch(const c10::intrusive_ptr<ZcollWork>& work, std::vector<Job> jobs,
                          c10::Device device, const std::vector<at::Tensor>& outputs,
                          const std::vector<at::Tensor>& inputs) {
  reaper_->sweep();
#ifdef ZCOLL_TORCH_CUDA
  if (device.is_cuda()) {
    launchCuda(work, jobs, device, outputs, inputs);
    return;
  }
#else
  (void)outputs;
  (void)inputs;
#endif
  TORCH_CHECK(!device.is_cuda(), "zcoll: CUDA tensors need a CUDA build");
  launchHost(work, jobs);
}

// One zcoll group ended by zcollGroupEndNonBlocking: its collectives in call order, then its
// point-to-point operations together, in the communicator's order; the Work wraps the request.
void ZcollBackend::launchHost(const c10::intrusive_ptr<ZcollWork>& work,
                              const std::vector<Job>& jobs) {
  zcollComm_t comm = hostComm();
  Completion& completion = work->completion();
  completion.comm = comm;
  std::shared_ptr<Completion> before;
  {
    std::lock_guard<std::mutex> lock(mu_);
    before = last_;
    last_ = work->completionState();
  }
  Ctx c;
  c.comm = comm;
  c.completion = &completion;
  // A copy of the caller's tensors made now must see what the operations before wrote to them.
  if (before) c.beforeRead = [before] { before->waitDone(::kNoTimeout); };
  zcollRequest_t request = nullptr;
  bool open = false;
  try {
    check(zcollGroupStart(), comm, "zcollGroupStart");
    open = true;
    for (const auto& job : jobs) job(c);
    open = false;
    check(zcollGroupEndNonBlocking(&request), comm, "zcollGroupEndNonBlocking");
  } catch (...) {
    std::exception_ptr error = std::current_exception();
    if (open) {
      // A call the group rejected makes zcollGroupEnd run nothing of it; otherwise it runs what
      // was posted (blocking), so no rank is left waiting for this one.
      MaybeReleaseGil noGil;
      zcollGroupEnd();
    }
    work->finish(error);
    return;
  }
  work->start(request);
}

#ifdef ZCOLL_TORCH_CUDA
// On the group's stream of `device`, after what the caller's current stream holds now: the
// jobs' copies and zcoll calls are enqueued there (zcoll returns once enqueued), the copies back
// after them; the Work is complete on the host at once.
void ZcollBackend::launchCuda(const c10::intrusive_ptr<ZcollWork>& work,
                              const std::vector<Job>& jobs, c10::Device device,
                              const std::vector<at::Tensor>& outputs,
                              const std::vector<at::Tensor>& inputs) {
  checkNotCapturing(device, work->retrieveOpType());  // raises at once: nothing recorded
  std::exception_ptr error;
  try {
    zcollComm_t comm = deviceComm(device);
    CudaPlace place = cudaPlace(device, outputs, inputs);
    work->addCudaPlace(place);
    Completion& completion = work->completion();
    completion.comm = comm;
    c10::cuda::CUDAStreamGuard guard(place.stream);
    place.submitted->block(place.stream);
    Ctx c;
    c.comm = comm;
    c.stream = reinterpret_cast<zcollStream_t>(place.stream.stream());
    c.completion = &completion;
    {
      MaybeReleaseGil noGil;  // a zcoll call may wait for its turn on the communicator
      if (jobs.size() == 1) {
        jobs[0](c);
      } else {  // a batch: one zcoll group (point to point posted together at its end)
        check(zcollGroupStart(), comm, "zcollGroupStart");
        try {
          for (const auto& job : jobs) job(c);
        } catch (...) {
          zcollGroupEnd();
          throw;
        }
        check(zcollGroupEnd(), comm, "zcollGroupEnd");
      }
    }
    for (auto& copy : completion.after) copy();  // on the stream, after the operation
    completion.after.clear();
    place.done->record(place.stream);
    work->watchDevice(deviceWatch_, deviceCallsReturnComplete_);
  } catch (...) {
    error = std::current_exception();
  }
  work->finish(error);
}

// Marks the caller's current stream (the operation starts after it) and keeps the tensors'
// memory from being reused before the operation is done with it on the group's stream.
CudaPlace ZcollBackend::cudaPlace(c10::Device device, const std::vector<at::Tensor>& outputs,
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

namespace {
// cudaStreamIsCapturing (legal on a capturing stream; it records nothing). The legacy default
// stream answers cudaErrorStreamCaptureImplicit while another stream captures in global mode:
// capturing too.
bool isCapturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaError_t rc = cudaStreamIsCapturing(stream, &status);
  if (rc == cudaErrorStreamCaptureImplicit) {
    (void)cudaGetLastError();
    return true;
  }
  C10_CUDA_CHECK(rc);
  return status != cudaStreamCaptureStatusNone;
}
}  // namespace

// zcoll's device calls cannot be captured yet (zcoll.h): refused before the caller's stream or
// the group's gets an event, a wait or a call, so the capture stays valid.
void ZcollBackend::checkNotCapturing(c10::Device device, c10d::OpType type) {
  const bool current = isCapturing(at::cuda::getCurrentCUDAStream(device.index()).stream());
  std::optional<c10::cuda::CUDAStream> group;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(device.index());
    if (it != streams_.end()) group = it->second;
  }
  const bool own = group && isCapturing(group->stream());
  TORCH_CHECK(!current && !own, "zcoll: ", c10d::opTypeToString(type), " on CUDA tensors while ",
              current ? "the current stream" : "the process group's stream", " of ", device,
              " is being captured into a CUDA graph: zcoll's device calls cannot be captured "
              "yet; issue it outside the capture (torch.cuda.graph / make_graphed_callables). "
              "Nothing was recorded on the stream");
}

// Errors ignored: at interpreter exit CUDA may be going already.
void ZcollBackend::synchronizeStreams() {
  std::vector<c10::cuda::CUDAStream> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& entry : streams_) streams.push_back(entry.second);
  }
  for (const auto& st : streams) {
    if (cudaStreamSynchronize(st.stream()) != cudaSuccess) (void)cudaGetLastError();
  }
}

// The group's stream on `device` (one per device, from torch's pool, as ProcessGroupNCCL).
c10::cuda::CUDAStream ZcollBackend::streamOf(c10::Device device) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(device.index());
  if (it == streams_.end())
    it = streams_.emplace(device.index(), at::cuda::getStreamFromPool(false, device.index())).first;
  return it->second;
}
#endif

// Coalescing (torch's _coalescing_manager with a device, batch_isend_irecv): operations issued
// between start and end run as one zcoll group at end (collectives in call order, then the
// point-to-point ones together: a ring of sends cannot deadlock); every call in the batch
// returns the batch's Work.
void ZcollBackend::startCoalescing() {
  std::lock_guard<std::mutex> lock(mu_);
  TORCH_CHECK(!batch_, "zcoll: startCoalescing called twice without endCoalescing");
  batch_.emplace();
  std::chrono::milliseconds timeout = ::kNoTimeout;
  if (int64_t ms = workTimeoutMs_.load(); ms > 0) timeout = std::chrono::milliseconds(ms);
  batch_->work = c10::make_intrusive<ZcollWork>(rank_, OpType::COALESCED, std::vector<at::Tensor>{},
                                                reaper_, timeout);
}

c10::intrusive_ptr<Work> ZcollBackend::endCoalescing() {
  Batch batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK(batch_, "zcoll: endCoalescing without startCoalescing");
    batch = std::move(*batch_);
    batch_.reset();
  }
  if (batch.jobs.empty()) {  // nothing to run (torch's abort wraps its aborts in a batch)
    batch.work->finish(nullptr);
    return batch.work;
  }
  c10::Device device = batch.device.value_or(c10::Device(c10::kCPU));
  std::vector<at::Tensor> outputs = batch.work->completion().outputs;
  launch(batch.work, std::move(batch.jobs), device, outputs, batch.inputs);
  return batch.work;
}

// ---- operations ---------------------------------------------------------------------------

c10::intrusive_ptr<Work> ZcollBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                 const c10d::BroadcastOptions& opts) {
  at::Tensor t = single(tensors);
  int root = checkRoot(opts.rootRank, "broadcast");
  return issue(OpType::BROADCAST, {t}, {}, [=](Ctx& c) {
    at::Tensor buf = c.inout(t);
    check(zcollBroadcast(buf.data_ptr(), buf.data_ptr(), buf.numel(), toZcollType(buf), root,
                         c.comm, c.stream),
          c.comm, c.name("zcollBroadcast"));
  });
}

c10::intrusive_ptr<Work> ZcollBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                 const c10d::AllreduceOptions& opts) {
  at::Tensor t = single(tensors);
  Reduction red = toReduction(opts.reduceOp, t);
  return issue(OpType::ALLREDUCE, {t}, {}, [=](Ctx& c) {
    at::Tensor buf = red.scales() ? reduceInput(c, red, t) : c.inout(t);
    if (!buf.is_same(t) && red.scales()) c.after([t, buf] { t.copy_(buf); });
    check(zcollAllReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), toZcollType(buf), red.op,
                         c.comm, c.stream),
          c.comm, c.name("zcollAllReduce"));
  });
}

c10::intrusive_ptr<Work> ZcollBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  for (auto& t : tensors) checkTensor(t);
  std::vector<at::Tensor> ts = tensors;
  Reduction red = ts.empty() ? Reduction{} : toReduction(opts.reduceOp, ts[0]);
  bool oneType = std::all_of(ts.begin(), ts.end(), [&](const at::Tensor& t) {
    return t.scalar_type() == ts[0].scalar_type();
  });
  return issue(OpType::ALLREDUCE_COALESCED, ts, {}, [=](Ctx& c) {
    if (oneType && ts.size() > 1) {  // one call over the concatenation: one latency, not n
      at::Tensor buf = c.made([&] { return red.scaled(cat(ts)); });
      check(zcollAllReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), toZcollType(buf), red.op,
                           c.comm, c.stream),
            c.comm, c.name("zcollAllReduce"));
      c.after([buf, ts] { uncat(buf, ts); });
      return;
    }
    for (const auto& t : ts) {
      at::Tensor buf = red.scales() ? reduceInput(c, red, t) : c.inout(t);
      if (red.scales()) c.after([t, buf] { t.copy_(buf); });
      check(zcollAllReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), toZcollType(buf), red.op,
                           c.comm, c.stream),
            c.comm, c.name("zcollAllReduce"));
    }
  });
}

c10::intrusive_ptr<Work> ZcollBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(),
                    "zcoll: all_gather_into_tensor_coalesced needs as many outputs as inputs");
  for (size_t i = 0; i < inputs.size(); ++i)
    checkGatherShapes(outputs[i], inputs[i], "all_gather_into_tensor");
  std::vector<at::Tensor> outs = outputs, ins = inputs;
  return issue(OpType::COALESCED, outs, ins, [=](Ctx& c) {
    for (size_t i = 0; i < ins.size(); ++i) {
      at::Tensor src = c.in(ins[i]);
      at::Tensor dst = c.out(outs[i]);
      check(zcollAllGather(src.data_ptr(), dst.data_ptr(), src.numel(), toZcollType(src), c.comm,
                           c.stream),
            c.comm, c.name("zcollAllGather"));
    }
  });
}

c10::intrusive_ptr<Work> ZcollBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(),
                    "zcoll: reduce_scatter_tensor_coalesced needs as many outputs as inputs");
  std::vector<Reduction> reds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(outputs[i]);
    checkTensor(inputs[i]);
    TORCH_CHECK_VALUE(outputs[i].scalar_type() == inputs[i].scalar_type() &&
                          inputs[i].numel() == outputs[i].numel() * size_,
                      "zcoll: reduce_scatter_tensor_coalesced: input ", i,
                      " must have the output's dtype and world_size * its elements");
    reds.push_back(toReduction(opts.reduceOp, inputs[i]));
  }
  std::vector<at::Tensor> outs = outputs, ins = inputs;
  return issue(OpType::COALESCED, outs, ins, [=](Ctx& c) {
    for (size_t i = 0; i < ins.size(); ++i) {
      at::Tensor src = reduceInput(c, reds[i], ins[i]);
      at::Tensor dst = c.out(outs[i]);
      check(zcollReduceScatter(src.data_ptr(), dst.data_ptr(), dst.numel(), toZcollType(src),
                               reds[i].op, c.comm, c.stream),
            c.comm, c.name("zcollReduceScatter"));
    }
  });
}

c10::intrusive_ptr<Work> ZcollBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                       const c10d::AllgatherOptions&) {
  checkGatherShapes(output, input, "all_gather_into_tensor");
  at::Tensor out = output, in = input;
  return issue(OpType::_ALLGATHER_BASE, {out}, {in}, [=](Ctx& c) {
    at::Tensor src = c.in(in);
    at::Tensor dst = c.out(out);
    check(zcollAllGather(src.data_ptr(), dst.data_ptr(), src.numel(), toZcollType(src), c.comm,
                         c.stream),
          c.comm, c.name("zcollAllGather"));
  });
}

c10::intrusive_ptr<Work> ZcollBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                 std::vector<at::Tensor>& inputs,
                                                 const c10d::AllgatherOptions&) {
  at::Tensor in = single(inputs);
  TORCH_CHECK_VALUE(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                    "zcoll: allgather expects one list of world_size output tensors");
  std::vector<at::Tensor> outs = outputs[0];
  for (auto& o : outs) {
    checkTensor(o);
    TORCH_CHECK_VALUE(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                      "zcoll: allgather output tensors must match the input's size and dtype");
  }
  return issue(OpType::ALLGATHER, outs, {in}, [=, this](Ctx& c) {
    at::Tensor src = c.in(in);
    at::Tensor flat = c.keep(at::empty({size_ * src.numel()}, src.options()));
    check(zcollAllGather(src.data_ptr(), flat.data_ptr(), src.numel(), toZcollType(src), c.comm,
                         c.stream),
          c.comm, c.name("zcollAllGather"));
    c.after([flat, outs] { uncat(flat, outs); });
  });
}

c10::intrusive_ptr<Work> ZcollBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  checkTensor(output);
  checkTensor(input);
  TORCH_CHECK_TYPE(output.scalar_type() == input.scalar_type(),
                   "zcoll: reduce_scatter_tensor output and input dtypes differ (",
                   dtypeName(output.scalar_type()), " and ", dtypeName(input.scalar_type()), ")");
  TORCH_CHECK_VALUE(input.numel() == output.numel() * size_,
                    "zcoll: reduce_scatter_tensor input must have world_size * output.numel() "
                    "elements (got ", input.numel(), " vs ", output.numel(), " * ", size_, ")");
  Reduction red = toReduction(opts.reduceOp, input);
  at::Tensor out = output, in = input;
  return issue(OpType::_REDUCE_SCATTER_BASE, {out}, {in}, [=](Ctx& c) {
    at::Tensor src = reduceInput(c, red, in);
    at::Tensor dst = c.out(out);
    check(zcollReduceScatter(src.data_ptr(), dst.data_ptr(), dst.numel(), toZcollType(src), red.op,
                             c.comm, c.stream),
          c.comm, c.name("zcollReduceScatter"));
  });
}

c10::intrusive_ptr<Work> ZcollBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                      std::vector<std::vector<at::Tensor>>& inputs,
                                                      const c10d::ReduceScatterOptions& opts) {
  at::Tensor out = single(outputs);
  TORCH_CHECK_VALUE(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                    "zcoll: reduce_scatter expects one list of world_size input tensors");
  for (auto& i : inputs[0]) {
    checkTensor(i);
    TORCH_CHECK_VALUE(i.numel() == out.numel() && i.scalar_type() == out.scalar_type(),
                      "zcoll: reduce_scatter input tensors must match the output's size and dtype");
  }
  Reduction red = toReduction(opts.reduceOp, out);
  std::vector<at::Tensor> ins = inputs[0];
  return issue(OpType::REDUCE_SCATTER, {out}, ins, [=](Ctx& c) {
    at::Tensor src = c.made([&] { return red.scaled(cat(ins)); });
    at::Tensor dst = c.out(out);
    check(zcollReduceScatter(src.data_ptr(), dst.data_ptr(), dst.numel(), toZcollType(src), red.op,
                             c.comm, c.stream),
          c.comm, c.name("zcollReduceScatter"));
  });
}

std::vector<int64_t> ZcollBackend::splitsOrEqual(const std::vector<int64_t>& splits,
                                                 const at::Tensor& t) {
  if (!splits.empty()) {
    TORCH_CHECK_VALUE(static_cast<int>(splits.size()) == size_,
                      "zcoll: all_to_all_single split sizes must have world_size entries");
    int64_t sum = 0;
    for (auto v : splits) sum += v;
    TORCH_CHECK_VALUE(sum == (t.dim() ? t.size(0) : 1),
                      "zcoll: all_to_all_single split sizes must sum to the first dimension");
    return splits;
  }
  TORCH_CHECK_VALUE(t.size(0) % size_ == 0,
                    "zcoll: all_to_all_single without splits needs a first dimension divisible by "
                    "world_size");
  return std::vector<int64_t>(size_, t.size(0) / size_);
}

c10::intrusive_ptr<Work> ZcollBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                     std::vector<int64_t>& outSplits,
                                                     std::vector<int64_t>& inSplits,
                                                     const c10d::AllToAllOptions&) {
  checkTensor(output);
  checkTensor(input);
  TORCH_CHECK_TYPE(output.scalar_type() == input.scalar_type(),
                   "zcoll: all_to_all_single output and input dtypes differ (",
                   dtypeName(output.scalar_type()), " and ", dtypeName(input.scalar_type()), ")");
  at::Tensor out = output, in = input;
  if (outSplits.empty() && inSplits.empty()) {
    TORCH_CHECK_VALUE(in.numel() == out.numel() && in.size(0) % size_ == 0,
                      "zcoll: all_to_all_single needs equal-size tensors whose first dimension "
                      "divides by world_size");
    return issue(OpType::ALLTOALL_BASE, {out}, {in}, [=, this](Ctx& c) {
      at::Tensor src = c.in(in);
      at::Tensor dst = c.out(out);
      check(zcollAllToAll(src.data_ptr(), dst.data_ptr(), src.numel() / size_, toZcollType(src),
                          c.comm, c.stream),
            c.comm, c.name("zcollAllToAll"));
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
  return issue(OpType::ALLTOALL_BASE, {out}, {in}, [=](Ctx& c) {
    at::Tensor src = c.in(in);
    at::Tensor dst = c.out(out);
    allToAllv(src, sendElems, dst, recvElems, c);
  });
}

// all_to_all with tensor lists: tensors may differ in size per peer; one zcollAllToAllv over
// the concatenations.
c10::intrusive_ptr<Work> ZcollBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                std::vector<at::Tensor>& inputs,
                                                const c10d::AllToAllOptions&) {
  TORCH_CHECK_VALUE(static_cast<int>(outputs.size()) == size_ && static_cast<int>(inputs.size()) == size_,
                    "zcoll: all_to_all expects world_size output and world_size input tensors");
  std::vector<int64_t> sendElems, recvElems;
  int64_t total = 0;
  for (int p = 0; p < size_; ++p) {
    checkTensor(outputs[p]);
    checkTensor(inputs[p]);
    TORCH_CHECK_VALUE(outputs[p].scalar_type() == inputs[0].scalar_type() &&
                          inputs[p].scalar_type() == inputs[0].scalar_type(),
                      "zcoll: all_to_all tensors must all have one dtype");
    sendElems.push_back(inputs[p].numel());
    recvElems.push_back(outputs[p].numel());
    total += outputs[p].numel();
  }
  std::vector<at::Tensor> outs = outputs, ins = inputs;
  return issue(OpType::ALLTOALL, outs, ins, [=](Ctx& c) {
    at::Tensor src = c.made([&] { return cat(ins); });
    at::Tensor dst = c.keep(at::empty({total}, src.options()));
    allToAllv(src, sendElems, dst, recvElems, c);
    c.after([dst, outs] { uncat(dst, outs); });
  });
}

c10::intrusive_ptr<Work> ZcollBackend::reduce(std::vector<at::Tensor>& tensors,
                                              const c10d::ReduceOptions& opts) {
  at::Tensor t = single(tensors);
  Reduction red = toReduction(opts.reduceOp, t);
  int root = checkRoot(opts.rootRank, "reduce");
  return issue(OpType::REDUCE, {t}, {}, [=, this](Ctx& c) {
    at::Tensor buf = red.scales() ? reduceInput(c, red, t) : c.in(t);
    if (rank_ == root && !buf.is_same(t)) c.after([t, buf] { t.copy_(buf); });
    check(zcollReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), toZcollType(buf), red.op, root,
                      c.comm, c.stream),
          c.comm, c.name("zcollReduce"));
  });
}

int ZcollBackend::checkRoot(int64_t root, const char* what) const {
  TORCH_CHECK_VALUE(root >= 0 && root < size_, "zcoll: ", what, " root ", root,
                    " is not a rank of this group (size ", size_, ")");
  return static_cast<int>(root);
}

// The tensor list of a gather (outputs) or scatter (inputs): world_size tensors shaped like
// `like` on the root, none elsewhere.
std::vector<at::Tensor> ZcollBackend::rootList(const std::vector<std::vector<at::Tensor>>& lists,
                                               const at::Tensor& like, int root, const char* what,
                                               const char* kind) const {
  if (rank_ != root) {
    TORCH_CHECK_VALUE(lists.empty() || (lists.size() == 1 && lists[0].empty()), "zcoll: ", what,
                      ": only the root (rank ", root, ") passes ", kind, " tensors");
    return {};
  }
  TORCH_CHECK_VALUE(lists.size() == 1 && static_cast<int>(lists[0].size()) == size_, "zcoll: ", what,
                    " expects one list of world_size ", kind, " tensors on the root");
  for (const auto& t : lists[0]) {
    checkTensor(t);
    TORCH_CHECK_VALUE(t.numel() == like.numel() && t.scalar_type() == like.scalar_type(), "zcoll: ",
                      what, " ", kind, " tensors must match the other tensor's size and dtype");
  }
  return lists[0];
}

// gather / scatter: the list exists on the root only (torch passes an empty one elsewhere).
c10::intrusive_ptr<Work> ZcollBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                              std::vector<at::Tensor>& inputs,
                                              const c10d::GatherOptions& opts) {
  at::Tensor in = single(inputs);
  int root = checkRoot(opts.rootRank, "gather");
  std::vector<at::Tensor> outs = rootList(outputs, in, root, "gather", "output");
  return issue(OpType::GATHER, outs, {in}, [=, this](Ctx& c) {
    at::Tensor src = c.in(in);
    at::Tensor flat =
        rank_ == root ? c.keep(at::empty({size_ * src.numel()}, src.options())) : at::Tensor();
    check(zcollGather(src.data_ptr(), rank_ == root ? flat.data_ptr() : nullptr, src.numel(),
                      toZcollType(src), root, c.comm, c.stream),
          c.comm, c.name("zcollGather"));
    if (!outs.empty()) c.after([flat, outs] { uncat(flat, outs); });
  });
}

c10::intrusive_ptr<Work> ZcollBackend::scatter(std::vector<at::Tensor>& outputs,
                                               std::vector<std::vector<at::Tensor>>& inputs,
                                               const c10d::ScatterOptions& opts) {
  at::Tensor out = single(outputs);
  int root = checkRoot(opts.rootRank, "scatter");
  std::vector<at::Tensor> ins = rootList(inputs, out, root, "scatter", "input");
  return issue(OpType::SCATTER, {out}, ins, [=](Ctx& c) {
    at::Tensor src = ins.empty() ? at::Tensor() : c.made([&] { return cat(ins); });
    at::Tensor dst = c.out(out);
    check(zcollScatter(src.defined() ? src.data_ptr() : nullptr, dst.data_ptr(), dst.numel(),
                       toZcollType(dst), root, c.comm, c.stream),
          c.comm, c.name("zcollScatter"));
  });
}

// A one-byte all-reduce: zcollBarrier blocks its thread and is refused in a group, and a barrier
// of a group with CPU operations queued must come after them.
c10::intrusive_ptr<Work> ZcollBackend::barrier(const c10d::BarrierOptions&) {
  return issue(OpType::BARRIER, {}, {}, [](Ctx& c) {
    at::Tensor b = c.keep(at::zeros({1}, at::kByte));
    check(zcollAllReduce(b.data_ptr(), b.data_ptr(), 1, zcollUint8, zcollMax, c.comm, c.stream),
          c.comm, c.name("zcollAllReduce (barrier)"));
  });
}

// Point to point: the contiguous buffer is made at call time, so a send snapshots its data
// and a recv is copied back once it (or its batch) completes.
c10::intrusive_ptr<Work> ZcollBackend::send(std::vector<at::Tensor>& tensors, int dst, int) {
  at::Tensor t = single(tensors);
  at::Tensor buf = t.contiguous();
  return issue(
      OpType::SEND, {t}, {buf},
      [=](Ctx& c) {
        c.keep(buf);
        check(zcollSend(buf.data_ptr(), buf.numel(), toZcollType(buf), dst, c.comm, c.stream),
              c.comm, c.name("zcollSend"));
      },
      true);
}

c10::intrusive_ptr<Work> ZcollBackend::recv(std::vector<at::Tensor>& tensors, int src, int) {
  at::Tensor t = single(tensors);
  return issue(
      OpType::RECV, {t}, {},
      [=](Ctx& c) {
        at::Tensor buf = c.out(t);
        check(zcollRecv(buf.data_ptr(), buf.numel(), toZcollType(buf), src, c.comm, c.stream),
              c.comm, c.name("zcollRecv"));
      },
      true);
}

c10::intrusive_ptr<Work> ZcollBackend::recvAnysource(std::vector<at::Tensor>&, int) {
  TORCH_CHECK_VALUE(false, "zcoll: recv from any source is not supported (zcoll matches point-to-"
                           "point operations per (sender, receiver) pair); pass src");
}

// ---- ZeRO++ collectives -------------------------------------------------------------------

void ZcollBackend::checkGatherShapes(const at::Tensor& output, const at::Tensor& input,
                                     const char* what) {
  checkTensor(output);
  checkTensor(input);
  TORCH_CHECK_TYPE(output.scalar_type() == input.scalar_type(), "zcoll: ", what,
                   " output and input dtypes differ (", dtypeName(output.scalar_type()), " and ",
                   dtypeName(input.scalar_type()), ")");
  TORCH_CHECK_VALUE(output.numel() == input.numel() * size_, "zcoll: ", what,
                    " output must have world_size * input.numel() elements (got ", output.numel(),
                    " vs ", input.numel(), " * ", size_, ")");
}

void ZcollBackend::checkSecondary(const at::Tensor& secondary, const at::Tensor& input,
                                  const char* what) {
  checkTensor(secondary);
  TORCH_CHECK_TYPE(secondary.scalar_type() == input.scalar_type(), "zcoll: ", what,
                   " secondary and input dtypes differ (", dtypeName(secondary.scalar_type()),
                   " and ", dtypeName(input.scalar_type()), ")");
  TORCH_CHECK_VALUE(secondary.numel() == input.numel() * nodes_, "zcoll: ", what,
                    " secondary shard must have nodes * input.numel() elements (nodes ", nodes_,
                    ", got ", secondary.numel(), " vs ", input.numel(), ")");
}

c10::intrusive_ptr<Work> ZcollBackend::quantizedAllGather(at::Tensor output, at::Tensor input,
                                                          zcollQuantConfig_t quant) {
  checkGatherShapes(output, input, "quantized_all_gather");
  checkQuantizable(input, "quantized_all_gather");
  return issue(OpType::_ALLGATHER_BASE, {output}, {input}, [=](Ctx& c) {
    at::Tensor src = c.in(input);
    at::Tensor dst = c.out(output);
    check(zcollQuantizedAllGather(src.data_ptr(), dst.data_ptr(), src.numel(), toZcollType(src),
                                  &quant, c.comm, c.stream),
          c.comm, c.name("zcollQuantizedAllGather"));
  });
}

c10::intrusive_ptr<Work> ZcollBackend::allGatherHier(at::Tensor output, at::Tensor input,
                                                     std::optional<at::Tensor> secondary,
                                                     std::optional<zcollQuantConfig_t> quant) {
  checkGatherShapes(output, input, "all_gather_hier");
  if (quant) checkQuantizable(input, "all_gather_hier (quantized=True)");
  std::vector<at::Tensor> outs = {output};
  if (secondary) {
    checkSecondary(*secondary, input, "all_gather_hier");
    outs.push_back(*secondary);
  }
  return issue(OpType::_ALLGATHER_BASE, outs, {input}, [=](Ctx& c) {
    at::Tensor src = c.in(input);
    at::Tensor dst = c.out(output);
    at::Tensor sec = secondary ? c.out(*secondary) : at::Tensor();
    check(zcollAllGatherHier(src.data_ptr(), dst.data_ptr(),
                             sec.defined() ? sec.data_ptr() : nullptr, src.numel(),
                             toZcollType(src), quant ? &*quant : nullptr, c.comm, c.stream),
          c.comm, c.name("zcollAllGatherHier"));
  });
}

c10::intrusive_ptr<Work> ZcollBackend::allGatherFromSecondary(at::Tensor output,
                                                              at::Tensor secondary) {
  checkTensor(output);
  checkTensor(secondary);
  TORCH_CHECK_TYPE(output.scalar_type() == secondary.scalar_type(),
                   "zcoll: all_gather_from_secondary output and secondary dtypes differ (",
                   dtypeName(output.scalar_type()), " and ", dtypeName(secondary.scalar_type()),
                   ")");
  TORCH_CHECK_VALUE(secondary.numel() % nodes_ == 0 && output.numel() == secondary.numel() / nodes_ * size_,
                    "zcoll: all_gather_from_secondary needs a secondary shard of nodes * n elements "
                    "and an output of world_size * n (nodes ", nodes_, ", world_size ", size_,
                    ", got ", secondary.numel(), " and ", output.numel(), ")");
  return issue(OpType::_ALLGATHER_BASE, {output}, {secondary}, [=, this](Ctx& c) {
    at::Tensor sec = c.in(secondary);
    at::Tensor dst = c.out(output);
    check(zcollAllGatherFromSecondary(sec.data_ptr(), dst.data_ptr(), sec.numel() / nodes_,
                                      toZcollType(sec), c.comm, c.stream),
          c.comm, c.name("zcollAllGatherFromSecondary"));
  });
}

int ZcollBackend::localSize() {
  int n = 0;
  zcollComm_t comm = hostComm();
  check(zcollCommLocalSize(comm, &n), comm, "zcollCommLocalSize");
  return n;
}

// ---- Keep training after shrink_group ----------------------------------------------------------

namespace {

// The recovery calls take host buffers of one dtype.
void checkRecoveryTensors(const char* fn, std::initializer_list<const at::Tensor*> ts) {
  const at::Tensor* first = *ts.begin();
  for (const at::Tensor* t : ts) {
    checkTensor(*t);
    TORCH_CHECK_VALUE(t->device().is_cpu(), "zcoll: ", fn, " takes CPU tensors (a recovery "
                      "step: copy device shards to the host first), got one on ", t->device());
    TORCH_CHECK_VALUE(t->scalar_type() == first->scalar_type(), "zcoll: ", fn,
                      ": the tensors' dtypes differ");
  }
}

}  // namespace

void ZcollBackend::runBlocking(const char* name,
                               const std::function<zcollResult_t(zcollComm_t)>& call) {
  zcollComm_t comm = hostComm();
  waitIssued();
  zcollResult_t rc;
  {
    MaybeReleaseGil noGil;
    rc = call(comm);
  }
  check(rc, comm, name);
}

void ZcollBackend::rebuildFromSecondary(at::Tensor output, at::Tensor secondary,
                                        std::optional<at::Tensor> primary, int64_t shardNumel,
                                        int64_t totalNumel) {
  const char* fn = "rebuild_from_secondary";
  if (primary) checkRecoveryTensors(fn, {&output, &secondary, &*primary});
  else checkRecoveryTensors(fn, {&output, &secondary});
  TORCH_CHECK_VALUE(shardNumel >= 0 && totalNumel >= 0, "zcoll: ", fn, ": shard_numel and "
                    "total_numel must not be negative");
  at::Tensor sec = secondary.contiguous();
  at::Tensor prim = primary ? primary->contiguous() : at::Tensor();
  at::Tensor dst = output.contiguous();
  runBlocking("zcollRebuildFromSecondary", [&](zcollComm_t comm) {
    return zcollRebuildFromSecondary(primary ? prim.data_ptr() : nullptr, sec.data_ptr(),
                                     shardNumel, dst.data_ptr(), dst.numel(), totalNumel,
                                     toZcollType(dst), nullptr, comm, nullptr);
  });
  if (!dst.is_same(output)) output.copy_(dst);
}

void ZcollBackend::rebuildFromBuddy(at::Tensor output, at::Tensor primary, at::Tensor copy,
                                    int64_t totalNumel) {
  const char* fn = "rebuild_from_buddy";
  checkRecoveryTensors(fn, {&output, &primary, &copy});
  TORCH_CHECK_VALUE(totalNumel >= 0, "zcoll: ", fn, ": total_numel must not be negative");
  at::Tensor prim = primary.contiguous(), cp = copy.contiguous(), dst = output.contiguous();
  runBlocking("zcollRebuildFromBuddy", [&](zcollComm_t comm) {
    return zcollRebuildFromBuddy(prim.data_ptr(), cp.data_ptr(), prim.numel(), dst.data_ptr(),
                                 dst.numel(), totalNumel, toZcollType(dst), nullptr, comm,
                                 nullptr);
  });
  if (!dst.is_same(output)) output.copy_(dst);
}

void ZcollBackend::buddyCopy(at::Tensor copy, at::Tensor shard) {
  checkRecoveryTensors("buddy_copy", {&copy, &shard});
  TORCH_CHECK_VALUE(copy.numel() == buddyCopyNumel(shard.numel()), "zcoll: buddy_copy needs a "
                    "copy of buddy_copy_numel(shard.numel()) = ", buddyCopyNumel(shard.numel()),
                    " elements, got ", copy.numel());
  at::Tensor src = shard.contiguous(), dst = copy.contiguous();
  runBlocking("zcollBuddyCopy", [&](zcollComm_t comm) {
    return zcollBuddyCopy(src.data_ptr(), dst.data_ptr(), src.numel(), toZcollType(src), comm,
                          nullptr);
  });
  if (!dst.is_same(copy)) copy.copy_(dst);
}

int64_t ZcollBackend::buddyCopyNumel(int64_t numel) {
  TORCH_CHECK_VALUE(numel >= 0, "zcoll: buddy_copy_numel: numel must not be negative");
  size_t n = 0;
  zcollComm_t comm = hostComm();
  check(zcollBuddyCopyCount(comm, static_cast<size_t>(numel), &n), comm, "zcollBuddyCopyCount");
  return static_cast<int64_t>(n);
}

c10::intrusive_ptr<Work> ZcollBackend::quantizedReduceScatter(at::Tensor output, at::Tensor input,
                                                              const c10d::ReduceOp& reduceOp,
                                                              zcollQuantConfig_t quant) {
  checkTensor(output);
  checkTensor(input);
  TORCH_CHECK_TYPE(output.scalar_type() == input.scalar_type(),
                   "zcoll: quantized_reduce_scatter output and input dtypes differ (",
                   dtypeName(output.scalar_type()), " and ", dtypeName(input.scalar_type()), ")");
  TORCH_CHECK_VALUE(input.numel() == output.numel() * size_,
                    "zcoll: quantized_reduce_scatter input must have world_size * output.numel() "
                    "elements (got ", input.numel(), " vs ", output.numel(), " * ", size_, ")");
  TORCH_CHECK_VALUE(reduceOp.op_ == c10d::ReduceOp::SUM || reduceOp.op_ == c10d::ReduceOp::AVG ||
                        reduceOp.op_ == c10d::ReduceOp::PREMUL_SUM,
                    "zcoll: quantized_reduce_scatter takes ReduceOp.SUM, AVG or PREMUL_SUM, got ",
                    reduceOpName(reduceOp));
  checkQuantizable(input, "quantized_reduce_scatter");
  Reduction red = toReduction(reduceOp, input);
  return issue(OpType::_REDUCE_SCATTER_BASE, {output}, {input}, [=](Ctx& c) {
    at::Tensor src = reduceInput(c, red, input);
    at::Tensor dst = c.out(output);
    check(zcollQuantizedReduceScatter(src.data_ptr(), dst.data_ptr(), dst.numel(),
                                      toZcollType(src), red.op, &quant, c.comm, c.stream),
          c.comm, c.name("zcollQuantizedReduceScatter"));
  });
}


namespace {

// zcoll's type of a dtype the quantized collectives take; TypeError for any other.
zcollDataType_t quantizableType(at::ScalarType dtype, const char* what) {
  switch (dtype) {
    case at::kFloat: return zcollFloat32;
    case at::kHalf: return zcollFloat16;
    case at::kBFloat16: return zcollBfloat16;
    default:
      TORCH_CHECK_TYPE(false, "zcoll: ", what, " quantizes torch.float32, torch.float16 or "
                       "torch.bfloat16 tensors, got ", dtypeName(dtype));
  }
}

}  // namespace

int64_t ZcollBackend::quantizedAllReduceResidualBytes(int64_t numel, at::ScalarType dtype,
                                                      zcollQuantConfig_t quant) {
  TORCH_CHECK_VALUE(numel >= 0, "zcoll: quantized_all_reduce residual_size: numel must not be "
                    "negative (got ", numel, ")");
  const zcollDataType_t type = quantizableType(dtype, "quantized_all_reduce");
  // A local query (zcoll.h): it returns at once, also while this group's calls are queued.
  size_t bytes = 0;
  zcollComm_t comm = hostComm();
  check(zcollQuantizedAllReduceResidualSize(static_cast<size_t>(numel), type, &quant, comm, &bytes),
        comm, "zcollQuantizedAllReduceResidualSize");
  return static_cast<int64_t>(bytes);
}

c10::intrusive_ptr<Work> ZcollBackend::quantizedAllReduce(at::Tensor tensor,
                                                          const c10d::ReduceOp& reduceOp,
                                                          zcollQuantConfig_t quant,
                                                          std::optional<at::Tensor> residual) {
  checkTensor(tensor);
  TORCH_CHECK_VALUE(reduceOp.op_ == c10d::ReduceOp::SUM || reduceOp.op_ == c10d::ReduceOp::AVG ||
                        reduceOp.op_ == c10d::ReduceOp::PREMUL_SUM,
                    "zcoll: quantized_all_reduce takes ReduceOp.SUM, AVG or PREMUL_SUM, got ",
                    reduceOpName(reduceOp));
  checkQuantizable(tensor, "quantized_all_reduce");
  std::vector<at::Tensor> inputs;
  if (residual) {
    checkTensor(*residual);
    TORCH_CHECK_TYPE(residual->scalar_type() == at::kByte || residual->scalar_type() == at::kFloat,
                     "zcoll: quantized_all_reduce residual must be a torch.uint8 or torch.float32 "
                     "tensor, got ", dtypeName(residual->scalar_type()));
    TORCH_CHECK_VALUE(residual->device() == tensor.device(), "zcoll: quantized_all_reduce "
                      "residual must be on the tensor's device (", tensor.device(), "), got ",
                      residual->device());
    TORCH_CHECK_VALUE(residual->is_contiguous(), "zcoll: quantized_all_reduce residual must be "
                      "contiguous (it is zcoll's state, kept between calls)");
    const int64_t want = quantizedAllReduceResidualBytes(tensor.numel(), tensor.scalar_type(), quant);
    TORCH_CHECK_VALUE(residual->nbytes() == static_cast<size_t>(want), "zcoll: "
                      "quantized_all_reduce residual has ", residual->nbytes(), " bytes, but "
                      "error feedback for ", tensor.numel(), " elements on this group needs ",
                      want, " (zcoll.zeropp.residual_size)");
    // Written by the call but not part of its result: the future's value is the tensor only.
    inputs.push_back(*residual);
  }
  Reduction red = toReduction(reduceOp, tensor);
  return issue(OpType::ALLREDUCE, {tensor}, inputs, [=](Ctx& c) {
    at::Tensor buf = red.scales() ? reduceInput(c, red, tensor) : c.inout(tensor);
    if (!buf.is_same(tensor) && red.scales()) c.after([tensor, buf] { tensor.copy_(buf); });
    if (!residual) {
      check(zcollQuantizedAllReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(),
                                    toZcollType(buf), red.op, &quant, c.comm, c.stream),
            c.comm, c.name("zcollQuantizedAllReduce"));
      return;
    }
    at::Tensor res = c.keep(*residual);
    check(zcollQuantizedAllReduceWithResidual(buf.data_ptr(), buf.data_ptr(), buf.numel(),
                                              toZcollType(buf), red.op, &quant, res.data_ptr(),
                                              res.nbytes(), c.comm, c.stream),
          c.comm, c.name("zcollQuantizedAllReduceWithResidual"));
  });
}

}  // namespace zcoll_torch
