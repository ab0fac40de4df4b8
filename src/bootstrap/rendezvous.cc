#include "bootstrap/rendezvous.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <thread>

namespace zcoll {

namespace {

constexpr size_t kMaxBlob = 1 << 20;
constexpr int kHelloWaitSec = 2;     // a connection must say hello (and send its blob) this fast
constexpr size_t kMaxPending = 256;  // connections read at once; beyond, the oldest is dropped

enum Status : uint32_t {
  kAccepted = 0,
  kBadMagic = 1,
  kBadRank = 2,  // followed by the int32 number of ranks the rendezvous expects
  kDuplicateRank = 3,
  kRootTimedOut = 4,
  kAlreadyUsed = 5,
};

struct Hello {
  uint64_t magic;
  int32_t rank;
  int32_t nranks;
};
constexpr size_t kHeaderBytes = sizeof(Hello) + sizeof(uint64_t);  // hello, then blob length

const char* statusText(uint32_t s) {
  switch (s) {
    case kBadMagic: return "its unique id does not match the root's (magic differs)";
    case kBadRank: return "its rank or nranks disagrees with the other ranks";
    case kDuplicateRank: return "another process already joined with the same rank";
    case kRootTimedOut: return "not every rank arrived before the timeout";
    case kAlreadyUsed:
      return "this unique id was already used by a completed initialization (each id serves "
             "one zcollCommInitRank round: create a new one with zcollGetUniqueId)";
    default: return "unknown status";
  }
}

struct Arrival {
  Socket sock;
  std::string blob;
};

// A connection accepted and not yet admitted or dropped: its hello and blob are read without
// blocking, within its own deadline, so idle or garbage connections never hold up the ranks.
struct Pending {
  Socket sock;
  Deadline deadline;
  std::string buf;  // bytes received so far
  bool helloChecked = false;
};

// Best effort, never blocks: the few status bytes fit in any socket buffer.
void refuse(const Socket& s, Status st, int32_t expectedRanks = 0) {
  uint32_t msg[2] = {st, static_cast<uint32_t>(expectedRanks)};
  ::send(s.fd(), msg, st == kBadRank ? sizeof(msg) : sizeof(uint32_t), MSG_NOSIGNAL | MSG_DONTWAIT);
}

int pollTimeoutMs(Deadline d) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d - Clock::now()).count();
  return ms <= 0 ? 0 : static_cast<int>(std::min<long long>(ms, 1000));
}

// The root of one rendezvous: accepts connections, admits each rank's hello + blob, and once all
// ranks are in answers every rank with every blob. With `lingerForReuse` it then keeps answering
// hellos with kAlreadyUsed until its deadline, so a reused unique id fails at once.
class RootService {
 public:
  RootService(Socket listener, uint64_t magic, int expectedRanks, int timeoutSec,
              bool lingerForReuse)
      : listener_(std::move(listener)), magic_(magic), nranks_(expectedRanks),
        deadline_(deadlineIn(timeoutSec)), linger_(lingerForReuse) {
    if (nranks_ > 0) ranks_.resize(nranks_);
  }

  void run() {
    while (!complete()) {
      if (Clock::now() >= deadline_) return timedOut();
      pollOnce();
    }
    ZCOLL_INFO(LogSubsys::kBootstrap, "rendezvous root: all %d ranks arrived", nranks_);
    answerRanks();
    if (linger_) answerLateHellos();
  }

 private:
  bool complete() const { return nranks_ > 0 && arrived_ == nranks_; }

