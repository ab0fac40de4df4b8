#include "trigger/proxy.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/tags.h"
#include "coll/coll.h"
#include "core/progress.h"
#include "exec/device_component.h"
#include "trigger/handshake.h"

namespace zcoll {

namespace {

using Clock = std::chrono::steady_clock;

size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

uint32_t load(const uint32_t* w) { return __atomic_load_n(w, __ATOMIC_ACQUIRE); }
void store(uint32_t* w, uint32_t v) { __atomic_store_n(w, v, __ATOMIC_RELEASE); }

// Polls *word (a host load, no CUDA call) until it has a bit of `mask`; fails on an abort, once
// the comm is broken, or past `deadline`, naming `what`.
Result waitForBits(zcollComm* comm, const uint32_t* word, uint32_t mask, Clock::time_point deadline,
                   const char* what) {
  auto pause = std::chrono::microseconds(5);
  while ((load(word) & mask) == 0) {
    if (comm->aborting.load(std::memory_order_relaxed))
      return fail(zcollRemoteError, "communicator %s was aborted", comm->name.c_str());
    const Result broken = static_cast<Result>(comm->asyncError.load());
    if (broken != zcollSuccess)
      return fail(broken, "stream-triggered calls: the communicator broke while the proxy waited "
                  "for %s", what);
    if (Clock::now() > deadline)
      return fail(zcollTimeout, "stream-triggered calls: the proxy of rank %d waited more than "
                  "%d s for %s (the rank's stream did not get there: it is stuck, or waits for "
                  "work queued before the call)", comm->rank, comm->timeoutSec, what);
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(500));
  }
  return zcollSuccess;
}

}  // namespace

ProxyStep ProxyStep::gather(const std::vector<size_t>& bytes, int me) {
  ProxyStep s;
  s.toRank.assign(bytes.size(), bytes[me]);
  s.fromRank = bytes;
  return s;
}

ProxyStep ProxyStep::uniform(int nranks, size_t bytes) {
  return gather(std::vector<size_t>(static_cast<size_t>(nranks), bytes), 0);
}

ProxyStep ProxyStep::parts(size_t stride, const std::vector<size_t>& bytes, int me) {
  ProxyStep s;
  s.stride = stride;
  s.toRank = bytes;
  s.fromRank.assign(bytes.size(), bytes[me]);
  return s;
}

