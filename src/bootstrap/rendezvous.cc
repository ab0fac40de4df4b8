#include "bootstrap/rendezvous.h"

#include <cstring>
#include <random>
#include <thread>

namespace zcoll {

namespace {

constexpr size_t kMaxBlob = 1 << 20;
constexpr int kHelloWaitSec = 2;  // a connection must say hello this fast or be dropped

enum Status : uint32_t {
  kAccepted = 0,
  kBadMagic = 1,
  kBadRank = 2,
  kDuplicateRank = 3,
  kRootTimedOut = 4,
};

struct Hello {
  uint64_t magic;
  int32_t rank;
  int32_t nranks;
};

const char* statusText(uint32_t s) {
  switch (s) {
    case kBadMagic: return "its unique id does not match the root's (magic differs)";
    case kBadRank: return "its rank or nranks disagrees with the other ranks";
    case kDuplicateRank: return "another process already joined with the same rank";
    case kRootTimedOut: return "not every rank arrived before the timeout";
    default: return "unknown status";
  }
}

struct Arrival {
  Socket sock;
  std::string blob;
};

void refuse(const Socket& s, Status st, Deadline deadline) {
  uint32_t code = st;
  sendAll(s, &code, sizeof(code), deadline);
}

// Reads one hello; returns false (after refusing or dropping it) if it does not belong.
bool admit(Socket sock, uint64_t magic, int* nranks, std::vector<Arrival>* ranks) {
  Deadline helloDeadline = deadlineIn(kHelloWaitSec);
  Hello h{};
  if (recvAll(sock, &h, sizeof(h), helloDeadline) != zcollSuccess) return false;
  if (h.magic != magic) {
    ZCOLL_WARN(LogSubsys::kBootstrap, "rendezvous refused a connection: wrong magic");
    refuse(sock, kBadMagic, helloDeadline);
    return false;
  }
  if (*nranks == 0 && h.nranks > 0) {
    *nranks = h.nranks;
    ranks->resize(h.nranks);
  }
  if (h.nranks != *nranks || h.rank < 0 || h.rank >= *nranks) {
    ZCOLL_WARN(LogSubsys::kBootstrap, "rendezvous refused rank %d of %d (expected %d ranks)",
               h.rank, h.nranks, *nranks);
    refuse(sock, kBadRank, helloDeadline);
    return false;
  }
  Arrival& slot = (*ranks)[h.rank];
  if (slot.sock.valid()) {
    ZCOLL_WARN(LogSubsys::kBootstrap, "rendezvous refused a second rank %d", h.rank);
    refuse(sock, kDuplicateRank, helloDeadline);
    return false;
  }
  if (recvBlob(sock, &slot.blob, kMaxBlob, helloDeadline) != zcollSuccess) return false;
  slot.sock = std::move(sock);
  return true;
}

void serveRoot(Socket listener, uint64_t magic, int timeoutSec) {
  Deadline deadline = deadlineIn(timeoutSec);
  int nranks = 0;
  int arrived = 0;
  std::vector<Arrival> ranks;
  while (nranks == 0 || arrived < nranks) {
    Socket s;
    if (acceptBefore(listener, deadline, &s) != zcollSuccess) {
      ZCOLL_WARN(LogSubsys::kBootstrap, "rendezvous root: %d of %d ranks arrived before the "
                 "timeout", arrived, nranks);
      for (Arrival& a : ranks)
        if (a.sock.valid()) refuse(a.sock, kRootTimedOut, deadlineIn(1));
      return;
    }
    if (admit(std::move(s), magic, &nranks, &ranks)) ++arrived;
  }
  ZCOLL_INFO(LogSubsys::kBootstrap, "rendezvous root: all %d ranks arrived", nranks);
  for (Arrival& a : ranks) {
    uint32_t ok = kAccepted;
    if (sendAll(a.sock, &ok, sizeof(ok), deadline) != zcollSuccess) continue;
    for (const Arrival& b : ranks)
      if (sendBlob(a.sock, b.blob, deadline) != zcollSuccess) break;
  }
}

}  // namespace

RendezvousId idFromUnique(const zcollUniqueId& u) {
  RendezvousId id;
  std::memcpy(&id, u.internal, sizeof(id));
  return id;
}

zcollUniqueId uniqueFromId(const RendezvousId& id) {
  zcollUniqueId u;
  std::memset(&u, 0, sizeof(u));
  std::memcpy(u.internal, &id, sizeof(id));
  return u;
}

uint64_t randomMagic() {
  std::random_device rd;
  uint64_t m = (uint64_t{rd()} << 32) ^ rd();
  return m == 0 ? 1 : m;
}

Result startRendezvousRoot(const SockAddr& listenAddr, uint64_t magic, int timeoutSec,
                           RendezvousId* id) {
  SockAddr addr = listenAddr;
  Socket listener;
  ZCOLL_CHECK(listenOn(&addr, &listener));
  id->magic = magic;
  id->root = addr;
  ZCOLL_INFO(LogSubsys::kBootstrap, "rendezvous root listening on %s",
             addrToString(addr).c_str());
  std::thread(serveRoot, std::move(listener), magic, timeoutSec).detach();
  return zcollSuccess;
}

Result rendezvousAllGather(const RendezvousId& id, int rank, int nranks, const std::string& mine,
                           int timeoutSec, std::vector<std::string>* all) {
  Deadline deadline = deadlineIn(timeoutSec);
  if (id.magic == 0 || (id.root.storage.sa.sa_family != AF_INET &&
                        id.root.storage.sa.sa_family != AF_INET6))
    return fail(zcollInvalidArgument, "the unique id is not initialized (call zcollGetUniqueId)");
  Socket s;
  ZCOLL_CHECK(connectBefore(id.root, deadline, &s));
  Hello h{id.magic, rank, nranks};
  Result sent = sendAll(s, &h, sizeof(h), deadline);
  if (sent == zcollSuccess) sent = sendBlob(s, mine, deadline);
  // A refusal arrives right after the hello and the root closes: the blob may then fail to
  // send, but the status explaining why is still readable.
  uint32_t status = 0;
  Result r = recvAll(s, &status, sizeof(status), sent == zcollSuccess ? deadline : deadlineIn(1));
  if (r != zcollSuccess && sent != zcollSuccess) return sent;
  if (r == zcollRemoteError)
    return fail(zcollRemoteError, "the rendezvous at %s closed the connection (root gone?)",
                addrToString(id.root).c_str());
  ZCOLL_CHECK(r);
  if (status != kAccepted) {
    Result code = status == kRootTimedOut ? zcollTimeout : zcollInvalidUsage;
    return fail(code, "the rendezvous at %s refused rank %d: %s",
                addrToString(id.root).c_str(), rank, statusText(status));
  }
  all->resize(nranks);
  for (int i = 0; i < nranks; ++i) ZCOLL_CHECK(recvBlob(s, &(*all)[i], kMaxBlob, deadline));
  return zcollSuccess;
}

}  // namespace zcoll
