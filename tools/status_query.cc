// zcoll_info --status [--json]: asks every process of this user on this machine that runs zcoll
// (its status service, src/core/status_service.h) where each rank of each communicator is, and
// names the ranks that hold a job up: a rank behind the others (it has not reached the
// operation they wait in), ranks that made different calls at the same operation number, ranks
// in the error state, and whom each waiting rank waits for. --json prints every flight record.
#include "status_query.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Fields = std::map<std::string, std::string>;

// The abstract socket names of the status services of this user's processes.
std::vector<std::string> statusSockets() {
  std::vector<std::string> names;
  std::ifstream in("/proc/net/unix");
  const std::string prefix = "@zcoll-status." + std::to_string(getuid()) + ".";
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.rfind(' ');
    if (at == std::string::npos) continue;
    const std::string path = line.substr(at + 1);
    if (path.rfind(prefix, 0) == 0 &&
        std::find(names.begin(), names.end(), path.substr(1)) == names.end())
      names.push_back(path.substr(1));
  }
  return names;
}

// Sends `request` to the service `name` and returns its answer ("" when it did not answer
// within the deadline).
std::string ask(const std::string& name, const std::string& request, int timeoutMs) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), std::min(name.size(), sizeof(addr.sun_path) - 2));
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
      send(fd, (request + "\n").data(), request.size() + 1, MSG_NOSIGNAL) > 0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
    char buf[4096];
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now()).count();
      pollfd p{fd, POLLIN, 0};
      if (left <= 0 || poll(&p, 1, static_cast<int>(left)) != 1) break;
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return out;
}

Fields parseLine(const std::string& line) {
  Fields f;
  std::istringstream in(line);
  std::string kv;
  while (in >> kv) {
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) f[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return f;
}

long long num(const Fields& f, const char* key) {
  auto it = f.find(key);
  return it == f.end() ? -1 : std::strtoll(it->second.c_str(), nullptr, 10);
}

std::string get(const Fields& f, const char* key) {
  auto it = f.find(key);
  return it == f.end() ? "-" : it->second;
}

// "allreduce count 1000 float sum root 0" (what must match between ranks at one operation).
std::string callOf(const Fields& f) {
  std::string s = get(f, "op");
  if (get(f, "op") == "-") return "nothing yet";
  s += " count " + get(f, "count");
  if (get(f, "dtype") != "-") s += " " + get(f, "dtype");
  if (get(f, "redop") != "-") s += " " + get(f, "redop");
  if (num(f, "root") >= 0) s += " root " + get(f, "root");
  if (num(f, "peer") >= 0) s += " peer " + get(f, "peer");
  return s;
}

std::string rankList(const std::vector<const Fields*>& ranks) {
  std::string s;
  for (const Fields* f : ranks) s += (s.empty() ? "" : ",") + get(*f, "rank");
  return (ranks.size() > 1 ? "ranks " : "rank ") + s;
}

void printRank(const Fields& f) {
  const double ageS = static_cast<double>(num(f, "age_ms")) / 1000.0;
  std::printf("  rank %-3s pid %-7s %-12s #%-5s %-40s %s %.1f s", get(f, "rank").c_str(),
              get(f, "pid").c_str(), get(f, "host").c_str(), get(f, "last").c_str(),
              callOf(f).c_str(), get(f, "state").c_str(), ageS);
  if (get(f, "waiting") != "-") std::printf(", waiting on rank %s", get(f, "waiting").c_str());
  if (get(f, "error") != "-") std::printf(", error %s", get(f, "error").c_str());
  std::printf("\n");
}

// What holds this comm up: ranks behind the furthest one, different calls at one number.
void diagnose(const std::vector<const Fields*>& ranks, long long nranks) {
  long long furthest = 0;
  for (const Fields* f : ranks) furthest = std::max(furthest, num(*f, "last"));
  std::vector<const Fields*> ahead, behind;
  for (const Fields* f : ranks) (num(*f, "last") == furthest ? ahead : behind).push_back(f);
  for (const Fields* f : behind)
    std::printf("  => rank %s is behind: its last operation is #%s (%s, %s); %s reached #%lld "
                "(%s)\n", get(*f, "rank").c_str(), get(*f, "last").c_str(), callOf(*f).c_str(),
                get(*f, "state").c_str(), rankList(ahead).c_str(), furthest,
                callOf(*ahead.front()).c_str());
  std::map<std::string, std::vector<const Fields*>> calls;
  for (const Fields* f : ahead) calls[callOf(*f)].push_back(f);
  if (calls.size() > 1) {
    std::printf("  => mismatched calls at #%lld:", furthest);
    for (const auto& [call, who] : calls) std::printf(" %s: %s;", rankList(who).c_str(), call.c_str());
    std::printf("\n");
  }
  for (const Fields* f : ranks)
    if (get(*f, "error") != "-")
      std::printf("  => rank %s is in the error state (%s)\n", get(*f, "rank").c_str(),
                  get(*f, "error").c_str());
  if (static_cast<long long>(ranks.size()) < nranks)
    std::printf("  (%zu of %lld ranks answered here: the others run on other machines, have "
                "ZCOLL_STATUS=off, or are gone)\n", ranks.size(), nranks);
}

}  // namespace

int printStatus(bool json) {
  const std::vector<std::string> sockets = statusSockets();
  if (sockets.empty()) {
    std::printf("zcoll status: no process of this user runs zcoll on this machine "
                "(or all have ZCOLL_STATUS=off)\n");
    return 1;
  }
  std::vector<Fields> lines;
  for (const std::string& s : sockets) {
    const std::string answer = ask(s, json ? "json" : "status", 1500);
    if (json) {
      std::fputs(answer.c_str(), stdout);
      continue;
    }
    std::istringstream in(answer);
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("comm=", 0) == 0) lines.push_back(parseLine(line));
  }
  if (json) return 0;
  std::map<std::string, std::vector<const Fields*>> byComm;
  for (const Fields& f : lines) byComm[get(f, "key")].push_back(&f);
  std::printf("zcoll status: %zu processes answered, %zu communicators\n", sockets.size(),
              byComm.size());
  for (auto& [key, ranks] : byComm) {
    std::sort(ranks.begin(), ranks.end(),
              [](const Fields* a, const Fields* b) { return num(*a, "rank") < num(*b, "rank"); });
    std::printf("comm %s (key %s, %s ranks)\n", get(*ranks[0], "comm").c_str(), key.c_str(),
                get(*ranks[0], "nranks").c_str());
    for (const Fields* f : ranks) printRank(*f);
    diagnose(ranks, num(*ranks[0], "nranks"));
  }
  return 0;
}
