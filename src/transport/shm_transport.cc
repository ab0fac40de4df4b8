#include "transport/shm_transport.h"


#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/process.h"

namespace zcoll {

// ---- Lifecycle ------------------------------------------------------------------------------

Result ShmTransport::create(std::unique_ptr<ShmTransport>* out) {
  std::unique_ptr<ShmTransport> t(new ShmTransport());
  if (t->usable()) ZCOLL_CHECK(shm::Segment::create(&t->own_));
  *out = std::move(t);
  return zcollSuccess;
}

Result ShmTransport::createFor(const TransportSettings& s, const std::vector<Transport*>&,
                              std::unique_ptr<Transport>* out) {
  out->reset();
  if (!s.forced.empty() && s.forced != "shm") return zcollSuccess;
  std::unique_ptr<ShmTransport> t;
  ZCOLL_CHECK(create(&t));
  if (s.forced == "shm" && !t->usable()) {
    std::string why;
    t->canConnect(PeerReach{}, &why);
    return fail(zcollSystemError, "ZCOLL_TRANSPORT=shm: %s", why.c_str());
  }
  *out = std::move(t);
  return zcollSuccess;
}

ShmTransport::~ShmTransport() = default;

Result ShmTransport::connect(const ConnectArgs& args) {
  if (args.kind != kHostMemory || args.peers.empty()) return zcollSuccess;
  const NodeLayout& layout = *args.layout;
  const int myRank = args.rank;
  const std::vector<int>& peers = args.peers;
  const std::vector<int>& pids = args.pids;
  const uint32_t localRanks = static_cast<uint32_t>(layout.localSize(myRank));
  myLocal_ = layout.localOf[myRank];
  ZCOLL_CHECK(own_.map(localRanks));
  peers_ = std::vector<Peer>(pids.size());
  memory_.startConnect(myRank, static_cast<int>(pids.size()));
  for (int r : peers) {
    Peer& p = peers_[r];
    p.pid = pids[r];
    p.local = layout.localOf[r];
    ZCOLL_CHECK(shm::Segment::open(p.pid, pairing_.segmentFdOf(r), &p.segment));
    ZCOLL_CHECK(p.segment.map(localRanks));
    for (uint32_t i = shm::kRndvSlots; i-- > 0;) p.freeRndv.push_back(i);
    p.connected = true;
    connected_.push_back(r);
    memory_.addPeer(r, p.pid);
  }
  return zcollSuccess;
}

void ShmTransport::flushQueued(int waitMs) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs);
  for (;;) {
    progress();
    bool queued = false;
    for (int r : connected_) queued = queued || !peers_[r].queued.empty();
    if (!queued || std::chrono::steady_clock::now() > deadline) return;
    waitForEvents(1);
  }
}

// ---- Sending --------------------------------------------------------------------------------

void ShmTransport::complete(Request* req, Result status) {
  req->status = status;
  req->done = 1;
}

Result ShmTransport::checkConnected(int peer) const {
  if (peer < 0 || peer >= static_cast<int>(peers_.size()) || !peers_[peer].connected)
    return fail(zcollInternalError, "shm: rank %d is not connected", peer);
  return zcollSuccess;
}

Result ShmTransport::bindRequest(int peer, size_t bytes, Request* req) {
  ZCOLL_CHECK(checkConnected(peer));
  req->transport = this;
  req->peer = peer;
  req->bytes = bytes;
  return zcollSuccess;
}

Result ShmTransport::postSend(int peer, const void* buf, size_t bytes, uint64_t tag,
                              Request* req) {
  ZCOLL_CHECK(bindRequest(peer, bytes, req));
  Peer& p = peers_[peer];
  Outgoing o{bytes <= shm::kEagerBytes ? shm::kEager : shm::kRndv, tag, buf, bytes, req};
  if (!p.queued.empty() || !trySend(p, o)) p.queued.push_back(o);
  return zcollSuccess;
}

