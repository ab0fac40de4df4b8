#include "trigger/ring.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "base/log.h"
#include "base/stream_holds.h"
#include "coll/coll.h"
#include "coll/in_place.h"
#include "core/progress.h"
#include "exec/device_component.h"

namespace zcoll {

namespace {

// Below this a window's slots are too small to be worth a step each.
constexpr size_t kMinWindowBytes = size_t{1} << 20;

// Why `comm` cannot run stream-triggered calls, from what every rank knows alike (the comm's
// settings, layout and peers), or "" when it can. What only a node knows (its cuda_ipc routes
// and windows) each rank checks in make() and tells the others.
std::string ineligible(const zcollComm* comm) {
  if (!comm->deviceCallsTriggered) return "ZCOLL_DEVICE_CALLS is not stream";
  if (comm->nranks < 2) return "a single rank";
  for (const std::vector<int>& node : comm->layout.members)
    if (node.size() < 2) return "a node with a single rank (each node needs two or more)";
  const DeviceComponent* dc = deviceComponent();
  if (dc == nullptr || dc->registerHostMemory == nullptr)
    return "the device component registers no host memory";
  for (int r = 0; r < comm->nranks; ++r) {
    const PeerInfo& a = comm->peers[r];
    if (!a.device.present) return "rank " + std::to_string(r) + " has no device";
    for (int q = 0; q < r; ++q) {
      const PeerInfo& b = comm->peers[q];
      // Two ranks of one process on one device share its hardware queues: one's wait could
      // sit in front of the write the other queues after it.
      if (a.machineHash == b.machineHash && a.pid == b.pid && a.device.ordinal == b.device.ordinal)
        return "ranks " + std::to_string(q) + " and " + std::to_string(r) +
               " are one process on one device";
    }
  }
  return "";
}

// This rank's node's cuda_ipc peer memory and the window it can own, or why its node does not
// qualify ("" when it does).
std::string nodeWindow(const zcollComm* comm, const std::vector<int>& node, PeerMemory** pm,
                       size_t* windowBytes) {
  *pm = peerMemoryOf(comm, makeGroup(comm, node), MemKind::kDevice);
  if (*pm == nullptr) return "not every pair of ranks of a node reaches each other through cuda_ipc";
  *windowBytes = (*pm)->windowLimit(node);
  if (*windowBytes < kMinWindowBytes)
    return "cuda_ipc windows smaller than 1 MiB (ZCOLL_DEVICE_WINDOW_BYTES)";
  return "";
}

// What each rank tells the others, twice (a host all-gather over the comm).
struct Offer {
  int32_t pid;
  int32_t fd;  // a node's first rank: its flags' memfd
  int32_t ok;
  int32_t pad;
  uint64_t windowBytes;  // its window's size (the slots are cut from the smallest)
  ExposedRange window;
};

Result tradeOffers(zcollComm* comm, const Offer& mine, std::vector<Offer>* all) {
  all->assign(comm->nranks, Offer{});
  CollArgs a{&mine, all->data(), sizeof(Offer), zcollUint8, zcollSum, 0};
  return allGatherRing(comm, a);
}

bool allOk(const std::vector<Offer>& offers) {
  for (const Offer& o : offers)
    if (!o.ok) return false;
  return true;
}

}  // namespace

Result TriggerRing::open(zcollComm* comm, int flagsPid, int flagsFd, PeerMemory* pm,
                         const std::vector<ExposedRange>& windows) {
  if (me_ != local_[0]) ZCOLL_CHECK(flags_.open(flagsPid, flagsFd, flagWords(local_.size())));
  std::vector<int> remote;
  for (int r = 0; r < n_; ++r)
    if (!isLocal(r)) remote.push_back(r);
  // Registering synchronizes the device: only while no stream of this process is held.
  ZCOLL_CHECK(streams::whenNoneHeld(timeoutMs_, "registering the trigger flags", [&]() -> Result {
    ZCOLL_CHECK(flags_.registerWithDevice());
    if (remote.empty()) return zcollSuccess;
    return TriggerProxy::make(remote, n_, slotBytes_, &proxy_);
  }));
  peerWindows_.assign(n_, nullptr);
  for (int p : local_) {
    if (p == me_) {
      peerWindows_[p] = window_;
      continue;
    }
    ZCOLL_CHECK(pm->mapWindow(p, windows[p], &peerWindows_[p]));
  }
  (void)comm;
  return zcollSuccess;
}

Result TriggerRing::make(zcollComm* comm, std::shared_ptr<TriggerRing>* out, std::string* why) {
  out->reset();
  *why = ineligible(comm);
  if (!why->empty()) return zcollSuccess;
  std::shared_ptr<TriggerRing> ring(new TriggerRing());
  ring->n_ = comm->nranks;
  ring->me_ = comm->rank;
  ring->timeoutMs_ = comm->timeoutSec * 1000;
  ring->aborting_ = &comm->aborting;
  ring->local_ = comm->layout.nodeGroup(comm->rank);
  ring->localOf_.assign(ring->n_, -1);
  for (size_t i = 0; i < ring->local_.size(); ++i) ring->localOf_[ring->local_[i]] = int(i);
  ring->members_ = comm->layout.members;
  ring->nodeOf_ = comm->layout.nodeOf;
  ring->equalNodes_ = true;
  for (const std::vector<int>& node : ring->members_)
    ring->equalNodes_ = ring->equalNodes_ && node.size() == ring->local_.size();
  const int leader = ring->local_[0];

  // Round 1: each node's flags (its first rank makes them), every rank's window.
  Offer mine{getpid(), -1, 1, 0, 0, {}};
  PeerMemory* pm = nullptr;
  size_t windowBytes = 0;
  std::string failure = nodeWindow(comm, ring->local_, &pm, &windowBytes);
  Result r = failure.empty() ? zcollSuccess : zcollUnsupported;
  if (r == zcollSuccess && ring->me_ == leader) {
    r = ring->flags_.create(flagWords(ring->local_.size()));
    if (r == zcollSuccess)  // every slot starts read (the node's peers open it later)
      for (size_t w = 0; w < flagWords(ring->local_.size()); ++w)
        *ring->flags_.word(w) = kEmpty;
  }
  if (r == zcollSuccess) r = pm->ownWindow(windowBytes, &ring->window_, &mine.window);
  if (r != zcollSuccess) {
    mine.ok = 0;
    if (failure.empty()) failure = threadLastError();
  }
  mine.fd = ring->flags_.fd();
  mine.windowBytes = windowBytes;
  std::vector<Offer> offers;
  ZCOLL_CHECK(tradeOffers(comm, mine, &offers));
  if (!allOk(offers)) {
    *why = failure.empty() ? "another rank could not make its part" : failure;
    return zcollSuccess;
  }
  // Slots alike on every rank (steps of other nodes' ranks are as long): from the smallest
  // window, a quarter for the accumulator, the rest in two slots (64-byte aligned).
  uint64_t smallest = windowBytes;
  for (const Offer& o : offers) smallest = std::min(smallest, o.windowBytes);
  ring->accBytes_ = smallest / 4 / 64 * 64;
  ring->slotBytes_ = (smallest - ring->accBytes_) / 2 / 64 * 64;
  // Round 2: every rank opens and registers its node's flags, maps its node peers' windows and
  // makes its inter-node buffers.
  std::vector<ExposedRange> windows;
  for (const Offer& o : offers) windows.push_back(o.window);
  r = ring->open(comm, offers[leader].pid, offers[leader].fd, pm, windows);
  Offer opened{getpid(), -1, r == zcollSuccess ? 1 : 0, 0, 0, {}};
  if (r != zcollSuccess) failure = threadLastError();
  std::vector<Offer> verdicts;
  ZCOLL_CHECK(tradeOffers(comm, opened, &verdicts));
  if (!allOk(verdicts)) {
    *why = failure.empty() ? "another rank could not open the flags or map a window" : failure;
    return zcollSuccess;
  }
  *out = std::move(ring);
  return zcollSuccess;
}

TriggerRing::~TriggerRing() {
  if (next_ == 0 || drain(timeoutMs_) == zcollSuccess) return;
  if (drain(timeoutMs_, /*release=*/true) == zcollSuccess) return;
  ZCOLL_WARN(LogSubsys::kColl, "stream-triggered calls: a stream never got past its last step; "
             "the flags (and inter-node buffers) stay mapped for the rest of the process");
  flags_.abandon();
  (void)proxy_.release();  // kept, as the flags: a stream may still read them
}

Result TriggerRing::join(Executor& ex, bool capturing) {
  if (capturing || lastMark_ == nullptr || lastMark_->passed()) return zcollSuccess;
  uintptr_t key = 0;
  const bool keyed = ex.sharedStreamKey(&key);
  if (keyed && lastKeyed_ && key == lastStream_) return zcollSuccess;  // ordered by the stream
  return ex.waitMark(*lastMark_);
}

Result TriggerRing::begin(Executor& ex, uint64_t* step) {
  const uint64_t s = ++next_;
  *step = s;
  for (int p : local_)
    if (p != me_) ZCOLL_CHECK(ex.waitBits(handshake(s % 2, p, me_), kEmpty));
  if (proxy_) ZCOLL_CHECK(proxy_->waitOutboxFree(ex, s % 2));
  return zcollSuccess;
}

Result TriggerRing::publish(Executor& ex, uint64_t step, ProxyStep moves) {
  ZCOLL_CHECK(publishLocal(ex, step));
  if (!proxy_) return zcollSuccess;
  return publishRemote(ex, step, mySlot(step), std::move(moves));
}

Result TriggerRing::publishLocal(Executor& ex, uint64_t step) {
  for (int p : local_)
    if (p != me_) ZCOLL_CHECK(ex.writeValue(handshake(step % 2, p, me_), kFull));
  return zcollSuccess;
}

Result TriggerRing::publishRemote(Executor& ex, uint64_t step, const char* from, ProxyStep moves) {
  if (!proxy_) return fail(zcollInternalError, "a step for other nodes on a ring of one node");
  moves.slot = static_cast<int>(step % 2);
  return proxy_->publish(ex, from, moves);
}

Result TriggerRing::await(Executor& ex, int peer, uint64_t step) {
  if (proxy_ && proxy_->isRemote(peer)) return proxy_->awaitInbox(ex, step % 2, peer);
  return ex.waitBits(handshake(step % 2, me_, peer), kFull);
}

Result TriggerRing::finish(Executor& ex, uint64_t step) {
  for (int p : local_)
    if (p != me_) ZCOLL_CHECK(ex.writeValue(handshake(step % 2, me_, p), kEmpty));
  if (proxy_) ZCOLL_CHECK(proxy_->finish(ex, step % 2));
  return zcollSuccess;
}

Result TriggerRing::endCall(Executor& ex, std::vector<ProxyStep>* proxySteps) {
  proxySteps->clear();
  if (!proxy_) return zcollSuccess;
  ZCOLL_CHECK(proxy_->endCall(ex));
  *proxySteps = proxy_->takeSteps();
  return zcollSuccess;
}

Result TriggerRing::serveProxy(zcollComm* comm, uint32_t seq, const std::vector<ProxyStep>& steps) {
  const Result r = proxy_->serve(comm, seq, steps);
  if (r != zcollSuccess) breakAndNotify(comm, r);  // the first error wins
  return r;
}

void TriggerRing::releaseAfterFailure() {
  if (!proxy_) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs_);
  // Stored again at every poll: the streams' own later writes overwrite a release.
  do {
    releaseWaits();
    if (proxy_->allCallsEnded()) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  } while (std::chrono::steady_clock::now() < deadline);
  ZCOLL_WARN(LogSubsys::kColl, "stream-triggered calls: after a failure a stream did not end its "
             "calls within %d ms", timeoutMs_);
}

