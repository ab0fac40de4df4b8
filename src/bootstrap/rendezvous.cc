#include "bootstrap/rendezvous.h"

#include "bootstrap/hello.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

namespace zcoll {

namespace {

constexpr int kHelloWaitSec = 2;     // a connection must say hello (and send its blob) this fast
constexpr size_t kMaxPending = 256;  // connections read at once; beyond, the oldest is dropped

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
};

// Best effort, never blocks: the few status bytes fit in any socket buffer.
void refuse(const Socket& s, uint32_t st, int32_t expectedRanks = 0) {
  if (st == kHelloTooLarge) return;  // not an answer a rank waits for: just drop it
  uint32_t msg[2] = {st, static_cast<uint32_t>(expectedRanks)};
  ::send(s.fd(), msg, st == kHelloBadRank ? sizeof(msg) : sizeof(uint32_t),
         MSG_NOSIGNAL | MSG_DONTWAIT);
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
  RootService(Socket listener, const SockAddr& addr, uint64_t magic, int expectedRanks,
              int timeoutSec, bool lingerForReuse)
      : listener_(std::move(listener)), addr_(addr), magic_(magic), nranks_(expectedRanks),
        deadline_(deadlineIn(timeoutSec)), linger_(lingerForReuse) {
    if (nranks_ > 0) ranks_.resize(nranks_);
  }

  // From any thread: the service refuses every rank from now on (kHelloCancelled). A
  // connection of its own wakes its poll (no descriptor kept for it: the service outlives
  // communicators, and tests count their descriptors).
  void cancel() {
    cancelled_.store(true);
    Socket wake;
    (void)connectBefore(addr_, deadlineIn(1), &wake);
  }

  void run() {
    while (!complete()) {
      if (cancelled_.load()) return calledOff();
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
    pending_.push_back(Pending{Socket(fd), deadlineIn(kHelloWaitSec), {}});
  }

  // What reading a pending connection led to.
  enum class Read { kMore, kDrop, kAdmitted };

  // Reads what is there (never past what parseHello asks for): more to come, dropped (closed,
  // refused, garbage), or admitted as a rank (its socket moved into the rank's slot).
  Read readFrom(Pending& p) {
    ParsedHello parsed;
    HelloParse state = parseHello(p.buf.data(), p.buf.size(), rules(), &parsed);
    char tmp[4096];
    size_t want = std::min(sizeof(tmp), parsed.bytesNeeded - p.buf.size());
    ssize_t n = ::recv(p.sock.fd(), tmp, want, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return Read::kDrop;
    if (n > 0) p.buf.append(tmp, static_cast<size_t>(n));
    state = parseHello(p.buf.data(), p.buf.size(), rules(), &parsed);
    if (state == HelloParse::kNeedMore) return Read::kMore;
    if (lingering_) {  // the rendezvous is over: a hello with this magic reuses the id
      const uint32_t late = cancelled_.load() ? kHelloCancelled : kHelloAlreadyUsed;
      refuse(p.sock, parsed.refusal == kHelloBadMagic ? kHelloBadMagic : late);
      return Read::kDrop;
    }
    if (state == HelloParse::kRejected) {
      ZCOLL_WARN(LogSubsys::kBootstrap, "rendezvous refused a connection (rank %d of %d): %s",
                 parsed.header.rank, parsed.header.nranks, helloStatusText(parsed.refusal));
      refuse(p.sock, parsed.refusal, nranks_);
      return Read::kDrop;
    }
    return admit(p, parsed) ? Read::kAdmitted : Read::kDrop;
  }

  HelloRules rules() const { return HelloRules{magic_, nranks_}; }

  bool duplicate(const Pending& p, int rank) {
    ZCOLL_WARN(LogSubsys::kBootstrap, "rendezvous refused a second rank %d", rank);
    refuse(p.sock, kHelloDuplicateRank);
    return false;
  }

  // Takes a complete hello + blob as its rank (the first complete one for a rank wins). The
  // first admitted hello fixes the number of ranks when the root was not told it.
  bool admit(Pending& p, const ParsedHello& parsed) {
    const Hello& h = parsed.header;
    if (nranks_ == 0) {
      nranks_ = h.nranks;
      ranks_.resize(nranks_);
    }
    Arrival& slot = ranks_[h.rank];
    if (slot.sock.valid()) return duplicate(p, h.rank);
    slot.blob = p.buf.substr(kHelloHeaderBytes);
    slot.sock = std::move(p.sock);
    ++arrived_;
    return true;
  }

  // Who never arrived, for the ranks that did (best effort, never blocks: it fits any buffer).
  void timedOut() {
    ZCOLL_WARN(LogSubsys::kBootstrap, "rendezvous root: %d of %d ranks arrived before the "
               "timeout", arrived_, nranks_);
    struct {
      uint32_t status;
      TimedOutReport report;
    } msg{};
    msg.status = kHelloRootTimedOut;
    msg.report.arrived = arrived_;
    msg.report.nranks = nranks_;
    for (int r = 0; r < nranks_; ++r) {
      if (ranks_[r].sock.valid()) continue;
      if (msg.report.missingCount < TimedOutReport::kListed)
        msg.report.missing[msg.report.missingCount] = r;
      ++msg.report.missingCount;
    }
    for (Arrival& a : ranks_)
      if (a.sock.valid()) ::send(a.sock.fd(), &msg, sizeof(msg), MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  void calledOff() {
    ZCOLL_INFO(LogSubsys::kBootstrap, "rendezvous root: called off with %d of %d ranks in",
               arrived_, nranks_);
    for (Arrival& a : ranks_)
      if (a.sock.valid()) refuse(a.sock, kHelloCancelled);
    ranks_.clear();
    if (linger_) answerLateHellos();
  }

  void answerRanks() {
    for (Arrival& a : ranks_) {
      uint32_t ok = kHelloAccepted;
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
  SockAddr addr_;  // where it listens
  uint64_t magic_;
  int nranks_;  // 0 until known
  Deadline deadline_;
  bool linger_;
  std::atomic<bool> cancelled_{false};
  bool lingering_ = false;
  int arrived_ = 0;
  std::vector<Arrival> ranks_;
  std::vector<Pending> pending_;
};

// The services this process runs, by magic, so cancelRendezvousRoot can find one.
std::mutex servicesMu;
std::map<uint64_t, std::weak_ptr<RootService>>& liveServices() {
  static auto* services = new std::map<uint64_t, std::weak_ptr<RootService>>;  // never freed:
  return *services;  // detached service threads may outlive static destruction
}

// Who serves a rendezvous, for messages about a root that cannot be reached.
constexpr const char* kRootWho =
    "the process that serves the rendezvous (rank 0 under zcollCommInitFromEnv, zcollrun and "
    "torchrun; the caller of zcollGetUniqueId or zcollCommGetUniqueId otherwise)";

// "2 of 4 ranks arrived; ranks 1, 3 never did"; with names: "...; new rank 5 never did".
std::string describeTimeout(const TimedOutReport& t, const RendezvousRankName& nameOf) {
  std::string text = std::to_string(t.arrived) + " of " + std::to_string(t.nranks) +
                     " ranks arrived; ";
  if (!nameOf) text += t.missingCount > 1 ? "ranks " : "rank ";
  const int listed = std::min(t.missingCount, TimedOutReport::kListed);
  for (int i = 0; i < listed; ++i)
    text += (i ? ", " : "") + (nameOf ? nameOf(t.missing[i]) : std::to_string(t.missing[i]));
  if (t.missingCount > listed) text += " and " + std::to_string(t.missingCount - listed) + " more";
  return text + (t.missingCount > 1 ? " never did" : " never did (it never came, or died "
                                                     "before it reached the rendezvous)");
}

}  // namespace

RendezvousId idFromUnique(const zcollUniqueId& u) {
  RendezvousId id;
  std::memcpy(&id, u.internal, sizeof(id));
  return id;
}

zcollUniqueId uniqueFromId(const RendezvousId& id) { return packUniqueId(id); }

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
  auto service = std::make_shared<RootService>(std::move(listener), addr, magic, expectedRanks,
                                              timeoutSec, lingerForReuse);
  {
    std::lock_guard<std::mutex> lock(servicesMu);
    liveServices()[magic] = service;
  }
  std::thread([service, magic] {
    service->run();
    std::lock_guard<std::mutex> lock(servicesMu);
    liveServices().erase(magic);
  }).detach();
  return zcollSuccess;
}

void cancelRendezvousRoot(const RendezvousId& id) {
  std::shared_ptr<RootService> service;
  {
    std::lock_guard<std::mutex> lock(servicesMu);
    auto it = liveServices().find(id.magic);
    if (it != liveServices().end()) service = it->second.lock();
  }
  if (service) service->cancel();
}

Result rendezvousAllGather(const RendezvousId& id, int rank, int nranks, const std::string& mine,
                           int timeoutSec, std::vector<std::string>* all,
                           const RendezvousRankName& nameOf) {
  const std::string me = nameOf ? nameOf(rank) : "rank " + std::to_string(rank);
  Deadline deadline = deadlineIn(timeoutSec);
  if (id.magic == 0 || (id.root.storage.sa.sa_family != AF_INET &&
                        id.root.storage.sa.sa_family != AF_INET6))
    return fail(zcollInvalidArgument, "the unique id is not initialized (call zcollGetUniqueId)");
  Socket s;
  if (Result r = connectBefore(id.root, deadline, &s); r != zcollSuccess) {
    std::string why = threadLastError();
    const std::string prefix = std::string(resultName(r)) + ": ";
    if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
    return fail(r, "%s: %s; %s never listened there, or is gone", me.c_str(), why.c_str(),
                kRootWho);
  }
  Hello h{id.magic, rank, nranks};
  Result sent = sendAll(s, &h, sizeof(h), deadline);
  if (sent == zcollSuccess) sent = sendBlob(s, mine, deadline);
  // A refusal arrives right after the hello and the root closes: the blob may then fail to
  // send, but the status explaining why is still readable.
  uint32_t status = 0;
  Result r = recvAll(s, &status, sizeof(status), sent == zcollSuccess ? deadline : deadlineIn(1));
  if (r != zcollSuccess && sent != zcollSuccess) return sent;
  if (r == zcollRemoteError)
    return fail(zcollRemoteError, "the rendezvous at %s closed the connection of %s before "
                "answering: %s is gone", addrToString(id.root).c_str(), me.c_str(), kRootWho);
  ZCOLL_CHECK(r);
  if (status == kHelloBadRank) {
    int32_t expected = 0;
    if (recvAll(s, &expected, sizeof(expected), deadlineIn(1)) == zcollSuccess &&
        expected != nranks)
      return fail(zcollInvalidUsage, "the rendezvous at %s refused %s: this rank says there "
                  "are %d ranks (WORLD_SIZE / nranks), the rendezvous expects %d",
                  addrToString(id.root).c_str(), me.c_str(), nranks, expected);
  }
  if (status == kHelloRootTimedOut) {
    TimedOutReport report{};
    if (recvAll(s, &report, sizeof(report), deadlineIn(1)) == zcollSuccess &&
        report.nranks == nranks && report.missingCount > 0)
      return fail(zcollTimeout, "the rendezvous at %s timed out for %s: %s",
                  addrToString(id.root).c_str(), me.c_str(),
                  describeTimeout(report, nameOf).c_str());
  }
  if (status != kHelloAccepted) {
    Result code = status == kHelloRootTimedOut ? zcollTimeout
                  : status == kHelloCancelled  ? zcollRemoteError
                                               : zcollInvalidUsage;
    return fail(code, "the rendezvous at %s refused %s: %s", addrToString(id.root).c_str(),
                me.c_str(), helloStatusText(status));
  }
  all->resize(nranks);
  for (int i = 0; i < nranks; ++i) ZCOLL_CHECK(recvBlob(s, &(*all)[i], kMaxRankBlob, deadline));
  return zcollSuccess;
}

}  // namespace zcoll
