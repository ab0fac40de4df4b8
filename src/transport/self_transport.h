// Loopback transport: a rank sending to itself. Matches posted sends and receives by tag and
// copies once; no thread, no allocation per message beyond the pending lists.
#pragma once

#include <list>

#include "transport/transport.h"

namespace zcoll {

class SelfTransport final : public Transport {
 public:
  const char* name() const override { return "self"; }
  bool canConnect(const PeerReach& peer, std::string* why) const override {
    *why = peer.self ? "this rank, one memory copy" : "reaches this rank only";
    return peer.self;
  }
  Result postSend(int peer, const void* buf, size_t bytes, uint64_t tag, Request* req) override;
  Result postRecv(int peer, void* buf, size_t bytes, uint64_t tag, Request* req) override;
  Result progress() override { return zcollSuccess; }
  bool completesOnPost() const override { return true; }
  void cancel(Request* req) override;

 private:
  struct Pending {
    uint64_t tag;
    void* buf;  // source for sends, destination for receives
    size_t bytes;
    Request* req;
  };
  static void completeWith(Request* req, Result status);
  Result match(Pending& send, Pending& recv);

  std::list<Pending> sends_;
  std::list<Pending> recvs_;
};

}  // namespace zcoll