Result TriggerRing::noteStream(Executor& ex, bool capturing) {
  std::shared_ptr<StreamMark> mark;
  ZCOLL_CHECK(ex.markStream(&mark));
  if (capturing) {
    captured_.push_back(std::move(mark));
    return zcollSuccess;
  }
  uintptr_t key = 0;
  lastKeyed_ = ex.sharedStreamKey(&key);
  lastStream_ = key;
  lastMark_ = mark;
  if (lastKeyed_) marks_[key] = std::move(mark);
  else unkeyed_.push_back(std::move(mark));
  return zcollSuccess;
}

bool TriggerRing::allPassed() {
  for (auto& [key, mark] : marks_)
    if (!mark->passed()) return false;
  for (auto& mark : unkeyed_)
    if (!mark->passed()) return false;
  for (auto& mark : captured_)
    if (!mark->passed()) return false;
  return true;
}

bool TriggerRing::peersReadAll() const {
  for (int k = 0; k < 2; ++k)
    for (int p : local_)
      if (p != me_ && (__atomic_load_n(handshake(k, p, me_), __ATOMIC_ACQUIRE) & kEmpty) == 0)
        return false;
  return !proxy_ || proxy_->outboxesSent();
}

Result TriggerRing::drain(int timeoutMs, bool release) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  auto pause = std::chrono::microseconds(20);
  while (true) {
    // Stored again at every poll: a held stream's own later writes (kFull, kEmpty) overwrite
    // the release, and its next wait must pass too.
    if (release || (aborting_ != nullptr && aborting_->load())) releaseWaits();
    if (allPassed() && peersReadAll()) break;
    if (std::chrono::steady_clock::now() > deadline)
      return fail(zcollTimeout, "stream-triggered calls: step %llu did not complete within %d "
                  "ms (a peer never made its call, or its stream is stuck)",
                  static_cast<unsigned long long>(next_), timeoutMs);
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
  marks_.clear();
  unkeyed_.clear();
  lastMark_.reset();
  return zcollSuccess;
}

void TriggerRing::releaseWaits() {
  for (int k = 0; k < 2; ++k)
    for (int p : local_) {
      if (p == me_) continue;
      __atomic_store_n(handshake(k, me_, p), kReleased, __ATOMIC_RELEASE);
      __atomic_store_n(handshake(k, p, me_), kReleased, __ATOMIC_RELEASE);
    }
  if (proxy_) proxy_->releaseWaits();
}

bool ringSpansNodes(const zcollComm* comm) {
  return comm->trigger != nullptr && comm->trigger->spansNodes();
}

}  // namespace zcoll
