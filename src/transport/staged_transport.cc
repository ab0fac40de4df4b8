#include "transport/staged_transport.h"

#include <algorithm>
#include <cstring>

#include "base/log.h"

namespace zcoll {

namespace {
constexpr int kDrainMs = 2000;  // copies of at most a message; they take milliseconds
}  // namespace

struct StagedTransport::Op {
  Request* req = nullptr;  // the caller's; null once cancelled
  bool send = false;
  int peer = -1;
  uint64_t tag = 0;
  char* dev = nullptr;  // the device buffer
  size_t bytes = 0;
  size_t chunks = 0;
  BlockPool::Block block;        // [header][bytes]
  std::vector<Request> wire;     // per chunk, on the host route (sized once: it holds pointers)
  std::vector<uint64_t> ticket;  // per chunk: its copy (to the host for a send, to the device for
                                 // a receive)
  size_t next = 0;  // send: chunks handed to the host route; receive: chunks copied to the device

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
      blocks_([this](size_t bytes, void** out) { return engine_->allocHost(bytes, out); },
              [this](void* p) { engine_->freeHost(p); }) {}

Result StagedTransport::create(std::unique_ptr<DeviceIpc> engine,
                               std::unique_ptr<StagedTransport>* out) {
  out->reset(new StagedTransport(std::move(engine)));
  return zcollSuccess;
}

Result StagedTransport::createFor(const TransportSettings& s, const std::vector<Transport*>&,
                                  std::unique_ptr<Transport>* out) {
  out->reset();
  if (!s.device.present || s.makeIpc == nullptr) return zcollSuccess;
  std::unique_ptr<DeviceIpc> engine;
  std::unique_ptr<StagedTransport> t;
  Result r = s.makeIpc(&engine);
  if (r == zcollSuccess) r = create(std::move(engine), &t);
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
  (void)engine_->drain(kDrainMs);
  blocks_.release();
  for (const BlockPool::Block& b : retired_) engine_->freeHost(b.ptr);
}

bool StagedTransport::canConnect(const PeerReach& peer, std::string* why) const {
  // Through pinned host memory, in pipelined 1 MiB chunks, to every peer: the fallback.
  *why = peer.self ? "this rank" : "";
  return true;
}

bool StagedTransport::peerFailed(int peer) const {
  return peer >= 0 && static_cast<size_t>(peer) < hosts_.size() && hosts_[peer] != nullptr &&
         hosts_[peer]->peerFailed(peer);
}

// ---- Posting ------------------------------------------------------------------------------

Result StagedTransport::start(Op* op, Request* req) {
  op->req = req;
  op->chunks = (op->bytes + kChunkBytes - 1) / kChunkBytes;
  op->wire.resize(op->chunks);
  op->ticket.assign(op->chunks, 0);
  ZCOLL_CHECK(blocks_.take(kHeaderBytes + op->bytes, &op->block));
  req->bind(this, op, op->peer, op->bytes);
  return zcollSuccess;
}

// Every chunk's copy to the host is started now; progress() sends each once it is done.
Result StagedTransport::postSend(int peer, const void* buf, size_t bytes, uint64_t tag,
                                 Request* req) {
  auto op = std::make_unique<Op>();
  op->send = true;
  op->peer = peer;
  op->tag = tag;
  op->dev = static_cast<char*>(const_cast<void*>(buf));
  op->bytes = bytes;
  Result r = start(op.get(), req);
  if (r == zcollSuccess) {
    const uint64_t total = bytes;
    std::memcpy(op->block.ptr, &total, kHeaderBytes);
    for (size_t i = 0; i < op->chunks && r == zcollSuccess; ++i)
      r = engine_->startCopy(op->data(i), op->dev + i * kChunkBytes, op->chunkBytes(i),
                             &op->ticket[i]);
  }
  if (r != zcollSuccess) {
    (void)engine_->drain(kDrainMs);
    blocks_.giveBack(op->block);
    req->reset();
    return r;
  }
  active_.push_back(op.release());
  return zcollSuccess;
}

// Every chunk's receive is posted now; progress() copies each to the device once it arrived.
Result StagedTransport::postRecv(int peer, void* buf, size_t bytes, uint64_t tag, Request* req) {
  auto op = std::make_unique<Op>();
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
// write the caller's buffer. Its block may still be touched by a host transport: retired.
void StagedTransport::abandon(Op* op) {
  bool pending = false;
  for (Request& w : op->wire) {
    if (w.complete() || w.transport == nullptr) continue;
    hosts_[op->peer]->cancel(&w);
    pending = true;
  }
  (void)engine_->drain(kDrainMs);
  if (pending) {
    retired_.push_back(op->block);
  } else {
    blocks_.giveBack(op->block);
  }
  op->block = BlockPool::Block{};
}

// Hands each chunk whose copy is done to the host route, in order; done when all are sent.
Result StagedTransport::advanceSend(Op* op, bool* finished) {
  for (; op->next < op->chunks; ++op->next) {
    bool copied = false;
    ZCOLL_CHECK(engine_->copyDone(op->ticket[op->next], &copied));
    if (!copied) break;
    const size_t i = op->next;
    ZCOLL_CHECK(hosts_[op->peer]->postSend(op->peer, op->wireAt(i), op->wireBytes(i), op->tag,
                                           &op->wire[i]));
  }
  for (size_t i = 0; i < op->next; ++i) {
    if (!op->wire[i].complete()) return zcollSuccess;
    ZCOLL_CHECK(op->wire[i].status);
  }
  if (op->next < op->chunks) return zcollSuccess;
  blocks_.giveBack(op->block);
  op->block = BlockPool::Block{};
  finish(op, zcollSuccess);
  *finished = true;
  return zcollSuccess;
}

// Copies each chunk that arrived to the device, in order (chunk 0's header first checked);
// done when the last copy is.
Result StagedTransport::advanceRecv(Op* op, bool* finished) {
  for (; op->next < op->chunks; ++op->next) {
    const size_t i = op->next;
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
    ZCOLL_CHECK(engine_->startCopy(op->dev + i * kChunkBytes, op->data(i), op->chunkBytes(i),
                                   &op->ticket[i]));
  }
  if (op->next < op->chunks) return zcollSuccess;
  bool copied = false;
  ZCOLL_CHECK(engine_->copyDone(op->ticket.back(), &copied));  // copies finish in start order
  if (!copied) return zcollSuccess;
  blocks_.giveBack(op->block);
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