// Whether `o` fits now: ring slots for it (and, for a rendezvous, a free state).
bool ShmTransport::hasRoom(const Peer& p, const Outgoing& o) const {
  const uint32_t slots = o.kind == shm::kEager ? shm::eagerSlots(o.bytes) : 1;
  if (o.kind == shm::kRndv && p.freeRndv.empty()) return false;
  return p.head + slots - p.segment.inbound(myLocal_).tail.load(std::memory_order_acquire) <=
         shm::kSlots;
}

// Posts `o` if it has room. An eager send is then complete; a rendezvous completes when the
// receiver marks it done.
bool ShmTransport::trySend(Peer& p, const Outgoing& o) {
  if (!hasRoom(p, o)) return false;
  if (o.kind == shm::kEager) {
    writeSlot(p, o, 0);
    complete(o.req, zcollSuccess);
    return true;
  }
  uint32_t index = p.freeRndv.back();
  myRndv(p).state[index].store(shm::kPosted, std::memory_order_relaxed);  // published below
  writeSlot(p, o, index);
  p.freeRndv.pop_back();
  p.rndvOwner[index] = o.req;
  p.rndvInFlight.push_back(index);
  return true;
}

// Writes `o` into the peer's ring (hasRoom said it fits).
void ShmTransport::writeSlot(Peer& p, const Outgoing& o, uint32_t rndvIndex) {
  shm::Ring& ring = p.segment.inbound(myLocal_);
  const uint32_t slots = o.kind == shm::kEager ? shm::eagerSlots(o.bytes) : 1;
  // Later pieces first; the first slot's seq, published last, makes the whole message visible.
  for (uint32_t i = slots; i-- > 0;) {
    shm::Slot& slot = ring.slots[(p.head + i) % shm::kSlots];
    slot.h.kind = o.kind;
    slot.h.rndvIndex = rndvIndex;
    slot.h.tag = o.tag;
    slot.h.bytes = o.bytes;
    slot.h.addr = reinterpret_cast<uintptr_t>(o.buf);
    if (o.kind == shm::kEager) {
      size_t offset = i * shm::kSlotPayload;
      size_t piece = std::min(shm::kSlotPayload, o.bytes - std::min(o.bytes, offset));
      if (piece > 0) std::memcpy(slot.payload, static_cast<const char*>(o.buf) + offset, piece);
    }
    slot.h.seq.store(p.head + i + 1, std::memory_order_release);
  }
  p.head += slots;
  shm::ring(p.segment.doorbell());
}

void ShmTransport::pumpQueued(Peer& p) {
  while (!p.queued.empty() && trySend(p, p.queued.front())) p.queued.pop_front();
}

// Completes the rendezvous sends the receiver has read.
void ShmTransport::finishRendezvous(Peer& p) {
  for (size_t i = 0; i < p.rndvInFlight.size();) {
    uint32_t index = p.rndvInFlight[i];
    if (myRndv(p).state[index].load(std::memory_order_acquire) != shm::kDone) {
      ++i;
      continue;
    }
    complete(p.rndvOwner[index], zcollSuccess);
    p.rndvOwner[index] = nullptr;
    myRndv(p).state[index].store(shm::kFree, std::memory_order_relaxed);
    p.freeRndv.push_back(index);
    p.rndvInFlight[i] = p.rndvInFlight.back();
    p.rndvInFlight.pop_back();
  }
}

// ---- Receiving ------------------------------------------------------------------------------

Result ShmTransport::postRecv(int peer, void* buf, size_t bytes, uint64_t tag, Request* req) {
  ZCOLL_CHECK(bindRequest(peer, bytes, req));
  Peer& p = peers_[peer];
  Posted recv{tag, buf, bytes, req};
  // Messages still in the ring are newer than those in `unexpected`: the ring is matched
  // against posted receives, in order, when progress drains it.
  for (auto it = p.unexpected.begin(); it != p.unexpected.end(); ++it) {
    if (it->m.tag != tag) continue;
    if (it->m.kind == shm::kEager)
      deliverEager(peer, it->m, it->payload.data(), recv);
    else
      p.reads.emplace_back(recv, it->m);  // no large copy inside a post: see Peer::reads
    p.unexpected.erase(it);
    return zcollSuccess;
  }
  p.posted.push_back(recv);
  return zcollSuccess;
}

