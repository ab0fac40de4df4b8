#include "core/status_service.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>
#include <vector>

#include "base/dtype.h"
#include "base/log.h"
#include "base/params.h"
#include "core/comm.h"
#include "core/flight_recorder.h"
#include "core/live_comms.h"

namespace zcoll {

namespace {

std::mutex gStartMu;
pid_t gStartedFor = 0;  // the process the service runs for (a forked child starts its own)
int gSignalPipe[2] = {-1, -1};

int64_t nowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// A field value with no spaces or '=' (names are the user's: keep the line parseable).
std::string token(const std::string& s) {
  if (s.empty()) return "-";
  std::string out = s;
  for (char& c : out)
    if (std::isspace(static_cast<unsigned char>(c)) || c == '=') c = '_';
  return out;
}

void onDumpSignal(int) {
  const char byte = 1;
  if (gSignalPipe[1] >= 0) (void)!write(gSignalPipe[1], &byte, 1);  // async-signal-safe
}

void installDumpSignal() {
  const std::string name = paramString("ZCOLL_DEBUG_DUMP_SIGNAL");
  if (name.empty()) return;
  const int sig = name == "USR1" || name == "SIGUSR1" ? SIGUSR1
                  : name == "USR2" || name == "SIGUSR2" ? SIGUSR2 : 0;
  if (sig == 0) return;  // other values fail zcollGetUniqueId and init (checkParamValues)
  if (pipe2(gSignalPipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
  struct sigaction sa {};
  sa.sa_handler = onDumpSignal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, nullptr);
}

std::string socketName(pid_t pid) {
  return "zcoll-status." + std::to_string(getuid()) + "." + std::to_string(pid);
}

int listenSocket() {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string name = socketName(getpid());
  std::memcpy(addr.sun_path + 1, name.data(), name.size());  // abstract: leading NUL
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(fd, 8) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool sameUser(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == getuid();
}

// Reads the request line (at most 1 s), writes the report, closes.
void answer(int fd) {
  char buf[64] = {};
  size_t got = 0;
  pollfd p{fd, POLLIN, 0};
  while (got < sizeof(buf) - 1 && std::memchr(buf, '\n', got) == nullptr &&
         poll(&p, 1, 1000) == 1) {
    ssize_t n = read(fd, buf + got, sizeof(buf) - 1 - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  std::string request(buf, strcspn(buf, "\r\n"));
  const std::string report = sameUser(fd) ? statusReport(request) : "refused: another user\n";
  for (size_t sent = 0; sent < report.size();) {
    ssize_t n = send(fd, report.data() + sent, report.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  close(fd);
}

void dumpAll(const char* why) {
  forEachLiveComm([&](const zcollComm* c) { dumpFlightRecord(c, why); });
}

void serve(int listenFd) {
  for (;;) {
    pollfd fds[2] = {{listenFd, POLLIN, 0}, {gSignalPipe[0], POLLIN, 0}};
    if (poll(fds, gSignalPipe[0] >= 0 ? 2 : 1, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents & POLLIN) {
      char drain[64];
      while (read(gSignalPipe[0], drain, sizeof(drain)) > 0) {
      }
      dumpAll("signal");
    }
    if (fds[0].revents & POLLIN) {
      int fd = accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) answer(fd);
    }
  }
}

}  // namespace

void startStatusService() {
  std::lock_guard<std::mutex> lock(gStartMu);
  if (gStartedFor == getpid()) return;
  if (gStartedFor == 0) installDumpSignal();
  gStartedFor = getpid();
  if (paramString("ZCOLL_STATUS") != "on") return;
  int fd = listenSocket();
  if (fd < 0) {
    ZCOLL_WARN(LogSubsys::kCore, "status service: cannot listen on @%s (%s): zcoll_info --status "
               "will not see this process", socketName(getpid()).c_str(), std::strerror(errno));
    return;
  }
  try {
    std::thread([fd] {
      pthread_setname_np(pthread_self(), "zcoll-status");
      serve(fd);
    }).detach();
  } catch (const std::exception& e) {
    close(fd);
    ZCOLL_WARN(LogSubsys::kCore, "status service: no thread (%s)", e.what());
  }
}

std::string statusLine(const zcollComm* comm) {
  const std::vector<FlightEntry> ops = comm->recorder.snapshot();
  const int err = comm->asyncError.load();
  char head[512];
  std::snprintf(head, sizeof(head), "comm=%s id=%016" PRIx64 " rank=%d nranks=%d pid=%d host=%s "
                "error=%s last=%" PRIu64, token(comm->name).c_str(), comm->id, comm->rank,
                comm->nranks, static_cast<int>(getpid()),
                token(comm->peers.empty() ? "" : comm->peers[comm->rank].hostName).c_str(),
                err == zcollSuccess ? "-" : resultName(static_cast<Result>(err)),
                comm->recorder.lastSeq());
  std::string line = head;
  if (ops.empty()) return line + " op=- state=idle\n";
  const FlightEntry& e = ops.back();
  const int64_t ageMs = (nowNs() - (e.endNs ? e.endNs : e.startNs)) / 1000000;
  std::string waiting;
  for (int p : e.waitingOn) waiting += (waiting.empty() ? "" : ",") + std::to_string(p);
  char tail[512];
  std::snprintf(tail, sizeof(tail), " op=%s algo=%s count=%" PRIu64 " dtype=%s redop=%s root=%d "
                "peer=%d state=%s age_ms=%" PRId64 " waiting=%s\n", token(e.op).c_str(),
                token(e.algorithm).c_str(), e.count,
                e.dtype >= 0 ? dtypeName(static_cast<zcollDataType_t>(e.dtype)) : "-",
                e.redop >= 0 ? opName(static_cast<zcollRedOp_t>(e.redop)) : "-", e.root, e.peer,
                e.endNs == 0 ? "running" : "done", ageMs, waiting.empty() ? "-" : waiting.c_str());
  return line + tail;
}

std::string statusReport(const std::string& request) {
  std::string out;
  if (request != "status" && request != "json") return "unknown request (status or json)\n";
  forEachLiveComm([&](const zcollComm* c) {
    if (request == "status") {
      out += statusLine(c);
    } else {
      std::string json = flightRecordJson(c);
      for (char& ch : json)
        if (ch == '\n') ch = ' ';
      out += json + "\n";
    }
  });
  return out;
}

}  // namespace zcoll
