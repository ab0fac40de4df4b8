#include "transport/cuda_ipc_transport.h"

#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "base/log.h"
#include "base/tags.h"
#include "topology/topology.h"

namespace zcoll {

namespace {

// Cancelling and closing wait this long for zcoll's own copies (at most a message each), so an
// abort stays bounded on a device that stopped; the data path waits for the comm's timeout.
constexpr int kCloseDrainMs = 2000;

constexpr uint64_t kDescriptorMagic = 0x7a636f6c6c697063ULL;  // "zcollipc"
constexpr size_t kProbeBytes = 64;

// What the sender tells the receiver: where to read, and how much.
struct Descriptor {
  uint64_t magic;
  uint64_t bytes;
  IpcHandle handle;
};

enum class Phase { kDescriptor, kCopying, kAcknowledging };

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

struct CudaIpcTransport::Op {
  Request* req = nullptr;  // the caller's; null once cancelled
  bool send = false;
  int peer = -1;
  uint64_t tag = 0;
  Phase phase = Phase::kDescriptor;
  Descriptor desc{};
  Request descReq, ackReq;  // on the peer's host route
  uint64_t ack = 0;         // the acknowledgement word: 0, or the zcollResult_t that failed it
  Result outcome = zcollSuccess;  // a receive's result, reported once its acknowledgement left
  void* dst = nullptr;  // a receive's buffer and size
  size_t capacity = 0;
  uint64_t ticket = 0;
  BlockPool::Block block;  // a send's shared block holding a copy of its buffer
};

// ---- Setup --------------------------------------------------------------------------------

CudaIpcTransport::CudaIpcTransport(std::unique_ptr<DeviceIpc> ipc, int maxPath, bool userBuffers,
                                   int copyWaitMs)
    : ipc_(std::move(ipc)),
      maxPath_(maxPath),
      userBuffers_(userBuffers),
      copyWaitMs_(copyWaitMs),
      blocks_([this](size_t bytes, void** out) { return ipc_->allocShared(bytes, out); },
              [this](void* p) { ipc_->freeShared(p); }) {}

Result CudaIpcTransport::create(std::unique_ptr<DeviceIpc> ipc, int maxPath, bool userBuffers,
                                int copyWaitMs, std::unique_ptr<CudaIpcTransport>* out) {
  std::unique_ptr<CudaIpcTransport> t(
      new CudaIpcTransport(std::move(ipc), maxPath, userBuffers, copyWaitMs));
  ZCOLL_CHECK(t->makeProbe());
  *out = std::move(t);
  return zcollSuccess;
}

std::unique_ptr<CudaIpcTransport> CudaIpcTransport::off() {
  return std::unique_ptr<CudaIpcTransport>(new CudaIpcTransport(nullptr, 0, false, 0));
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
      if (r == zcollSuccess)
        r = create(std::move(ipc), s.cudaIpcMaxPath, s.cudaIpcUserBuffers, s.copyWaitMs, &t);
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
  ZCOLL_CHECK(ipc_->allocShared(kProbeBytes, &probeBlock_));
  uint64_t ticket = 0;
  ZCOLL_CHECK(ipc_->startCopy(probeBlock_, pattern, kProbeBytes, &ticket));
  ZCOLL_CHECK(waitForCopy(*ipc_, ticket, copyWaitMs_));
  IpcHandle h{};
  ZCOLL_CHECK(ipc_->exportRange(probeBlock_, kProbeBytes, &h));
  address_.assign(reinterpret_cast<const char*>(&h), sizeof(h));
  address_.append(reinterpret_cast<const char*>(pattern), kProbeBytes);
  return zcollSuccess;
}

CudaIpcTransport::~CudaIpcTransport() {
  if (ipc_ == nullptr) return;  // off: nothing was posted or allocated
  std::vector<Op*> posted = active_;  // cancel() takes each out of active_
  for (Op* op : posted) cancel(op->req);
  settleCancelled(0);
  (void)ipc_->drain(kCloseDrainMs);
  blocks_.release();
  for (const Window& w : windows_) ipc_->freeShared(w.ptr);
  if (probeBlock_ != nullptr) ipc_->freeShared(probeBlock_);
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
  Result r = ipc_->map(h, &src);
  if (r == zcollSuccess) r = ipc_->startCopy(seen, src, kProbeBytes, &ticket);
  if (r == zcollSuccess) r = waitForCopy(*ipc_, ticket, copyWaitMs_);
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
  std::vector<char> trades(n, 0);
  std::vector<uint64_t> mine(n, 0), theirs(n, 0);
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
  // Each pair that trades verdicts sends its own and receives the peer's.
  ZCOLL_CHECK(a.exchange(trades, mine, &theirs));
  agreed_.assign(n, 0);
  for (int r = 0; r < n; ++r) {
    agreed_[r] = mine[r] && theirs[r];
    if (agreed_[r]) continue;
    if (r == a.rank) why_[r] = "this rank";
    else if (!trades[r]) why_[r] = "not a node peer with a shareable device";
    else if (mine[r]) why_[r] = "rank " + std::to_string(r) + " cannot reach this rank's memory";
    if (forced_ && r != a.rank && a.sameMachine[r] &&
        a.layout->nodeOf[r] == a.layout->nodeOf[a.rank])
      return fail(zcollSystemError, "ZCOLL_DEVICE_TRANSPORT=cuda_ipc: no cuda_ipc to rank %d: %s",
                  r, why_[r].c_str());
  }
  hosts_ = a.hostRoutes;
  rank_ = a.rank;
  connected_ = true;
  return zcollSuccess;
}

// ---- Posting ------------------------------------------------------------------------------

void CudaIpcTransport::giveBackBlock(Op* op) {
  blocks_.giveBack(op->block);
  op->block = BlockPool::Block{};
}

// The handle a send's descriptor carries. By default a shared block of zcoll's holding a copy
// of the buffer (one device-local copy): peers map zcoll's blocks once and keep them mapped,
// while a user buffer stays mapped in its peers after the user frees it, which CUDA leaves
// undefined, and zcoll cannot see the free. With user buffers on (ZCOLL_CUDA_IPC_USER_BUFFERS,
// for buffers that live as long as the comm, as NCCL's registered ones) the buffer itself is
// exported, no copy; memory that cannot be exported still goes through a block.
Result CudaIpcTransport::exportSend(Op* op, const void* buf, size_t bytes) {
  if (userBuffers_ && ipc_->exportRange(buf, bytes, &op->desc.handle) == zcollSuccess)
    return zcollSuccess;
  ZCOLL_CHECK(blocks_.take(bytes, &op->block));
  uint64_t ticket = 0;
  ZCOLL_CHECK(ipc_->startCopy(op->block.ptr, buf, bytes, &ticket));
  ZCOLL_CHECK(waitForCopy(*ipc_, ticket, copyWaitMs_));
  return ipc_->exportRange(op->block.ptr, bytes, &op->desc.handle);
}

Result CudaIpcTransport::postSend(int peer, const void* buf, size_t bytes, uint64_t tag,
                                  Request* req) {
  auto op = std::make_unique<Op>();
  op->req = req;
  op->send = true;
  op->peer = peer;
  op->tag = tag;
  op->desc.magic = kDescriptorMagic;
  op->desc.bytes = bytes;
  Result r = bytes > 0 ? exportSend(op.get(), buf, bytes) : zcollSuccess;
  if (r == zcollSuccess)
    r = hosts_[peer]->postRecv(peer, &op->ack, sizeof(op->ack), makeAckTag(tag, peer),
                               &op->ackReq);
  if (r == zcollSuccess)
    r = hosts_[peer]->postSend(peer, &op->desc, sizeof(op->desc), makeDescriptorTag(tag),
                               &op->descReq);
  if (r != zcollSuccess) {
    if (!op->ackReq.complete() && op->ackReq.transport != nullptr)
      hosts_[peer]->cancel(&op->ackReq);
    giveBackBlock(op.get());
    return r;
  }
  req->bind(this, op.get(), peer, bytes);
  active_.push_back(op.release());
  return zcollSuccess;
}

Result CudaIpcTransport::postRecv(int peer, void* buf, size_t bytes, uint64_t tag, Request* req) {
  auto op = std::make_unique<Op>();
  op->req = req;
  op->peer = peer;
  op->tag = tag;
  op->dst = buf;
  op->capacity = bytes;
  ZCOLL_CHECK(hosts_[peer]->postRecv(peer, &op->desc, sizeof(op->desc), makeDescriptorTag(tag),
                                     &op->descReq));
  req->bind(this, op.get(), peer, bytes);
  active_.push_back(op.release());
  return zcollSuccess;
}

// ---- Progress -----------------------------------------------------------------------------

void CudaIpcTransport::finish(Op* op, Result status) {
  giveBackBlock(op);
  if (op->req != nullptr) op->req->finish(status);
  delete op;
}

// Sends the receive's acknowledgement; the receive completes with `outcome` once it has left.
Result CudaIpcTransport::acknowledge(Op* op, Result outcome) {
  op->outcome = outcome;
  op->ack = static_cast<uint64_t>(outcome);
  op->phase = Phase::kAcknowledging;
  return hosts_[op->peer]->postSend(op->peer, &op->ack, sizeof(op->ack),
                                    makeAckTag(op->tag, rank_), &op->ackReq);
}

// A descriptor arrived: check it, map the sender's memory and start the copy.
Result CudaIpcTransport::startRead(Op* op) {
  if (op->desc.magic != kDescriptorMagic)
    return fail(zcollRemoteError, "cuda_ipc: rank %d sent a malformed descriptor", op->peer);
  if (op->desc.bytes != op->capacity)
    return acknowledge(op, fail(zcollInvalidUsage, "rank %d sent %llu bytes to a %zu-byte "
                                "receive (mismatched counts or types across ranks?)", op->peer,
                                static_cast<unsigned long long>(op->desc.bytes), op->capacity));
  if (op->desc.bytes == 0) return acknowledge(op, zcollSuccess);
  const void* src = nullptr;
  Result r = ipc_->map(op->desc.handle, &src);
  if (r == zcollSuccess) r = ipc_->startCopy(op->dst, src, op->desc.bytes, &op->ticket);
  if (r != zcollSuccess) return acknowledge(op, r);
  op->phase = Phase::kCopying;
  return zcollSuccess;
}

// Moves `op` on as far as its requests allow; *finished once it is complete (and deleted).
Result CudaIpcTransport::advance(Op* op, bool* finished) {
  *finished = false;
  if (op->send) {
    // Complete on the acknowledgement, or on a descriptor that could not be sent.
    Result status = zcollSuccess;
    if (op->descReq.complete() && op->descReq.status != zcollSuccess) {
      status = op->descReq.status;
    } else if (op->ackReq.complete()) {
      status = op->ackReq.status;
      if (status == zcollSuccess && op->ack != 0)
        status = fail(zcollRemoteError, "cuda_ipc: rank %d could not take the %llu bytes this "
                      "rank sent (error %llu there; see its log)", op->peer,
                      static_cast<unsigned long long>(op->desc.bytes),
                      static_cast<unsigned long long>(op->ack));
    } else {
      return zcollSuccess;
    }
    if (!op->descReq.complete()) return zcollSuccess;  // the host route still holds it
    finish(op, status);
    *finished = true;
    return zcollSuccess;
  }
  Result r = zcollSuccess;
  switch (op->phase) {
    case Phase::kDescriptor:
      if (!op->descReq.complete()) return zcollSuccess;
      r = op->descReq.status != zcollSuccess ? op->descReq.status : startRead(op);
      break;
    case Phase::kCopying: {
      bool done = false;
      r = ipc_->copyDone(op->ticket, &done);
      if (r == zcollSuccess && done) r = acknowledge(op, zcollSuccess);
      else if (r != zcollSuccess) r = acknowledge(op, r);
      break;
    }
    case Phase::kAcknowledging:
      if (!op->ackReq.complete()) return zcollSuccess;
      r = op->outcome != zcollSuccess ? op->outcome : op->ackReq.status;
      finish(op, r);
      *finished = true;
      return zcollSuccess;
  }
  if (r != zcollSuccess) {  // nothing (more) to acknowledge: the receive fails now
    if (op->phase == Phase::kAcknowledging && !op->ackReq.complete() &&
        op->ackReq.transport != nullptr)
      hosts_[op->peer]->cancel(&op->ackReq);
    finish(op, r);
    *finished = true;
  }
  return zcollSuccess;
}

Result CudaIpcTransport::progress() {
  for (size_t i = 0; i < active_.size();) {
    bool finished = false;
    ZCOLL_CHECK(advance(active_[i], &finished));
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

void CudaIpcTransport::cancel(Request* req) {
  auto* op = static_cast<Op*>(req->impl);
  if (op == nullptr) return;
  active_.erase(std::remove(active_.begin(), active_.end(), op), active_.end());
  req->impl = nullptr;
  op->req = nullptr;
  Transport* host = hosts_[op->peer];
  if (!op->descReq.complete()) host->cancel(&op->descReq);
  if (op->send && op->descReq.complete() && op->descReq.status == zcollSuccess &&
      !op->ackReq.complete()) {
    cancelled_.push_back(op);  // the peer may be reading our buffer: settleCancelled waits
    return;
  }
  if (!op->ackReq.complete() && op->ackReq.transport != nullptr) host->cancel(&op->ackReq);
  if (op->phase == Phase::kCopying) (void)ipc_->drain(kCloseDrainMs);  // it writes req's buffer
  finish(op, zcollRemoteError);
}

void CudaIpcTransport::settleCancelled(int waitMs) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs);
  while (!cancelled_.empty()) {
    for (size_t i = 0; i < cancelled_.size();) {
      Op* op = cancelled_[i];
      Transport* host = hosts_[op->peer];
      (void)host->progress();
      bool settled = op->ackReq.complete() || host->peerFailed(op->peer);
      if (!settled && std::chrono::steady_clock::now() < deadline) {
        ++i;
        continue;
      }
      if (!op->ackReq.complete()) host->cancel(&op->ackReq);
      finish(op, zcollRemoteError);
      cancelled_.erase(cancelled_.begin() + static_cast<std::ptrdiff_t>(i));
    }
    if (!cancelled_.empty()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// ---- PeerMemory ---------------------------------------------------------------------------

static_assert(sizeof(IpcHandle) <= sizeof(ExposedRange::handle), "a handle fits a range");

namespace {

ExposedRange rangeOf(const void* ptr, size_t bytes, const IpcHandle* handle) {
  ExposedRange r;
  r.addr = reinterpret_cast<uintptr_t>(ptr);
  r.bytes = bytes;
  if (handle != nullptr) {
    r.mappable = 1;
    std::memcpy(r.handle, handle, sizeof(*handle));
  }
  return r;
}

}  // namespace

Result CudaIpcTransport::expose(const void* ptr, size_t bytes, ExposedRange* out) {
  IpcHandle h{};
  const bool exported =
      userBuffers_ && bytes > 0 && ipc_->exportRange(ptr, bytes, &h) == zcollSuccess;
  *out = rangeOf(ptr, bytes, exported ? &h : nullptr);
  return zcollSuccess;
}

Result CudaIpcTransport::map(int peer, const ExposedRange& r, bool writable, PeerView* view) {
  *view = PeerView{};
  if (!r.mappable) return zcollSuccess;
  IpcHandle h;
  std::memcpy(&h, r.handle, sizeof(h));
  const void* at = nullptr;
  Result res = ipc_->map(h, &at);
  if (res != zcollSuccess)
    return fail(res, "cuda_ipc: mapping rank %d's memory: %s", peer, zcollGetLastError(nullptr));
  view->at = static_cast<const char*>(at);
  // An IPC mapping is readable and writable (cudaIpcOpenMemHandle maps with both).
  if (writable) view->writable = const_cast<char*>(view->at);
  return zcollSuccess;
}

Result CudaIpcTransport::read(int peer, const ExposedRange&, size_t, void*, size_t) {
  return fail(zcollUnsupported, "cuda_ipc: rank %d's device memory can only be read mapped",
              peer);
}

Result CudaIpcTransport::ownWindow(size_t bytes, char** base, ExposedRange* ref) {
  if (windows_.empty() || windows_.back().bytes < bytes) {
    Window w;
    w.bytes = std::max<size_t>(64 * 1024, windows_.empty() ? 0 : 2 * windows_.back().bytes);
    while (w.bytes < bytes) w.bytes *= 2;
    ZCOLL_CHECK(ipc_->allocShared(w.bytes, &w.ptr));
    Result r = ipc_->exportRange(w.ptr, w.bytes, &w.handle);
    if (r != zcollSuccess) {
      ipc_->freeShared(w.ptr);
      return r;
    }
    windows_.push_back(w);
  }
  const Window& w = windows_.back();
  *base = static_cast<char*>(w.ptr);
  *ref = rangeOf(w.ptr, w.bytes, &w.handle);
  return zcollSuccess;
}

Result CudaIpcTransport::mapWindow(int peer, const ExposedRange& ref, const char** base) {
  PeerView view;
  ZCOLL_CHECK(map(peer, ref, false, &view));
  if (view.at == nullptr)
    return fail(zcollInternalError, "cuda_ipc: rank %d sent a window that cannot be mapped", peer);
  *base = view.at;
  return zcollSuccess;
}

}  // namespace zcoll
