#include "transport/staged_transport.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/log.h"
#include "base/stream_holds.h"

namespace zcoll {

namespace {
constexpr int kDrainMs = 2000;  // copies of at most a message; they take milliseconds

// The messages' host memory: ordinary, 64-byte aligned.
Result hostAlloc(size_t bytes, void** out) {
  *out = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  return *out != nullptr ? zcollSuccess
                         : fail(zcollSystemError, "staged: out of host memory (%zu bytes)", bytes);
}
void hostFree(void* p) { std::free(p); }
}  // namespace

struct StagedTransport::Op {
  Request* req = nullptr;  // the caller's; null once cancelled
  bool send = false;
  int peer = -1;
  uint64_t tag = 0;
  char* dev = nullptr;  // the device buffer
  size_t bytes = 0;
  size_t chunks = 0;
  BlockPool::Block block;        // host memory: [header][bytes]
  std::vector<Request> wire;     // per chunk, on the host route (sized once: it holds pointers)
  std::vector<uint64_t> ticket;  // per chunk: its device copy
  std::vector<int> slot;         // per chunk: the ring slot of its copy, -1 when none
  std::shared_ptr<DeviceFence> after;  // the call's work before the post (null: none)
  size_t started = 0;  // chunks whose device copy started
  size_t landed = 0;   // chunks whose device copy is done (send: and handed to the host route)