void ShmTransport::readMatched(int peer) {
  Peer& p = peers_[peer];
  while (!p.reads.empty()) {
    auto [recv, m] = p.reads.front();
    p.reads.pop_front();
    deliverRendezvous(peer, m, recv);
  }
}

namespace {

// A message of `bytes` for a receive of `posted` bytes: success, or why not.
Result checkSize(int peer, size_t bytes, size_t posted) {
  if (bytes > posted)
    return fail(zcollInvalidUsage, "a message from rank %d is larger than the %zu bytes posted "
                "for it (mismatched counts or types across ranks?)", peer, posted);
  if (bytes < posted)
    return fail(zcollInvalidUsage, "a message of %zu bytes from rank %d matched a receive of "
                "%zu bytes (mismatched counts or types across ranks?)", bytes, peer, posted);
  return zcollSuccess;
}


// Copies the eager message whose first slot is number `first` out of `ring`.
void copyEager(const shm::Ring& ring, uint64_t first, size_t bytes, void* dst) {
  for (size_t offset = 0; offset < bytes; offset += shm::kSlotPayload, ++first)
    std::memcpy(static_cast<char*>(dst) + offset, ring.slots[first % shm::kSlots].payload,
                std::min(shm::kSlotPayload, bytes - offset));
}

}  // namespace

void ShmTransport::drainInbound(int peer) {
  Peer& p = peers_[peer];
  shm::Ring& ring = own_.inbound(p.local);
  bool consumed = false;
  for (;;) {
    shm::Slot& slot = ring.slots[p.tail % shm::kSlots];
    if (slot.h.seq.load(std::memory_order_acquire) != p.tail + 1) break;
    Message m{slot.h.kind, slot.h.rndvIndex, slot.h.tag, slot.h.bytes, slot.h.addr};
    auto match = std::find_if(p.posted.begin(), p.posted.end(),
                              [&](const Posted& r) { return r.tag == m.tag; });
    if (match != p.posted.end()) {
      Posted recv = *match;
      p.posted.erase(match);
      if (m.kind == shm::kEager) {
        Result status = checkSize(peer, m.bytes, recv.bytes);
        if (status == zcollSuccess) copyEager(ring, p.tail, m.bytes, recv.buf);
        complete(recv.req, status);
      } else {
        deliverRendezvous(peer, m, recv);
      }
    } else {
      Unexpected u{m, {}};
      if (m.kind == shm::kEager) {
        u.payload.resize(m.bytes);
        copyEager(ring, p.tail, m.bytes, u.payload.data());
      }
      p.unexpected.push_back(std::move(u));
    }
    p.tail += m.kind == shm::kEager ? shm::eagerSlots(m.bytes) : 1;
    ring.tail.store(p.tail, std::memory_order_release);
    consumed = true;
  }
  if (consumed) shm::ring(p.segment.doorbell());  // the sender may wait for ring space
}

void ShmTransport::deliverEager(int peer, const Message& m, const unsigned char* payload,
                                const Posted& recv) {
  Result status = checkSize(peer, m.bytes, recv.bytes);
  if (status == zcollSuccess && m.bytes > 0) std::memcpy(recv.buf, payload, m.bytes);
  complete(recv.req, status);
}

// Claims the sender's rendezvous state, reads its buffer into the receive (unless the sizes
// differ), and marks it done, which completes the send.
void ShmTransport::deliverRendezvous(int peer, const Message& m, const Posted& recv) {
  Peer& p = peers_[peer];
  std::atomic<uint32_t>& state = theirRndv(p).state[m.rndvIndex % shm::kRndvSlots];
  uint32_t expected = shm::kPosted;
  if (!state.compare_exchange_strong(expected, shm::kReading, std::memory_order_acq_rel)) {
    complete(recv.req, fail(zcollRemoteError, "rank %d withdrew its %zu-byte message (its call "
                            "failed)", peer, m.bytes));
    return;
  }
  Result status = checkSize(peer, m.bytes, recv.bytes);
  if (status == zcollSuccess) status = shm::readProcess(p.pid, m.addr, recv.buf, m.bytes);
  state.store(shm::kDone, std::memory_order_release);
  shm::ring(p.segment.doorbell());
  complete(recv.req, status);
}

