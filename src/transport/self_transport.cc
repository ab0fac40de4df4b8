#include "transport/self_transport.h"

#include <cstring>

namespace zcoll {

void SelfTransport::completeWith(Request* req, Result status) {
  req->status = status;
  req->done = 1;
}

Result SelfTransport::match(Pending& send, Pending& recv) {
  Result status = zcollSuccess;
  if (send.bytes != recv.bytes) {
    status = fail(zcollInvalidUsage, "self send of %zu bytes matched a receive of %zu bytes",
                  send.bytes, recv.bytes);
  } else if (send.bytes > 0 && send.buf != recv.buf) {
    std::memcpy(recv.buf, send.buf, send.bytes);
  }
  completeWith(send.req, status);
  completeWith(recv.req, status);
  return status;
}

Result SelfTransport::postSend(int peer, const void* buf, size_t bytes, uint64_t tag,
                               Request* req) {
  req->transport = this;
  req->peer = peer;
  req->bytes = bytes;
  Pending send{tag, const_cast<void*>(buf), bytes, req};
  for (auto it = recvs_.begin(); it != recvs_.end(); ++it) {
    if (it->tag == tag) {
      Pending recv = *it;
      recvs_.erase(it);
      return match(send, recv);
    }
  }
  sends_.push_back(send);
  return zcollSuccess;
}

Result SelfTransport::postRecv(int peer, void* buf, size_t bytes, uint64_t tag, Request* req) {
  req->transport = this;
  req->peer = peer;
  req->bytes = bytes;
  Pending recv{tag, buf, bytes, req};
  for (auto it = sends_.begin(); it != sends_.end(); ++it) {
    if (it->tag == tag) {
      Pending send = *it;
      sends_.erase(it);
      return match(send, recv);
    }
  }
  recvs_.push_back(recv);
  return zcollSuccess;
}

void SelfTransport::cancel(Request* req) {
  sends_.remove_if([req](const Pending& p) { return p.req == req; });
  recvs_.remove_if([req](const Pending& p) { return p.req == req; });
}

}  // namespace zcoll