  size_t chunkBytes(size_t i) const { return std::min(kChunkBytes, bytes - i * kChunkBytes); }
  char* data(size_t i) const {
    return static_cast<char*>(block.ptr) + kHeaderBytes + i * kChunkBytes;
  }
  // What chunk i is on the wire: chunk 0 carries the header in front.
  char* wireAt(size_t i) const { return i == 0 ? static_cast<char*>(block.ptr) : data(i); }
  size_t wireBytes(size_t i) const { return chunkBytes(i) + (i == 0 ? kHeaderBytes : 0); }
};

StagedTransport::StagedTransport(std::unique_ptr<DeviceIpc> engine)
    : engine_(std::move(engine)),
      buffers_(hostAlloc, hostFree, kHeaderBytes) {}

Result StagedTransport::create(std::unique_ptr<DeviceIpc> engine, int waitMs,
                               std::unique_ptr<StagedTransport>* out) {
  std::unique_ptr<StagedTransport> t(new StagedTransport(std::move(engine)));
  ZCOLL_CHECK(streams::whenNoneHeld(waitMs, "staged: pinning its staging ring", [&]() -> Result {
    for (int i = 0; i < kRingSlots; ++i) {
      void* p = nullptr;
      ZCOLL_CHECK(t->engine_->allocHost(kChunkBytes, &p));
      t->ring_.push_back(p);
      t->freeSlots_.push_back(i);
    }
    return zcollSuccess;
  }));
  *out = std::move(t);
  return zcollSuccess;
}

Result StagedTransport::createFor(const TransportSettings& s, const std::vector<Transport*>&,
                                  std::unique_ptr<Transport>* out) {
  out->reset();
  if (!s.device.present || s.makeIpc == nullptr) return zcollSuccess;
  std::unique_ptr<DeviceIpc> engine;
  std::unique_ptr<StagedTransport> t;
  Result r = s.makeIpc(&engine);
  if (r == zcollSuccess) r = create(std::move(engine), s.copyWaitMs, &t);
  if (r != zcollSuccess) {
    ZCOLL_WARN(LogSubsys::kNet, "the %s device's copy engine did not start (%s): calls on device "
               "buffers will fail on this rank", s.device.kind, zcollGetLastError(nullptr));
    return zcollSuccess;
  }
  *out = std::move(t);
  return zcollSuccess;
}

StagedTransport::~StagedTransport() {
  std::vector<Op*> posted = active_;  // cancel() takes each out of active_
  for (Op* op : posted) cancel(op->req);
  if (engine_->drain(copyDrainMs(kDrainMs)) != zcollSuccess) ringLost_ = true;
  buffers_.release();
  for (const BlockPool::Block& b : retired_) hostFree(b.ptr);
  if (ringLost_) {
    ZCOLL_WARN(LogSubsys::kNet, "staged: a device copy did not end; its pinned ring stays");
    abandonDeviceIpc(std::move(engine_));  // its copies may still run: the ring and engine stay
    return;
  }
  // The ring and the engine go once no stream is held (cudaFreeHost synchronizes implicitly).
  std::shared_ptr<DeviceIpc> engine(std::move(engine_));
  std::vector<void*> ring = ring_;
  streams::deferUntilNoneHeld([engine, ring] {
    for (void* p : ring) engine->freeHost(p);
  });
}

bool StagedTransport::canConnect(const PeerReach& peer, std::string* why) const {
  // Through host memory, in pipelined 1 MiB chunks, to every peer: the fallback.
  *why = peer.self ? "this rank" : "";
  return true;
}

bool StagedTransport::peerFailed(int peer) const {
  return peer >= 0 && static_cast<size_t>(peer) < hosts_.size() && hosts_[peer] != nullptr &&
         hosts_[peer]->peerFailed(peer);
}

int StagedTransport::takeSlot() {
  if (freeSlots_.empty()) return -1;
  const int s = freeSlots_.back();
  freeSlots_.pop_back();
  return s;
}

// ---- Posting ------------------------------------------------------------------------------

Result StagedTransport::start(Op* op, Request* req) {
  op->req = req;
  op->chunks = (op->bytes + kChunkBytes - 1) / kChunkBytes;
  op->wire.resize(op->chunks);
  op->ticket.assign(op->chunks, 0);
  op->slot.assign(op->chunks, -1);
  ZCOLL_CHECK(buffers_.take(op->bytes, &op->block));
  req->bind(this, op, op->peer, op->bytes);
  return zcollSuccess;
}

// progress() copies the chunks to the host as ring slots allow and sends each once it is there.
Result StagedTransport::postSendAfter(int peer, const void* buf, size_t bytes, uint64_t tag,
                                      Request* req, std::shared_ptr<DeviceFence> after) {
  auto op = std::make_unique<Op>();
  op->after = std::move(after);
  op->send = true;
  op->peer = peer;
  op->tag = tag;
  op->dev = static_cast<char*>(const_cast<void*>(buf));
  op->bytes = bytes;
  ZCOLL_CHECK(start(op.get(), req));
  const uint64_t total = bytes;
  std::memcpy(op->block.ptr, &total, kHeaderBytes);
  active_.push_back(op.release());
  return zcollSuccess;
}

// Every chunk's receive is posted now; progress() copies each to the device once it arrived.
Result StagedTransport::postRecvAfter(int peer, void* buf, size_t bytes, uint64_t tag,
                                      Request* req, std::shared_ptr<DeviceFence> after) {
  auto op = std::make_unique<Op>();
  op->after = std::move(after);
  op->peer = peer;
  op->tag = tag;
  op->dev = static_cast<char*>(buf);
  op->bytes = bytes;
  ZCOLL_CHECK(start(op.get(), req));
  Op* o = op.release();
  active_.push_back(o);
  for (size_t i = 0; i < o->chunks; ++i) {
    Result r = hosts_[peer]->postRecv(peer, o->wireAt(i), o->wireBytes(i), tag, &o->wire[i]);
    if (r != zcollSuccess) {
      cancel(req);
      return r;
    }
  }
  return zcollSuccess;
}

// ---- Progress -----------------------------------------------------------------------------

void StagedTransport::finish(Op* op, Result status) {
  if (op->req != nullptr) op->req->finish(status);
  delete op;
}

// Gives up the chunks still on the host route and waits for the message's copies, which read or
// write the caller's buffer and the ring. Its buffer may still be touched by a host transport:
// retired. A copy that does not end keeps its slot (and the ring) forever.
void StagedTransport::abandon(Op* op) {
  bool pending = false;
  for (Request& w : op->wire) {
    if (w.complete() || w.transport == nullptr) continue;
    hosts_[op->peer]->cancel(&w);
    pending = true;
  }
  const bool drained = engine_->drain(copyDrainMs(kDrainMs)) == zcollSuccess;
  for (size_t i = op->landed; i < op->started; ++i) {
    if (op->slot[i] < 0) continue;
    if (drained) freeSlots_.push_back(op->slot[i]);
    op->slot[i] = -1;
  }
  if (!drained) ringLost_ = true;
  if (pending) {
    retired_.push_back(op->block);
  } else {
    buffers_.giveBack(op->block);
  }
  op->block = BlockPool::Block{};
}

// Copies chunks to the host while ring slots are free; each chunk whose copy is done goes from
// its slot into the message's buffer and onto the host route, in order. Done when all are sent.
Result StagedTransport::advanceSend(Op* op, bool* finished) {
  for (int s; op->started < op->chunks && (s = takeSlot()) >= 0; ++op->started) {
    const size_t i = op->started;
    op->slot[i] = s;
    ZCOLL_CHECK(engine_->startCopy(ring_[s], op->dev + i * kChunkBytes, op->chunkBytes(i),
                                   &op->ticket[i], DeviceIpc::Lane::kOut, op->after.get()));
  }
  for (; op->landed < op->started; ++op->landed) {
    const size_t i = op->landed;
    bool copied = false;
    ZCOLL_CHECK(engine_->copyDone(op->ticket[i], &copied));
    if (!copied) break;
    std::memcpy(op->data(i), ring_[op->slot[i]], op->chunkBytes(i));
    freeSlots_.push_back(op->slot[i]);
    op->slot[i] = -1;
    ZCOLL_CHECK(hosts_[op->peer]->postSend(op->peer, op->wireAt(i), op->wireBytes(i), op->tag,
                                           &op->wire[i]));
  }
  for (size_t i = 0; i < op->landed; ++i) {
    if (!op->wire[i].complete()) return zcollSuccess;
    ZCOLL_CHECK(op->wire[i].status);
  }
  if (op->landed < op->chunks) return zcollSuccess;
  buffers_.giveBack(op->block);
  op->block = BlockPool::Block{};
  finish(op, zcollSuccess);
  *finished = true;
  return zcollSuccess;
}

// Copies each chunk that arrived into a ring slot and from there to the device, in order (chunk
// 0's header first checked), while slots are free; done when the last copy is.
Result StagedTransport::advanceRecv(Op* op, bool* finished) {
  for (; op->started < op->chunks; ++op->started) {
    const size_t i = op->started;
    if (!op->wire[i].complete()) break;
    ZCOLL_CHECK(op->wire[i].status);
    if (i == 0) {
      uint64_t total = 0;
      std::memcpy(&total, op->block.ptr, kHeaderBytes);
      if (total != op->bytes)
        return fail(zcollInvalidUsage, "rank %d sent %llu bytes to a %zu-byte receive "
                    "(mismatched counts or types across ranks?)", op->peer,
                    static_cast<unsigned long long>(total), op->bytes);
    }
    const int s = takeSlot();
    if (s < 0) break;
    op->slot[i] = s;
    std::memcpy(ring_[s], op->data(i), op->chunkBytes(i));
    ZCOLL_CHECK(engine_->startCopy(op->dev + i * kChunkBytes, ring_[s], op->chunkBytes(i),
                                   &op->ticket[i], DeviceIpc::Lane::kIn, op->after.get()));
  }
  for (; op->landed < op->started; ++op->landed) {
    const size_t i = op->landed;
    bool copied = false;
    ZCOLL_CHECK(engine_->copyDone(op->ticket[i], &copied));
    if (!copied) break;
    freeSlots_.push_back(op->slot[i]);
    op->slot[i] = -1;
  }
  if (op->landed < op->chunks) return zcollSuccess;
  buffers_.giveBack(op->block);
  op->block = BlockPool::Block{};
  finish(op, zcollSuccess);
  *finished = true;
  return zcollSuccess;
}

Result StagedTransport::progress() {
  for (size_t i = 0; i < active_.size();) {
    Op* op = active_[i];
    bool finished = false;
    Result r = op->send ? advanceSend(op, &finished) : advanceRecv(op, &finished);
    if (r != zcollSuccess) {  // this message fails; the transport itself is fine
      abandon(op);
      finish(op, r);
      finished = true;
    }
    if (finished) {
      active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  return zcollSuccess;
}

void StagedTransport::cancel(Request* req) {
  auto* op = static_cast<Op*>(req->impl);
  if (op == nullptr) return;
  active_.erase(std::remove(active_.begin(), active_.end(), op), active_.end());
  req->impl = nullptr;
  op->req = nullptr;
  abandon(op);
  finish(op, zcollRemoteError);
}

}  // namespace zcoll