// ---- Progress, waiting, cancelling ----------------------------------------------------------

Result ShmTransport::progress() {
  for (int r : connected_) {
    Peer& p = peers_[r];
    pumpQueued(p);
    readMatched(r);
    drainInbound(r);
    finishRendezvous(p);
  }
  if (!settling_.empty()) reclaimSettled();
  return zcollSuccess;
}

bool ShmTransport::pending() const {
  for (int r : connected_) {
    const Peer& p = peers_[r];
    if (!p.posted.empty() || !p.queued.empty() || !p.rndvInFlight.empty() || !p.reads.empty())
      return true;
  }
  return false;
}

bool ShmTransport::hasWork() const {
  for (int r : connected_) {
    const Peer& p = peers_[r];
    if (!p.reads.empty()) return true;
    const shm::Ring& ring = own_.inbound(p.local);
    if (ring.slots[p.tail % shm::kSlots].h.seq.load(std::memory_order_acquire) == p.tail + 1)
      return true;
    for (uint32_t index : p.rndvInFlight)
      if (myRndv(p).state[index].load(std::memory_order_acquire) == shm::kDone) return true;
    if (!p.queued.empty() && hasRoom(p, p.queued.front())) return true;
  }
  return false;
}

bool ShmTransport::waitForEvents(int timeoutMs) {
  if (!own_.mapped()) return false;
  shm::Doorbell& d = own_.doorbell();
  d.sleeping.store(1, std::memory_order_seq_cst);
  uint32_t seen = d.bell.load(std::memory_order_seq_cst);
  if (!hasWork()) shm::sleepOn(d, seen, timeoutMs);
  d.sleeping.store(0, std::memory_order_relaxed);
  return true;
}

void ShmTransport::cancel(Request* req) {
  if (req->peer < 0 || req->peer >= static_cast<int>(peers_.size())) return;
  Peer& p = peers_[req->peer];
  auto queued = std::find_if(p.queued.begin(), p.queued.end(),
                             [&](const Outgoing& o) { return o.req == req; });
  if (queued != p.queued.end()) {
    p.queued.erase(queued);
    return;
  }
  p.posted.remove_if([&](const Posted& r) { return r.req == req; });
  for (auto it = p.reads.begin(); it != p.reads.end(); ++it) {
    if (it->first.req != req) continue;
    // Left kPosted: the sender's send then fails as this rank's failure notice reaches it.
    p.reads.erase(it);
    return;
  }
  for (size_t i = 0; i < p.rndvInFlight.size(); ++i) {
    uint32_t index = p.rndvInFlight[i];
    if (p.rndvOwner[index] != req) continue;
    p.rndvOwner[index] = nullptr;
    p.rndvInFlight[i] = p.rndvInFlight.back();
    p.rndvInFlight.pop_back();
    uint32_t expected = shm::kPosted;
    // Withdrawn: the receiver will never read it (the state stays taken; the comm is broken).
    if (!myRndv(p).state[index].compare_exchange_strong(expected, shm::kWithdrawn))
      settling_.push_back(Settling{req->peer, index});  // being read, or already read
    return;
  }
}

void ShmTransport::reclaimSettled() {
  settling_.erase(std::remove_if(settling_.begin(), settling_.end(),
                                 [&](const Settling& s) {
                                   Peer& p = peers_[s.peer];
                                   if (myRndv(p).state[s.index].load(
                                           std::memory_order_acquire) != shm::kDone &&
                                       !processGone(p.pid))
                                     return false;
                                   myRndv(p).state[s.index].store(shm::kFree);
                                   p.freeRndv.push_back(s.index);
                                   return true;
                                 }),
                  settling_.end());
}

// A receiver that started reading a cancelled send finishes within one process_vm_readv call.
void ShmTransport::settleCancelled(int waitMs) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(2 * waitMs);
  while (!settling_.empty() && std::chrono::steady_clock::now() < deadline) {
    reclaimSettled();
    if (!settling_.empty()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace zcoll
