#include "transport/cuda_ipc_transport.h"

#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <thread>

#include "base/log.h"
#include "base/process.h"
#include "base/stream_holds.h"
#include "base/tags.h"
#include "topology/topology.h"

namespace zcoll {

namespace {

// Cancelling and closing wait this long for zcoll's own copies (at most a message each), so an
// abort stays bounded on a device that stopped; the data path waits for the comm's timeout.
constexpr int kCloseDrainMs = 2000;

constexpr uint64_t kDescriptorMagic = 0x7a636f6c6c697063ULL;  // "zcollipc"
constexpr size_t kProbeBytes = 64;

// What the sender tells the receiver: where to read this piece, how much, and the message's
// size (checked against the receive's on every piece).
struct Descriptor {
  uint64_t magic;
  uint64_t bytes;
  uint64_t total;
  IpcHandle handle;
};

// A piece's state. Send: copying into its slot, then sent (awaiting its acknowledgement), then
// acknowledged. Receive: awaiting its descriptor, copying, acknowledging, done.
enum class PieceState { kCopying, kSent, kAcked, kAwaitDescriptor, kReading, kAcknowledging,
                        kDone };

Result waitForCopy(DeviceIpc& ipc, uint64_t ticket, int waitMs) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs);
  for (bool done = false;;) {
    ZCOLL_CHECK(ipc.copyDone(ticket, &done));
    if (done) return zcollSuccess;
    if (std::chrono::steady_clock::now() > deadline)
      return fail(zcollTimeout, "cuda_ipc: a device copy took more than %d ms", waitMs);
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

std::string hex(const void* p, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<const unsigned char*>(p)[i];
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

}  // namespace

struct CudaIpcTransport::Piece {
  PieceState state;
  Descriptor desc{};
  Request descReq, ackReq;  // on the peer's host route
  uint64_t ack = 0;         // the acknowledgement word: 0, kUseSlots, or a zcollResult_t
  uint64_t ticket = 0;      // its device copy
  int slot = -1;            // send: the slot it went through; -1: the user's own buffer
  size_t offset = 0, bytes = 0;  // its place in the message
};

struct CudaIpcTransport::Op {
  Request* req = nullptr;  // the caller's; null once cancelled
  bool send = false;
  int peer = -1;
  uint64_t tag = 0;
  char* buf = nullptr;  // the caller's buffer (send: read only)
  size_t bytes = 0;
  std::deque<Piece> pieces;  // in order; a deque keeps their requests in place as it grows
  size_t next = 0;           // send: bytes handed to pieces; receive: bytes described so far
  size_t done = 0;           // bytes acknowledged (send) or copied (receive)
  Result outcome = zcollSuccess;  // a receive's failure, reported once its acknowledgement left
  bool failed = false;            // ... and no more pieces are read
  std::shared_ptr<DeviceFence> after;  // the call's work before the post (null: none)
  bool copiesDone = true;  // cancelled: its copies ended (else their slots are never reused)
};

// ---- Setup --------------------------------------------------------------------------------

CudaIpcTransport::CudaIpcTransport(std::unique_ptr<DeviceIpc> ipc, int maxPath, bool userBuffers,
                                   int copyWaitMs, size_t windowBytes)
    : ipc_(std::move(ipc)),
      maxPath_(maxPath),
      userBuffers_(userBuffers),
      copyWaitMs_(copyWaitMs),
      memory_(ipc_.get(), windowBytes, copyWaitMs) {}

Result CudaIpcTransport::create(std::unique_ptr<DeviceIpc> ipc, int maxPath, bool userBuffers,
                                int copyWaitMs, std::unique_ptr<CudaIpcTransport>* out,
                                size_t windowBytes) {
  std::unique_ptr<CudaIpcTransport> t(
      new CudaIpcTransport(std::move(ipc), maxPath, userBuffers, copyWaitMs, windowBytes));
  ZCOLL_CHECK(t->makeProbe());
  *out = std::move(t);
  return zcollSuccess;
}

std::unique_ptr<CudaIpcTransport> CudaIpcTransport::off() {
  return std::unique_ptr<CudaIpcTransport>(new CudaIpcTransport(nullptr, 0, false, 0, 0));
}

Result CudaIpcTransport::createFor(const TransportSettings& s, const std::vector<Transport*>&,
                                   std::unique_ptr<Transport>* out) {
  out->reset();
  const bool forced = s.deviceMode == "cuda_ipc";
  const DeviceIdentity& me = s.device;
  std::unique_ptr<CudaIpcTransport> t;
  if (!me.present) {
    // No pair trades a verdict with this rank; kept only to hold ZCOLL_DEVICE_TRANSPORT=cuda_ipc
    // to its node peers.
    if (!forced) return zcollSuccess;
    t = off();
  } else if (s.deviceMode == "staged") {
    t = off();
  } else {
    Result r = zcollUnsupported;
    std::unique_ptr<DeviceIpc> ipc;
    if (me.ipc && s.makeIpc != nullptr) {
      r = s.makeIpc(&ipc);
      // Queued calls hold their callers' streams while they run: a receiver could not open a
      // user buffer's mapping then (base/stream_holds.h), so they do not offer user buffers.
      const bool userBuffers = s.cudaIpcUserBuffers && !s.deviceCallsQueued;
      if (r == zcollSuccess)
        r = create(std::move(ipc), s.cudaIpcMaxPath, userBuffers, s.copyWaitMs, &t,
                   s.deviceWindowBytes);
    } else {
      fail(zcollUnsupported, "the %s device cannot share its memory with other processes",
           me.kind);
    }
    if (r != zcollSuccess) {
      t.reset();
      if (forced)
        return fail(r, "ZCOLL_DEVICE_TRANSPORT=cuda_ipc: %s", zcollGetLastError(nullptr));
      ZCOLL_WARN(LogSubsys::kNet, "cuda_ipc unavailable (%s): device bytes to the ranks of this "
                 "node go through host memory", zcollGetLastError(nullptr));
      t = off();
    }
  }
  t->forced_ = forced;
  *out = std::move(t);
  return zcollSuccess;
}

// The probe block holds a random pattern; its address is the block's handle and the pattern.
Result CudaIpcTransport::makeProbe() {
  unsigned char pattern[kProbeBytes];
  std::random_device rd;
  for (size_t i = 0; i < kProbeBytes; i += 4) {
    uint32_t v = rd();
    std::memcpy(pattern + i, &v, 4);
  }
  ZCOLL_CHECK(streams::whenNoneHeld(copyWaitMs_, "cuda_ipc: allocating its probe block", [&] {
    return ipc_->allocShared(kProbeBytes, &probeBlock_);
  }));
  uint64_t ticket = 0;
  ZCOLL_CHECK(ipc_->startCopy(probeBlock_, pattern, kProbeBytes, &ticket));
  ZCOLL_CHECK(waitForCopy(*ipc_, ticket, copyWaitMs_));
  IpcHandle h{};
  ZCOLL_CHECK(ipc_->exportRange(probeBlock_, kProbeBytes, &h));
  address_.assign(reinterpret_cast<const char*>(&h), sizeof(h));
  address_.append(reinterpret_cast<const char*>(pattern), kProbeBytes);
  return zcollSuccess;
}

// Without close() (a communicator that failed to come up): its host routes may be gone, so
// nothing is traded; slots a peer may have mapped stay allocated.
CudaIpcTransport::~CudaIpcTransport() {
  if (ipc_ == nullptr || closed_) return;
  closed_ = true;
  if (ipc_->drain(kCloseDrainMs) != zcollSuccess) {
    abandonDeviceIpc(std::move(ipc_));  // a copy may still run: nothing goes
    return;
  }
  (void)streams::whenNoneHeld(0, "cuda_ipc: closing its mappings", [&] {
    ipc_->unmapAll();
    return zcollSuccess;
  });
  for (PeerSlots& ps : slots_)
    if (ps.peerMapped) ps.area = nullptr;  // kept
  for (int r = 0; r < static_cast<int>(slots_.size()); ++r) memory_.peerMayStillMap(r);
  freeOwnSlots();
}

bool CudaIpcTransport::canConnect(const PeerReach& peer, std::string* why) const {
  if (connected_) {
    const bool known = peer.rank >= 0 && static_cast<size_t>(peer.rank) < agreed_.size();
    *why = known ? why_[peer.rank] : "not a rank of this communicator";
    return known && agreed_[peer.rank];
  }
  if (peer.self) return *why = "this rank (device bytes to itself are copied)", false;
  if (!peer.sameMachine) return *why = "another machine", false;
  if (!peer.sameNode)
    return *why = "another node of the comm (ZCOLL_HOSTID): its bytes are staged", false;
  if (!peer.deviceIpc) return *why = "a rank has no device whose memory it can share", false;
  if (peer.sameDevice) return *why = "same device", true;
  if (peer.devicePath < 0)
    return *why = "devices not located in the topology; assumed reachable", true;
  const char* path = gpuPathName(static_cast<GpuPath>(peer.devicePath));
  if (peer.devicePath > maxPath_) {
    *why = std::string("path ") + path + " between the devices is beyond ZCOLL_CUDA_IPC_LEVEL=" +
           gpuPathName(static_cast<GpuPath>(maxPath_));
    return false;
  }
  return *why = std::string("devices connected by ") + path, true;
}

bool CudaIpcTransport::probe(const std::string& peerAddress, std::string* why) {
  if (peerAddress.size() != sizeof(IpcHandle) + kProbeBytes)
    return *why = "the peer offers no cuda_ipc probe", false;
  IpcHandle h;
  std::memcpy(&h, peerAddress.data(), sizeof(h));
  const void* src = nullptr;
  unsigned char seen[kProbeBytes] = {};
  uint64_t ticket = 0;
  Result r = streams::whenNoneHeld(copyWaitMs_, "cuda_ipc: mapping a peer's probe block",
                                   [&] { return ipc_->map(h, &src, MapUse::kHeld); });
  if (r == zcollSuccess)
    r = ipc_->startCopy(seen, src, kProbeBytes, &ticket, DeviceIpc::Lane::kIn);
  if (r == zcollSuccess) r = waitForCopy(*ipc_, ticket, copyWaitMs_);
  // Closed at once: the peer frees its probe block when it closes, after the verdicts that
  // follow every probe.
  (void)streams::whenNoneHeld(copyWaitMs_, "cuda_ipc: closing a peer's probe block", [&] {
    ipc_->unmap(h);
    return zcollSuccess;
  });
  if (r != zcollSuccess)
    return *why = std::string("probe failed: ") + zcollGetLastError(nullptr), false;
  if (std::memcmp(seen, peerAddress.data() + sizeof(IpcHandle), kProbeBytes) != 0)
    return *why = "probe read other bytes than the peer wrote (" + hex(seen, 8) + "...)", false;
  return true;
}

namespace {

// Peers that choose a device route with this rank: node peers on this machine whose device and
// this rank's are of one kind and can share memory. Decided from what every rank exchanged, so
// both sides of a pair agree on it.
bool tradesVerdict(const ConnectArgs& a, int peer) {
  const DeviceIdentity& me = a.devices[a.rank];
  const DeviceIdentity& them = a.devices[peer];
  return peer != a.rank && a.sameMachine[peer] &&
         a.layout->nodeOf[peer] == a.layout->nodeOf[a.rank] && me.present && me.ipc &&
         them.present && them.ipc && std::strcmp(me.kind, them.kind) == 0;
}

PeerReach devicePeerReach(const ConnectArgs& a, int peer, const TopoDetail& topo) {
  const DeviceIdentity& me = a.devices[a.rank];
  const DeviceIdentity& them = a.devices[peer];
  static const uint8_t kNoUuid[16] = {};
  PeerReach reach;
  reach.rank = peer;
  reach.self = peer == a.rank;
  reach.sameMachine = a.sameMachine[peer] != 0;
  reach.sameNode = a.layout->nodeOf[peer] == a.layout->nodeOf[a.rank];
  reach.device = true;
  reach.deviceIpc = tradesVerdict(a, peer);
  reach.sameDevice = (std::memcmp(me.uuid, kNoUuid, 16) != 0 &&
                      std::memcmp(me.uuid, them.uuid, 16) == 0) ||
                     (me.busId[0] != '\0' && strcasecmp(me.busId, them.busId) == 0);
  reach.devicePath = gpuPathBetween(topo, me.busId, them.busId);
  return reach;
}

}  // namespace

// Allocates and exports this rank's slots for each peer of `pairs` (a failure leaves that
// peer's area null: its handle is then all zero, and the peer says no).
Result CudaIpcTransport::makeSlots(const ConnectArgs& a, const std::vector<char>& pairs) {
  return streams::whenNoneHeld(copyWaitMs_, "cuda_ipc: allocating its slots", [&]() -> Result {
    for (size_t r = 0; r < pairs.size(); ++r) {
      if (!pairs[r]) continue;
      PeerSlots& ps = slots_[r];
      Result res = ipc_->allocShared(kSlotsPerPeer * kSlotBytes, &ps.area);
      if (res == zcollSuccess) res = ipc_->exportRange(ps.area, kSlotsPerPeer * kSlotBytes,
                                                       &ps.handle);
      if (res != zcollSuccess) {
        ZCOLL_WARN(LogSubsys::kNet, "%s rank %d: cuda_ipc slots for rank %zu: %s", a.commName,
                   a.rank, r, zcollGetLastError(nullptr));
        if (ps.area != nullptr) ipc_->freeShared(ps.area);
        ps = PeerSlots{};
        continue;
      }
      for (int i = kSlotsPerPeer; i-- > 0;) ps.free.push_back(i);
    }
    return zcollSuccess;
  });
}

namespace {

std::vector<std::string> asBytes(const std::vector<char>& flags) {
  std::vector<std::string> out(flags.size());
  for (size_t r = 0; r < flags.size(); ++r) out[r] = std::string(1, flags[r] ? '\1' : '\0');
  return out;
}

}  // namespace

Result CudaIpcTransport::connect(const ConnectArgs& a) {
  if (a.kind != kDeviceMemory) return zcollSuccess;
  const int n = static_cast<int>(a.devices.size());
  const DeviceIdentity& me = a.devices[a.rank];
  // This rank's verdict on each peer that trades one: cuda_ipc can connect and a read of the
  // peer's probe block gave the bytes the peer wrote there. why_ says why.
  TopoDetail topo;
  if (ipc_ != nullptr && discoverTopologyDetail(&topo) != zcollSuccess)
    ZCOLL_WARN(LogSubsys::kTopo, "topology discovery failed: the paths between GPUs are unknown");
  if (ipc_ != nullptr)
    ZCOLL_INFO(LogSubsys::kTopo, "%s rank %d device %s:%d, PCI %s: %s", a.commName, a.rank,
               me.kind, me.ordinal, me.busId, describeGpuPlace(topo, me.busId).c_str());
  std::vector<char> trades(n, 0), mine(n, 0);
  why_.assign(n, "");
  for (int r = 0; r < n; ++r) {
    trades[r] = tradesVerdict(a, r);
    if (!trades[r]) continue;
    if (ipc_ == nullptr) {
      why_[r] = "cuda_ipc is off on this rank (ZCOLL_DEVICE_TRANSPORT, or see the warning)";
      continue;
    }
    mine[r] = canConnect(devicePeerReach(a, r, topo), &why_[r]) && probe(a.addresses[r], &why_[r]);
  }
  // Round 1: each pair that trades verdicts sends its own and receives the peer's.
  std::vector<std::string> theirs;
  ZCOLL_CHECK(a.exchange(trades, 1, asBytes(mine), &theirs));
  std::vector<char> pairs(n, 0);
  for (int r = 0; r < n; ++r) pairs[r] = mine[r] && theirs[r] == std::string(1, '\1');
  // Round 2: the pairs trade the handles of the slots each made for the other (and of their
  // windows), and map them.
  slots_.assign(n, PeerSlots{});
  memory_.startConnect(n);
  if (ipc_ != nullptr) ZCOLL_CHECK(makeSlots(a, pairs));
  if (ipc_ != nullptr && std::find(pairs.begin(), pairs.end(), 1) != pairs.end())
    ZCOLL_CHECK(memory_.makeWindow(a.commName, a.rank));
  std::vector<char> mapped(n, 0);
  ZCOLL_CHECK(tradeHandles(a, pairs, &mapped));
  // Round 3: whether each side mapped the other's slots, and its window.
  mappedPeer_ = mapped;
  std::vector<std::string> flags(n);
  for (int r = 0; r < n; ++r)
    flags[r] = std::string{static_cast<char>(mapped[r] ? 1 : 0),
                           static_cast<char>(memory_.mapsWindowOf(r) ? 1 : 0)};
  ZCOLL_CHECK(a.exchange(pairs, 2, flags, &theirs));
  for (int r = 0; r < n; ++r)
    if (pairs[r]) {
      memory_.setWindowMappedBy(r, theirs[r][1] == 1);
      theirs[r].resize(1);
    }
  agreed_.assign(n, 0);
  for (int r = 0; r < n; ++r) {
    const bool peerMapped = pairs[r] && theirs[r] == std::string(1, '\1');
    slots_[r].peerMapped = peerMapped;
    agreed_[r] = mapped[r] && peerMapped;
    if (agreed_[r]) continue;
    if (r == a.rank) why_[r] = "this rank";
    else if (!trades[r]) why_[r] = "not a node peer with a shareable device";
    else if (mine[r] && !pairs[r])
      why_[r] = "rank " + std::to_string(r) + " cannot reach this rank's memory";
    else if (mapped[r]) why_[r] = "rank " + std::to_string(r) + " could not map this rank's slots";
    if (forced_ && r != a.rank && a.sameMachine[r] &&
        a.layout->nodeOf[r] == a.layout->nodeOf[a.rank])
      return fail(zcollSystemError, "ZCOLL_DEVICE_TRANSPORT=cuda_ipc: no cuda_ipc to rank %d: %s",
                  r, why_[r].c_str());
  }
  hosts_ = a.hostRoutes;
  aborting_ = a.aborting;
  pids_ = a.pids;
  rank_ = a.rank;
  // Round 4: the node's rows of pairs and windows (CudaIpcPeerMemory::tradeRows).
  ZCOLL_CHECK(memory_.tradeRows(a, trades, agreed_));
  connected_ = true;
  return zcollSuccess;
}

// Round 2 of connect: each pair trades {slots handle, window offer} and maps the peer's slots
// (*mapped) and window (memory_).
Result CudaIpcTransport::tradeHandles(const ConnectArgs& a, const std::vector<char>& pairs,
                                      std::vector<char>* mapped) {
  const int n = static_cast<int>(pairs.size());
  constexpr size_t kBytes = sizeof(IpcHandle) + CudaIpcPeerMemory::kOfferBytes;
  std::vector<std::string> handles(n), theirs;
  const std::string window = memory_.offer();
  for (int r = 0; r < n; ++r) {
    handles[r].assign(reinterpret_cast<const char*>(&slots_[r].handle), sizeof(IpcHandle));
    handles[r].append(window);
  }
  ZCOLL_CHECK(a.exchange(pairs, kBytes, handles, &theirs));
  for (int r = 0; r < n; ++r) {
    if (!pairs[r]) continue;
    IpcHandle h;
    std::memcpy(&h, theirs[r].data(), sizeof(h));
    if (slots_[r].area == nullptr) {
      why_[r] = "this rank could not allocate its slots for it";
      continue;
    }
    if (h.base == 0) continue;  // the peer could not allocate its slots: it says why
    const void* at = nullptr;
    Result m = streams::whenNoneHeld(copyWaitMs_, "cuda_ipc: mapping a peer's slots",
                                     [&] { return ipc_->map(h, &at, MapUse::kHeld); });
    (*mapped)[r] = m == zcollSuccess;
    if (!(*mapped)[r]) {
      why_[r] = std::string("mapping its slots failed: ") + zcollGetLastError(nullptr);
      continue;
    }
    memory_.mapPeerWindow(r, theirs[r].data() + sizeof(h));
  }
  return zcollSuccess;
}

// ---- Closing ------------------------------------------------------------------------------

// Sends each peer whose slots this rank may have mapped whether it closed them (1) or not (0),
// and learns the same from each peer it made slots for, within about `waitMs`; a peer whose
// process ended counts as closed. Then frees its own slots where that is safe.
void CudaIpcTransport::tradeClosed(int waitMs) {
  const bool closedMine = ipc_ != nullptr &&
                          streams::whenNoneHeld(waitMs, "cuda_ipc: closing its mappings", [&] {
                            ipc_->unmapAll();
                            return zcollSuccess;
                          }) == zcollSuccess;
  const int n = static_cast<int>(slots_.size());
  std::vector<uint64_t> said(n, closedMine ? 1 : 0), heard(n, 0);
  std::vector<Request> sends(n), recvs(n);
  // Each side of a pair knows both flags (round 3 of connect), so every send has its receive.
  for (int r = 0; r < n; ++r) {
    if (r == rank_ || static_cast<size_t>(r) >= hosts_.size() || hosts_[r] == nullptr) continue;
    if (slots_[r].peerMapped)
      (void)hosts_[r]->postRecv(r, &heard[r], sizeof(uint64_t), makeTransportCloseTag(r),
                                &recvs[r]);
    if (mappedPeer_[r])
      (void)hosts_[r]->postSend(r, &said[r], sizeof(uint64_t), makeTransportCloseTag(rank_),
                                &sends[r]);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs);
  auto peerGone = [&](int r) {
    return hosts_[r]->peerFailed(r) ||
           (static_cast<size_t>(r) < pids_.size() && pids_[r] != getpid() &&
            processGone(pids_[r]));
  };
  for (;;) {
    bool waiting = false;
    for (int r = 0; r < n; ++r) {
      if (recvs[r].transport != nullptr && !recvs[r].complete() && !peerGone(r)) waiting = true;
      if (sends[r].transport != nullptr && !sends[r].complete() && !peerGone(r)) waiting = true;
    }
    if (!waiting || std::chrono::steady_clock::now() >= deadline) break;
    for (Transport* h : hosts_)
      if (h != nullptr) (void)h->progress();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  for (int r = 0; r < n; ++r) {
    const bool peerClosed = !slots_[r].peerMapped ||
                            (recvs[r].complete() && recvs[r].status == zcollSuccess &&
                             heard[r] == 1) ||
                            (hosts_.size() > static_cast<size_t>(r) && hosts_[r] != nullptr &&
                             r != rank_ && peerGone(r));
    if (recvs[r].transport != nullptr && !recvs[r].complete()) hosts_[r]->cancel(&recvs[r]);
    if (sends[r].transport != nullptr && !sends[r].complete()) hosts_[r]->cancel(&sends[r]);
    if (!peerClosed) memory_.peerMayStillMap(r);
    if (slots_[r].area == nullptr) continue;
    if (!peerClosed) {
      ZCOLL_WARN(LogSubsys::kNet, "cuda_ipc: rank %d did not say it closed its mapping of this "
                 "rank's slots; they stay allocated (freeing them first is undefined in CUDA)", r);
      slots_[r].area = nullptr;  // kept
    }
  }
}

void CudaIpcTransport::freeOwnSlots() {
  std::vector<void*> blocks;
  for (PeerSlots& ps : slots_) {
    if (ps.area != nullptr) blocks.push_back(ps.area);
    ps.area = nullptr;
  }
  if (void* window = memory_.releaseWindow()) blocks.push_back(window);
  if (probeBlock_ != nullptr) blocks.push_back(probeBlock_);
  probeBlock_ = nullptr;
  // They go once no stream is held (cudaFree synchronizes implicitly), and the copy engine with
  // them (its end frees what is left the same way).
  std::shared_ptr<DeviceIpc> ipc(std::move(ipc_));
  streams::deferUntilNoneHeld([ipc, blocks] {
    for (void* p : blocks) ipc->freeShared(p);
  });
}

void CudaIpcTransport::close(int flushMs) {
  if (ipc_ == nullptr || closed_) return;  // off, or closed already
  closed_ = true;
  std::vector<Op*> posted = active_;  // cancel() takes each out of active_
  for (Op* op : posted) cancel(op->req);
  settleCancelled(flushMs);
  if (ipc_->drain(copyDrainMs(kCloseDrainMs)) != zcollSuccess) {
    // A copy may still read or write peers' slots or ours: nothing is closed or freed.
    ZCOLL_WARN(LogSubsys::kNet, "cuda_ipc: copies still running after %d ms at close; mappings "
               "and slots stay", kCloseDrainMs);
    abandonDeviceIpc(std::move(ipc_));
    return;
  }
  tradeClosed(flushMs);
  freeOwnSlots();
}

// ---- Posting ------------------------------------------------------------------------------

Result CudaIpcTransport::postSendAfter(int peer, const void* buf, size_t bytes, uint64_t tag,
                                       Request* req, std::shared_ptr<DeviceFence> after) {
  auto op = std::make_unique<Op>();
  op->req = req;
  op->send = true;
  op->peer = peer;
  op->tag = tag;
  op->buf = static_cast<char*>(const_cast<void*>(buf));
  op->bytes = bytes;
  op->after = std::move(after);
  if (userBuffers_ && bytes > 0) {
    // The allocation that holds the buffer, offered first (one piece, no copy), once the call's
    // work before the post is done: a copy of no bytes after the fence names that moment.
    Piece p;
    p.state = PieceState::kCopying;
    p.bytes = bytes;
    p.desc = Descriptor{kDescriptorMagic, bytes, bytes, IpcHandle{}};
    if (ipc_->exportRange(buf, bytes, &p.desc.handle) == zcollSuccess) {
      ZCOLL_CHECK(ipc_->startCopy(nullptr, nullptr, 0, &p.ticket, DeviceIpc::Lane::kOut,
                                  op->after.get()));
      op->pieces.push_back(p);
      op->next = bytes;
    }
  }
  req->bind(this, op.get(), peer, bytes);
  active_.push_back(op.release());
  return zcollSuccess;
}

Result CudaIpcTransport::postDescriptorRecv(Op* op) {
  op->pieces.emplace_back();
  Piece& p = op->pieces.back();
  p.state = PieceState::kAwaitDescriptor;
  return hosts_[op->peer]->postRecv(op->peer, &p.desc, sizeof(p.desc), makeDescriptorTag(op->tag),
                                    &p.descReq);
}

Result CudaIpcTransport::postRecvAfter(int peer, void* buf, size_t bytes, uint64_t tag,
                                       Request* req, std::shared_ptr<DeviceFence> after) {
  auto op = std::make_unique<Op>();
  op->after = std::move(after);
  op->req = req;
  op->peer = peer;
  op->tag = tag;
  op->buf = static_cast<char*>(buf);
  op->bytes = bytes;
  ZCOLL_CHECK(postDescriptorRecv(op.get()));
  req->bind(this, op.get(), peer, bytes);
  active_.push_back(op.release());
  return zcollSuccess;
}

// ---- Progress -----------------------------------------------------------------------------

void CudaIpcTransport::finish(Op* op, Result status) {
  if (op->req != nullptr) op->req->finish(status);
  delete op;
}

// A send's next piece: copied into a free slot of the peer's (none free: it waits).
Result CudaIpcTransport::startPiece(Op* op) {
  PeerSlots& ps = slots_[op->peer];
  if (ps.free.empty()) return zcollSuccess;
  Piece p;
  p.state = PieceState::kCopying;
  p.slot = ps.free.back();
  p.offset = op->next;
  p.bytes = std::min(kSlotBytes, op->bytes - op->next);
  char* slot = static_cast<char*>(ps.area) + static_cast<size_t>(p.slot) * kSlotBytes;
  ZCOLL_CHECK(ipc_->startCopy(slot, op->buf + p.offset, p.bytes, &p.ticket,
                              DeviceIpc::Lane::kOut, op->after.get()));
  ps.free.pop_back();
  p.desc = Descriptor{kDescriptorMagic, p.bytes, op->bytes, ps.handle};
  p.desc.handle.offset = static_cast<uint64_t>(p.slot) * kSlotBytes;
  op->pieces.push_back(p);
  op->next += p.bytes;
  return zcollSuccess;
}

// Copies pieces into free slots (when `maySlot`: no earlier send to the peer still waits for
// one), sends each piece's descriptor once its copy is done, in order, and frees each slot on
// its acknowledgement. Complete when every byte was acknowledged.
Result CudaIpcTransport::advanceSend(Op* op, bool maySlot, bool* finished) {
  while (maySlot && op->next < op->bytes && !slots_[op->peer].free.empty())
    ZCOLL_CHECK(startPiece(op));
  Transport* host = hosts_[op->peer];
  bool inOrder = true;  // descriptors leave in piece order
  for (Piece& p : op->pieces) {
    if (p.state == PieceState::kCopying && inOrder) {
      bool copied = false;
      ZCOLL_CHECK(ipc_->copyDone(p.ticket, &copied));
      if (!copied) {
        inOrder = false;
        continue;
      }
      ZCOLL_CHECK(host->postRecv(op->peer, &p.ack, sizeof(p.ack), makeAckTag(op->tag, op->peer),
                                 &p.ackReq));
      ZCOLL_CHECK(host->postSend(op->peer, &p.desc, sizeof(p.desc), makeDescriptorTag(op->tag),
                                 &p.descReq));
      p.state = PieceState::kSent;
    }
    if (p.state != PieceState::kSent) continue;
    if (p.descReq.complete()) ZCOLL_CHECK(p.descReq.status);
    if (!p.ackReq.complete()) continue;
    ZCOLL_CHECK(p.ackReq.status);
    if (p.ack == kUseSlots && p.slot < 0) {  // the user buffer was refused: through the slots
      p.state = PieceState::kAcked;
      op->next = 0;
      continue;
    }
    if (p.ack != 0)
      return fail(zcollRemoteError, "cuda_ipc: rank %d could not take the %llu bytes this rank "
                  "sent (error %llu there; see its log)", op->peer,
                  static_cast<unsigned long long>(op->bytes),
                  static_cast<unsigned long long>(p.ack));
    p.state = PieceState::kAcked;
    if (p.slot >= 0) slots_[op->peer].free.push_back(p.slot);
    op->done += p.bytes;
  }
  if (op->done < op->bytes) return zcollSuccess;
  for (const Piece& p : op->pieces)
    if (!p.descReq.complete()) return zcollSuccess;  // the host route still holds one
  finish(op, zcollSuccess);
  *finished = true;
  return zcollSuccess;
}

// Sends a piece's acknowledgement; once it has left the piece is done (with `outcome`: a
// failure fails the receive and ends its reading).
Result CudaIpcTransport::acknowledge(Op* op, Piece* p, Result outcome) {
  if (outcome != zcollSuccess && op->outcome == zcollSuccess) {
    op->outcome = outcome;
    op->failed = true;
  }
  p->ack = outcome == zcollSuccess ? 0 : static_cast<uint64_t>(outcome);
  p->state = PieceState::kAcknowledging;
  return hosts_[op->peer]->postSend(op->peer, &p->ack, sizeof(p->ack),
                                    makeAckTag(op->tag, rank_), &p->ackReq);
}

// A descriptor arrived: check it, map the memory it names and start the copy; the next piece's
// descriptor is awaited at once.
Result CudaIpcTransport::readPiece(Op* op, Piece* p) {
  const Descriptor& d = p->desc;
  if (d.magic != kDescriptorMagic)
    return fail(zcollRemoteError, "cuda_ipc: rank %d sent a malformed descriptor", op->peer);
  if (d.total != op->bytes)
    return acknowledge(op, p, fail(zcollInvalidUsage, "rank %d sent %llu bytes to a %zu-byte "
                                   "receive (mismatched counts or types across ranks?)", op->peer,
                                   static_cast<unsigned long long>(d.total), op->bytes));
  if (d.bytes == 0 || d.bytes > op->bytes - op->next)
    return fail(zcollRemoteError, "cuda_ipc: rank %d described a piece of %llu bytes at %zu of "
                "%zu", op->peer, static_cast<unsigned long long>(d.bytes), op->next, op->bytes);
  const void* src = nullptr;
  Result r = zcollSuccess;
  if (!ipc_->mapped(d.handle)) {
    // A user buffer not mapped yet: opening synchronizes the device, so only while no stream of
    // this process is held; else the sender goes through its slots.
    const bool opened =
        streams::ifNoneHeld([&] { r = ipc_->map(d.handle, &src, MapUse::kCached); });
    if (!opened) {
      p->ack = kUseSlots;
      p->state = PieceState::kAcknowledging;
      ZCOLL_CHECK(hosts_[op->peer]->postSend(op->peer, &p->ack, sizeof(p->ack),
                                             makeAckTag(op->tag, rank_), &p->ackReq));
      return postDescriptorRecv(op);
    }
  } else {
    r = ipc_->map(d.handle, &src, MapUse::kCached);
  }
  if (r == zcollSuccess)
    r = ipc_->startCopy(op->buf + op->next, src, d.bytes, &p->ticket, DeviceIpc::Lane::kIn,
                        op->after.get());
  if (r != zcollSuccess) return acknowledge(op, p, r);
  p->offset = op->next;
  p->bytes = d.bytes;
  p->state = PieceState::kReading;
  op->next += d.bytes;
  return op->next < op->bytes ? postDescriptorRecv(op) : zcollSuccess;
}

// Reads each piece as its descriptor arrives, acknowledges each once its copy is done; complete
// when every byte was copied and every acknowledgement has left.
Result CudaIpcTransport::advanceRecv(Op* op, bool* finished) {
  for (size_t i = 0; i < op->pieces.size(); ++i) {
    Piece& p = op->pieces[i];
    if (p.state == PieceState::kAwaitDescriptor && !op->failed) {
      if (!p.descReq.complete()) break;
      ZCOLL_CHECK(p.descReq.status);
      ZCOLL_CHECK(readPiece(op, &p));
    }
    if (p.state == PieceState::kReading) {
      bool copied = false;
      Result r = ipc_->copyDone(p.ticket, &copied);
      if (r == zcollSuccess && !copied) continue;
      if (r == zcollSuccess) op->done += p.bytes;
      ZCOLL_CHECK(acknowledge(op, &p, r));
    }
    if (p.state == PieceState::kAcknowledging && p.ackReq.complete()) {
      p.state = PieceState::kDone;
      if (op->outcome == zcollSuccess) op->outcome = p.ackReq.status;
      if (p.ackReq.status != zcollSuccess) op->failed = true;
    }
  }
  for (const Piece& p : op->pieces) {
    if (p.state == PieceState::kDone) continue;
    if (op->failed && p.state == PieceState::kAwaitDescriptor) continue;  // cancelled at finish
    return zcollSuccess;
  }
  if (!op->failed && op->done < op->bytes) return zcollSuccess;
  for (Piece& p : op->pieces)
    if (p.state == PieceState::kAwaitDescriptor && !p.descReq.complete())
      hosts_[op->peer]->cancel(&p.descReq);
  finish(op, op->outcome);
  *finished = true;
  return zcollSuccess;
}

Result CudaIpcTransport::progress() {
  // Sends take their peer's slots in posting order: one still waiting for a slot holds back the
  // later sends to that peer, so pieces of messages with one tag leave in order.
  std::vector<char> slotWaiting(hosts_.size(), 0);
  for (size_t i = 0; i < active_.size();) {
    Op* op = active_[i];
    const int peer = op->peer;
    bool finished = false;
    Result r = op->send ? advanceSend(op, !slotWaiting[peer], &finished)
                        : advanceRecv(op, &finished);
    if (r != zcollSuccess) {  // this message fails; the transport itself is fine
      if (op->req != nullptr) {
        Request* req = op->req;
        cancel(req);  // gives its pieces back safely
        req->finish(r);
        continue;  // cancel() took it out of active_
      }
    }
    if (!finished && op->send && op->next < op->bytes) slotWaiting[peer] = 1;
    if (finished) {
      active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  return zcollSuccess;
}

bool CudaIpcTransport::peerFailed(int peer) const {
  return peer >= 0 && static_cast<size_t>(peer) < hosts_.size() && hosts_[peer] != nullptr &&
         hosts_[peer]->peerFailed(peer);
}

// ---- Cancelling ---------------------------------------------------------------------------

// Gives a cancelled send's slots back, except those a copy or the peer may still use: a piece
// still being copied into its slot unless `copiesDone`, a piece described and not acknowledged
// unless `peerDone` (the peer can no longer read). Those slots are never used again.
void CudaIpcTransport::releaseSlots(Op* op, bool copiesDone, bool peerDone) {
  PeerSlots& ps = slots_[op->peer];
  for (Piece& p : op->pieces) {
    if (p.slot < 0 || p.state == PieceState::kAcked) continue;
    const bool copying = p.state == PieceState::kCopying;
    const bool maybeRead = p.state == PieceState::kSent && p.descReq.complete() &&
                           p.descReq.status == zcollSuccess;
    if ((copying && !copiesDone) || (maybeRead && !peerDone)) {
      ++ps.lost;
    } else {
      ps.free.push_back(p.slot);
    }
    p.slot = -1;
  }
}

void CudaIpcTransport::cancel(Request* req) {
  auto* op = static_cast<Op*>(req->impl);
  if (op == nullptr) return;
  active_.erase(std::remove(active_.begin(), active_.end(), op), active_.end());
  req->impl = nullptr;
  op->req = nullptr;
  Transport* host = hosts_[op->peer];
  bool peerMayRead = false;
  bool copying = false;
  for (Piece& p : op->pieces) {
    if (!p.descReq.complete() && p.descReq.transport != nullptr) host->cancel(&p.descReq);
    const bool described = op->send && p.state == PieceState::kSent && p.descReq.complete() &&
                           p.descReq.status == zcollSuccess && !p.ackReq.complete();
    if (described) {
      peerMayRead = true;  // its acknowledgement is awaited by settleCancelled
      continue;
    }
    if (!p.ackReq.complete() && p.ackReq.transport != nullptr) host->cancel(&p.ackReq);
    if (p.state == PieceState::kCopying || p.state == PieceState::kReading) copying = true;
  }
  // A copy may write the caller's buffer (a receive) or a slot (a send): wait for it.
  op->copiesDone = !copying || ipc_->drain(copyDrainMs(kCloseDrainMs)) == zcollSuccess;
  if (peerMayRead) {
    cancelled_.push_back(op);
    return;
  }
  if (op->send) releaseSlots(op, op->copiesDone, true);
  finish(op, zcollRemoteError);
}

void CudaIpcTransport::settleCancelled(int waitMs) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs);
  while (!cancelled_.empty()) {
    for (size_t i = 0; i < cancelled_.size();) {
      Op* op = cancelled_[i];
      Transport* host = hosts_[op->peer];
      (void)host->progress();
      bool settled = host->peerFailed(op->peer);
      if (!settled) {
        settled = true;
        for (const Piece& p : op->pieces)
          if (p.state == PieceState::kSent && p.ackReq.transport != nullptr &&
              !p.ackReq.complete())
            settled = false;
      }
      if (!settled && std::chrono::steady_clock::now() < deadline) {
        ++i;
        continue;
      }
      // Acknowledged pieces' slots are free again; the others may still be read: lost.
      for (Piece& p : op->pieces) {
        if (p.state == PieceState::kSent && p.ackReq.complete()) p.state = PieceState::kAcked;
        if (!p.ackReq.complete() && p.ackReq.transport != nullptr) host->cancel(&p.ackReq);
        if (p.state == PieceState::kAcked && p.slot >= 0) {
          slots_[op->peer].free.push_back(p.slot);
          p.slot = -1;
        }
      }
      releaseSlots(op, op->copiesDone, host->peerFailed(op->peer));
      finish(op, zcollRemoteError);
      cancelled_.erase(cancelled_.begin() + static_cast<std::ptrdiff_t>(i));
    }
    if (!cancelled_.empty()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace zcoll
