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

// A mis-sized rank fails the rendezvous for all: what the others are told, and any that arrive
// until the timeout (best effort, never blocks: it fits any socket buffer).
void sendMismatch(const Socket& s, const MismatchReport& report) {
  char msg[sizeof(uint32_t) + sizeof(MismatchReport)];
  const uint32_t st = kHelloWorldMismatch;
  std::memcpy(msg, &st, sizeof(st));
  std::memcpy(msg + sizeof(st), &report, sizeof(report));
  ::send(s.fd(), msg, sizeof(msg), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// The root's immediate answer to an admitted hello (best effort, never blocks).
void greet(const Socket& s, uint64_t magic) {
  char msg[sizeof(uint32_t) + sizeof(uint64_t)];
  const uint32_t st = kHelloJoined;
  const uint64_t greeting = helloGreeting(magic);
  std::memcpy(msg, &st, sizeof(st));
  std::memcpy(msg + sizeof(st), &greeting, sizeof(greeting));
  ::send(s.fd(), msg, sizeof(msg), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// How often the root, and a rank that joined, say they still wait: a tenth of the timeout, 1 to
// 30 s; the first time after at most 10 s.
std::chrono::seconds waitNoteInterval(int timeoutSec) {
  return std::chrono::seconds(std::clamp(timeoutSec / 10, 1, 30));
}
Deadline firstWaitNote(int timeoutSec) {
  return Clock::now() + std::min<std::chrono::seconds>(waitNoteInterval(timeoutSec),
                                                       std::chrono::seconds(10));
}

long long secondsLeft(Deadline d) {
  return std::max<long long>(
      0, std::chrono::ceil<std::chrono::seconds>(d - Clock::now()).count());
}

// "rank 2", "ranks 1, 3", "ranks 1, 2, ... and 5 more" (at most `listed` named).
std::string rankList(const std::vector<int>& ranks, size_t listed = 8) {
  std::string text = ranks.size() > 1 ? "ranks " : "rank ";
  for (size_t i = 0; i < ranks.size() && i < listed; ++i)
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > listed) text += " and " + std::to_string(ranks.size() - listed) + " more";
  return text;
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
        deadline_(deadlineIn(timeoutSec)), linger_(lingerForReuse),
        noteEvery_(waitNoteInterval(timeoutSec)), nextNote_(firstWaitNote(timeoutSec)) {
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
      if (mismatched_) return failedOnSize();
      if (Clock::now() >= deadline_) return timedOut();
      pollOnce();
      noteWaiting();
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
    if (lingering_) return answerLate(p, parsed);
    if (state == HelloParse::kRejected && saysAnotherSize(parsed)) {
      refuse(p.sock, parsed.refusal, nranks_);
      mismatched_ = true;
      mismatch_ = MismatchReport{parsed.header.rank, parsed.header.nranks, nranks_};
      ZCOLL_WARN(LogSubsys::kBootstrap, "rendezvous root at %s: rank %d says there are %d "
                 "ranks, the rendezvous expects %d: the rendezvous fails for every rank (%d of "
                 "%d had arrived)", addrToString(addr_).c_str(), mismatch_.rank, mismatch_.nranks,
                 mismatch_.expected, arrived_, nranks_);
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

  // A hello with the magic (a rank of this job) that names another size than the rendezvous'.
  bool saysAnotherSize(const ParsedHello& parsed) const {
    return parsed.refusal == kHelloBadRank && nranks_ > 0 && parsed.header.nranks > 0 &&
           parsed.header.nranks != nranks_;
  }

  // After the rendezvous (done, called off or failed on a size): a hello with this magic is told
  // why it cannot join, at once.
  Read answerLate(const Pending& p, const ParsedHello& parsed) {
    if (parsed.refusal == kHelloBadMagic) {
      refuse(p.sock, kHelloBadMagic);
    } else if (mismatched_ && saysAnotherSize(parsed)) {
      refuse(p.sock, kHelloBadRank, nranks_);
    } else if (mismatched_) {
      sendMismatch(p.sock, mismatch_);
    } else {
      refuse(p.sock, cancelled_.load() ? kHelloCancelled : kHelloAlreadyUsed);
    }
    return Read::kDrop;
  }

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
    greet(slot.sock, magic_);
    return true;
  }

  // Every `noteEvery_` while some ranks wait for others: whom, at the default log level (the
  // ranks' silence would otherwise last the whole timeout). Nothing while no rank arrived: a
  // unique id may be made long before its ranks init, and nobody waits yet.
  void noteWaiting() {
    if (Clock::now() < nextNote_) return;
    nextNote_ = Clock::now() + noteEvery_;
    if (arrived_ == 0) return;
    std::vector<int> missing;
    for (int r = 0; r < nranks_; ++r)
      if (!ranks_[r].sock.valid()) missing.push_back(r);
    ZCOLL_WARN(LogSubsys::kBootstrap, "rendezvous root at %s: waiting for %s (%zu of %d "
               "missing), %lld s left", addrToString(addr_).c_str(), rankList(missing).c_str(),
               missing.size(), nranks_, secondsLeft(deadline_));
  }

  // A rank said another size: every rank that arrived is told, and so is every rank that
  // arrives until the timeout (lingering), so none waits for a rendezvous that cannot complete.
  void failedOnSize() {
    for (Arrival& a : ranks_)
      if (a.sock.valid()) sendMismatch(a.sock, mismatch_);
    ranks_.clear();
    answerLateHellos();
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
  bool mismatched_ = false;  // a rank said another size: mismatch_ says which
  MismatchReport mismatch_{};
  std::chrono::seconds noteEvery_;
  Deadline nextNote_;
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

// kRendezvousHandshakeSec is safe: a zcoll root reads every connection at once, concurrently,
// and drops one that has not sent its hello within kHelloWaitSec, so only another program on
// the port (or a root stopped for this long) stays silent.
constexpr int kHandshakeSec = kRendezvousHandshakeSec;

bool servedHere(uint64_t magic) {
  std::lock_guard<std::mutex> lock(servicesMu);
  return liveServices().count(magic) != 0;
}

// Waits until `fd` has bytes to read (or was closed) or `until` passes; false: it passed. No
// message (the caller says what it waited for).
bool readableBefore(int fd, Deadline until) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, pollTimeoutMs(until));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return true;  // let the read report it
    if (Clock::now() >= until) return false;
  }
}

// One rank's side of a rendezvous: connect, hello and blob, the root's immediate answer, then
// the outcome (every rank's blob, or why not).
class Joiner {
 public:
  Joiner(const RendezvousId& id, int rank, int nranks, int timeoutSec,
         const RendezvousRankName& nameOf)
      : id_(id), rank_(rank), nranks_(nranks), timeoutSec_(timeoutSec), nameOf_(nameOf),
        me_(nameOf ? nameOf(rank) : "rank " + std::to_string(rank)),
        where_(addrToString(id.root)), deadline_(deadlineIn(timeoutSec)) {}

  Result connect() {
    Result r = connectBefore(id_.root, deadline_, &sock_);
    if (r == zcollSuccess) return r;
    std::string why = threadLastError();
    const std::string prefix = std::string(resultName(r)) + ": ";
    if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
    return fail(r, "%s: %s; %s never listened there, or is gone", me_.c_str(), why.c_str(),
                kRootWho);
  }

  // Sends the hello and blob and reads the root's immediate answer, all within kHandshakeSec:
  // success once the root said it joined.
  Result join(const std::string& mine) {
    const Deadline handshake = std::min(deadline_, deadlineIn(kHandshakeSec));
    Hello h{id_.magic, rank_, nranks_};
    Result sent = sendAll(sock_, &h, sizeof(h), handshake);
    if (sent == zcollSuccess) sent = sendBlob(sock_, mine, handshake);
    // A refusal arrives right after the hello and the root closes: the blob may then fail to
    // send, but the status explaining why is still readable.
    const Deadline answer = sent == zcollSuccess ? handshake : std::min(handshake, deadlineIn(1));
    if (!readableBefore(sock_.fd(), answer)) {
      if (Clock::now() >= deadline_) return fail(zcollTimeout, "%s: the rendezvous at %s did "
                                                 "not answer before the timeout", me_.c_str(),
                                                 where_.c_str());
      return notZcoll("no answer within " + std::to_string(kHandshakeSec) + " s of " + me_ +
                      "'s hello");
    }
    uint32_t status = 0;
    Result r = recvAll(sock_, &status, sizeof(status), answer);
    if (r != zcollSuccess && sent != zcollSuccess) return sent;
    if (r == zcollRemoteError) return closedEarly();
    ZCOLL_CHECK(r);
    if (status != kHelloJoined) return refused(status);
    uint64_t greeting = 0;
    if (recvAll(sock_, &greeting, sizeof(greeting), handshake) != zcollSuccess ||
        greeting != helloGreeting(id_.magic))
      return notZcoll(me_ + " got bytes that no zcoll rendezvous sends");
    return zcollSuccess;
  }

  // Waits (up to the timeout) for the root's outcome once every rank arrived, saying so every
  // while unless this process serves the rendezvous (its root says who is missing).
  Result awaitOutcome() {
    const bool quiet = servedHere(id_.magic);
    Deadline note = firstWaitNote(timeoutSec_);
    while (!readableBefore(sock_.fd(), std::min(note, deadline_))) {
      if (Clock::now() >= deadline_) break;  // recvAll below says it timed out
      note = Clock::now() + waitNoteInterval(timeoutSec_);
      if (!quiet)
        ZCOLL_WARN(LogSubsys::kBootstrap, "%s joined the rendezvous at %s and waits for the "
                   "other ranks, %lld s left (the process that serves it logs which are "
                   "missing)", me_.c_str(), where_.c_str(), secondsLeft(deadline_));
    }
    uint32_t status = 0;
    Result r = recvAll(sock_, &status, sizeof(status), deadline_);
    if (r == zcollRemoteError) return closedEarly();
    ZCOLL_CHECK(r);
    return status == kHelloAccepted ? zcollSuccess : refused(status);
  }

  // Whether the rendezvous failed because the ranks disagree on their number.
  bool worldMismatch() const { return worldMismatch_; }

  Result receiveAll(std::vector<std::string>* all) {
    all->resize(nranks_);
    for (int i = 0; i < nranks_; ++i)
      ZCOLL_CHECK(recvBlob(sock_, &(*all)[i], kMaxRankBlob, deadline_));
    return zcollSuccess;
  }

 private:
  Result closedEarly() {
    return fail(zcollRemoteError, "the rendezvous at %s closed the connection of %s before "
                "answering: %s is gone", where_.c_str(), me_.c_str(), kRootWho);
  }

  Result notZcoll(const std::string& how) {
    return fail(zcollSystemError, "the rendezvous at %s did not answer as zcoll (%s): another "
                "program listens on that port, or it is not where %s listens", where_.c_str(),
                how.c_str(), kRootWho);
  }

  std::string nameOf(int rank) const {
    return nameOf_ && rank >= 0 && rank < nranks_ ? nameOf_(rank) : "rank " + std::to_string(rank);
  }

  // The root said no (a HelloStatus other than kHelloJoined/kHelloAccepted): why, in full.
  Result refused(uint32_t status) {
    if (status == kHelloBadRank) {
      worldMismatch_ = true;
      int32_t expected = 0;
      if (recvAll(sock_, &expected, sizeof(expected), deadlineIn(1)) == zcollSuccess &&
          expected != nranks_)
        return fail(zcollInvalidUsage, "the rendezvous at %s refused %s: this rank says there "
                    "are %d ranks (WORLD_SIZE / nranks), the rendezvous expects %d",
                    where_.c_str(), me_.c_str(), nranks_, expected);
    }
    if (status == kHelloWorldMismatch) {
      worldMismatch_ = true;
      MismatchReport m{};
      if (recvAll(sock_, &m, sizeof(m), deadlineIn(1)) == zcollSuccess)
        return fail(zcollInvalidUsage, "the rendezvous at %s failed for %s: %s says there are %d "
                    "ranks (WORLD_SIZE / nranks), the rendezvous expects %d, as %s does; start "
                    "every rank with the same number of ranks", where_.c_str(), me_.c_str(),
                    nameOf(m.rank).c_str(), m.nranks, m.expected, me_.c_str());
    }
    if (status == kHelloRootTimedOut) {
      TimedOutReport report{};
      if (recvAll(sock_, &report, sizeof(report), deadlineIn(1)) == zcollSuccess &&
          report.nranks == nranks_ && report.missingCount > 0)
        return fail(zcollTimeout, "the rendezvous at %s timed out for %s: %s", where_.c_str(),
                    me_.c_str(), describeTimeout(report, nameOf_).c_str());
    }
    if (status > kHelloWorldMismatch || status == kHelloAccepted || status == kHelloJoined)
      return notZcoll(me_ + " got bytes that no zcoll rendezvous sends");
    Result code = status == kHelloRootTimedOut ? zcollTimeout
                  : status == kHelloCancelled  ? zcollRemoteError
                                               : zcollInvalidUsage;
    return fail(code, "the rendezvous at %s refused %s: %s", where_.c_str(), me_.c_str(),
                helloStatusText(status));
  }

  const RendezvousId& id_;
  int rank_;
  int nranks_;
  int timeoutSec_;
  const RendezvousRankName& nameOf_;
  std::string me_;
  std::string where_;
  Deadline deadline_;
  Socket sock_;
  bool worldMismatch_ = false;
};

// How long a process serving a rendezvous that failed on the number of ranks stays before its
// rank returns the error: the service tells every rank that arrives meanwhile, and the process
// (rank 0's) usually exits on the error, after which a rank started a moment later would only
// find a closed port and retry it until the timeout.
constexpr auto kMismatchGrace = std::chrono::seconds(3);

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
  if (id.magic == 0 || (id.root.storage.sa.sa_family != AF_INET &&
                        id.root.storage.sa.sa_family != AF_INET6))
    return fail(zcollInvalidArgument, "the unique id is not initialized (call zcollGetUniqueId)");
  Joiner joiner(id, rank, nranks, timeoutSec, nameOf);
  ZCOLL_CHECK(joiner.connect());
  Result r = joiner.join(mine);
  if (r == zcollSuccess) r = joiner.awaitOutcome();
  if (r == zcollSuccess) return joiner.receiveAll(all);
  // The error stays the thread's last one through the wait.
  if (joiner.worldMismatch() && servedHere(id.magic))
    std::this_thread::sleep_until(std::min(Clock::now() + kMismatchGrace, deadlineIn(timeoutSec)));
  return r;
}

}  // namespace zcoll