Result TriggerProxy::make(const std::vector<int>& remote, int nranks, size_t slotBytes,
                          std::unique_ptr<TriggerProxy>* out) {
  std::unique_ptr<TriggerProxy> p(new TriggerProxy());
  p->remote_ = remote;
  p->remoteIndex_.assign(nranks, -1);
  for (size_t i = 0; i < remote.size(); ++i) p->remoteIndex_[remote[i]] = static_cast<int>(i);
  p->slotBytes_ = slotBytes;
  const size_t words = roundUp((3 + 2 * remote.size()) * sizeof(uint32_t), 64);
  const size_t page = 4096;
  p->bytes_ = roundUp(words + 2 * slotBytes * (1 + remote.size()), page);
  void* m = mmap(nullptr, p->bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    return fail(zcollSystemError, "mmap of %zu bytes (stream-triggered calls' inter-node "
                "buffers): %s", p->bytes_, strerror(errno));
  p->base_ = static_cast<char*>(m);
  p->words_ = reinterpret_cast<uint32_t*>(p->base_);
  p->outboxes_ = p->base_ + words;
  p->inboxes_ = p->outboxes_ + 2 * slotBytes;
  for (int k = 0; k < 2; ++k) {
    store(p->outFull(k), kEmpty);
    for (int r : remote) store(p->inFull(k, r), kEmpty);
  }
  const DeviceComponent* dc = deviceComponent();
  if (dc == nullptr || dc->registerHostMemory == nullptr)
    return fail(zcollUnsupported, "the device component registers no host memory");
  ZCOLL_CHECK(dc->registerHostMemory(p->base_, p->bytes_));
  p->registered_ = true;
  *out = std::move(p);
  return zcollSuccess;
}

TriggerProxy::~TriggerProxy() {
  if (registered_) {
    const DeviceComponent* dc = deviceComponent();
    if (dc != nullptr && dc->unregisterHostMemory != nullptr) dc->unregisterHostMemory(base_);
  }
  if (base_ != nullptr) munmap(base_, bytes_);
}

Result TriggerProxy::waitOutboxFree(Executor& ex, int slot) {
  return ex.waitBits(outFull(slot), kEmpty);
}

Result TriggerProxy::publish(Executor& ex, const char* from, const ProxyStep& step) {
  const int slot = step.slot;
  if (step.stride == 0) {
    size_t piece = 0;
    for (int r : remote_) piece = std::max(piece, step.toRank[r]);
    if (piece > 0) ZCOLL_CHECK(ex.copy(outbox(slot), from, piece));
  } else {
    for (int r : remote_)
      if (step.toRank[r] > 0)
        ZCOLL_CHECK(ex.copy(outbox(slot) + r * step.stride, from + r * step.stride,
                            step.toRank[r]));
  }
  ZCOLL_CHECK(ex.writeValue(outFull(slot), kFull));
  steps_.push_back(step);
  return zcollSuccess;
}

Result TriggerProxy::awaitInbox(Executor& ex, int slot, int peer) {
  return ex.waitBits(inFull(slot, peer), kFull);
}

Result TriggerProxy::finish(Executor& ex, int slot) {
  for (int r : remote_) ZCOLL_CHECK(ex.writeValue(inFull(slot, r), kEmpty));
  return zcollSuccess;
}

Result TriggerProxy::endCall(Executor& ex) {
  return ex.writeValue(done(), issued_.fetch_add(1) + 1);
}

std::vector<ProxyStep> TriggerProxy::takeSteps() {
  std::vector<ProxyStep> taken;
  taken.swap(steps_);
  return taken;
}

Result TriggerProxy::serveStep(zcollComm* comm, uint32_t seq, uint32_t index,
                               const ProxyStep& step) {
  const auto deadline = Clock::now() + std::chrono::seconds(comm->timeoutSec);
  const int k = step.slot;
  for (int r : remote_)
    ZCOLL_CHECK(waitForBits(comm, inFull(k, r), kEmpty, deadline, "an inbox to be read"));
  const size_t recvAt = step.stride * static_cast<size_t>(comm->rank);
  RequestList reqs(2 * remote_.size());
  // No message where a step moves nothing (a rail step's other ranks, empty pieces): both ends
  // know it from the same schedule.
  for (int r : remote_)
    if (step.fromRank[r] > 0)
      ZCOLL_CHECK(postRecv(comm, r, inboxFor(k, r) + recvAt, step.fromRank[r],
                           makeCollTag(seq, r, index), reqs.next()));
  ZCOLL_CHECK(waitForBits(comm, outFull(k), kFull, deadline, "its outbox to be filled"));
  for (int r : remote_)
    if (step.toRank[r] > 0)
      ZCOLL_CHECK(postSend(comm, r, outbox(k) + step.stride * static_cast<size_t>(r),
                           step.toRank[r], makeCollTag(seq, comm->rank, index), reqs.next()));
  ZCOLL_CHECK(waitAll(comm, reqs.data(), reqs.size()));
  reqs.clear();
  for (int r : remote_) store(inFull(k, r), kFull);
  store(outFull(k), kEmpty);
  return zcollSuccess;
}

Result TriggerProxy::serve(zcollComm* comm, uint32_t seq, const std::vector<ProxyStep>& steps) {
  for (size_t i = 0; i < steps.size(); ++i)
    ZCOLL_CHECK(serveStep(comm, seq, static_cast<uint32_t>(i), steps[i]));
  return zcollSuccess;
}

void TriggerProxy::releaseWaits() {
  for (int k = 0; k < 2; ++k) {
    store(outFull(k), kReleased);
    for (int r : remote_) store(inFull(k, r), kReleased);
  }
}

bool TriggerProxy::allCallsEnded() const {
  return static_cast<int32_t>(load(done()) - issued_.load()) >= 0;
}

bool TriggerProxy::outboxesSent() const {
  return (load(outFull(0)) & kEmpty) != 0 && (load(outFull(1)) & kEmpty) != 0;
}

}  // namespace zcoll