  // Waits for the listener or any pending connection (or the nearest deadline) and serves them.
  void pollOnce() {
    std::vector<pollfd> fds{{listener_.fd(), POLLIN, 0}};
    Deadline wake = deadline_;
    for (const Pending& p : pending_) {
      fds.push_back({p.sock.fd(), POLLIN, 0});
      wake = std::min(wake, p.deadline);
    }
    if (::poll(fds.data(), fds.size(), pollTimeoutMs(wake)) < 0 && errno != EINTR) return;
    for (size_t i = pending_.size(); i-- > 0;) {  // back to front: erase keeps indices valid
      bool ready = (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
      Read r = ready ? readFrom(pending_[i]) : Read::kMore;
      if (r != Read::kMore || Clock::now() >= pending_[i].deadline)  // admitted, dropped, late
        pending_.erase(pending_.begin() + static_cast<long>(i));
    }
    if (fds[0].revents & POLLIN) acceptOne();
  }

  void acceptOne() {
    int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    if (pending_.size() >= kMaxPending) {
      ZCOLL_WARN(LogSubsys::kBootstrap, "rendezvous root: %zu connections say nothing; dropping "
                 "the oldest", pending_.size());
      pending_.erase(pending_.begin());
    }
    pending_.push_back(Pending{Socket(fd), deadlineIn(kHelloWaitSec), {}, false});
  }

  // What reading a pending connection led to.
  enum class Read { kMore, kDrop, kAdmitted };

  // Reads what is there: more to come, dropped (closed, refused, garbage), or admitted as a rank
  // (its hello and blob complete; its socket moved into the rank's slot).
  Read readFrom(Pending& p) {
    size_t need = p.buf.size() < kHeaderBytes ? kHeaderBytes : kHeaderBytes + blobLength(p);
    char tmp[4096];
    ssize_t n = ::recv(p.sock.fd(), tmp, std::min(sizeof(tmp), need - p.buf.size()), 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return Read::kDrop;
    if (n > 0) p.buf.append(tmp, static_cast<size_t>(n));
    if (!p.helloChecked && p.buf.size() >= sizeof(Hello)) {
      if (lingering_) {  // the rendezvous is over: this id is being reused
        refuse(p.sock, helloOf(p).magic == magic_ ? kAlreadyUsed : kBadMagic);
        return Read::kDrop;
      }
      if (!checkHello(p)) return Read::kDrop;
      p.helloChecked = true;
    }
    if (p.buf.size() < kHeaderBytes) return Read::kMore;
    if (blobLength(p) > kMaxBlob) {
      ZCOLL_WARN(LogSubsys::kBootstrap, "rendezvous root: a %llu-byte rank description "
                 "(limit %zu): connection dropped", static_cast<unsigned long long>(blobLength(p)),
                 kMaxBlob);
      return Read::kDrop;
    }
    if (p.buf.size() < kHeaderBytes + blobLength(p)) return Read::kMore;
    return admit(p) ? Read::kAdmitted : Read::kDrop;
  }

  static uint64_t blobLength(const Pending& p) {
    uint64_t len = 0;
    std::memcpy(&len, p.buf.data() + sizeof(Hello), sizeof(len));
    return len;
  }
  static Hello helloOf(const Pending& p) {
    Hello h{};
    std::memcpy(&h, p.buf.data(), sizeof(h));
    return h;
  }

  // Refuses (and drops) a hello that cannot be one of this rendezvous' ranks.
  bool checkHello(const Pending& p) {
    Hello h = helloOf(p);
    if (h.magic != magic_) {
      ZCOLL_WARN(LogSubsys::kBootstrap, "rendezvous refused a connection: wrong magic");
      refuse(p.sock, kBadMagic);
      return false;
    }
    int expected = nranks_ > 0 ? nranks_ : h.nranks;
    if (h.nranks <= 0 || h.nranks != expected || h.rank < 0 || h.rank >= expected) {
      ZCOLL_WARN(LogSubsys::kBootstrap, "rendezvous refused rank %d of %d (expected %d ranks)",
                 h.rank, h.nranks, expected);
      refuse(p.sock, kBadRank, expected);
      return false;
    }
    if (nranks_ > 0 && ranks_[h.rank].sock.valid()) return duplicate(p, h.rank);
    return true;
  }

  bool duplicate(const Pending& p, int rank) {
    ZCOLL_WARN(LogSubsys::kBootstrap, "rendezvous refused a second rank %d", rank);
    refuse(p.sock, kDuplicateRank);
    return false;
  }

  // Takes a complete hello + blob as its rank (the first complete one for a rank wins). The
  // first admitted hello fixes the number of ranks when the root was not told it.
  bool admit(Pending& p) {
    Hello h = helloOf(p);
    if (nranks_ == 0) {
      nranks_ = h.nranks;
      ranks_.resize(nranks_);
    }
    if (h.nranks != nranks_) {
      refuse(p.sock, kBadRank, nranks_);
      return false;
    }
    Arrival& slot = ranks_[h.rank];
    if (slot.sock.valid()) return duplicate(p, h.rank);
    slot.blob = p.buf.substr(kHeaderBytes);
    slot.sock = std::move(p.sock);
    ++arrived_;
    return true;
  }

  void timedOut() {
    ZCOLL_WARN(LogSubsys::kBootstrap, "rendezvous root: %d of %d ranks arrived before the "
               "timeout", arrived_, nranks_);
    for (Arrival& a : ranks_)
      if (a.sock.valid()) refuse(a.sock, kRootTimedOut);
  }

  void answerRanks() {
    for (Arrival& a : ranks_) {
      uint32_t ok = kAccepted;
      if (sendAll(a.sock, &ok, sizeof(ok), deadline_) != zcollSuccess) continue;
      for (const Arrival& b : ranks_)
        if (sendBlob(a.sock, b.blob, deadline_) != zcollSuccess) break;
    }
    ranks_.clear();
  }

  // After the rendezvous: a hello with this id is a reuse of it; say so at once.
  void answerLateHellos() {
    lingering_ = true;
    while (Clock::now() < deadline_) pollOnce();
  }

  Socket listener_;
  uint64_t magic_;
  int nranks_;  // 0 until known
  Deadline deadline_;
  bool linger_;
  bool lingering_ = false;
  int arrived_ = 0;
  std::vector<Arrival> ranks_;
  std::vector<Pending> pending_;
};

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

Result startRendezvousRoot(const SockAddr& listenAddr, uint64_t magic, int expectedRanks,
                           int timeoutSec, bool lingerForReuse, RendezvousId* id) {
  SockAddr addr = listenAddr;
  Socket listener;
  ZCOLL_CHECK(listenOn(&addr, &listener));
  id->magic = magic;
  id->root = addr;
  ZCOLL_INFO(LogSubsys::kBootstrap, "rendezvous root listening on %s",
             addrToString(addr).c_str());
  std::thread([service = std::make_shared<RootService>(std::move(listener), magic, expectedRanks,
                                                      timeoutSec, lingerForReuse)] {
    service->run();
  }).detach();
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
  if (status == kBadRank) {
    int32_t expected = 0;
    if (recvAll(s, &expected, sizeof(expected), deadlineIn(1)) == zcollSuccess &&
        expected != nranks)
      return fail(zcollInvalidUsage, "the rendezvous at %s refused rank %d: this rank says there "
                  "are %d ranks (WORLD_SIZE / nranks), the rendezvous expects %d",
                  addrToString(id.root).c_str(), rank, nranks, expected);
  }
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
