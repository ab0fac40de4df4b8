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
#include <cstdarg>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
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

void appendf(std::string* out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string* out, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  *out += buf;
}

void appendRank(std::string* out, const Fields& f) {
  const double ageS = static_cast<double>(num(f, "age_ms")) / 1000.0;
  appendf(out, "  rank %-3s pid %-7s %-12s #%-5s %-40s %s %.1f s", get(f, "rank").c_str(),
          get(f, "pid").c_str(), get(f, "host").c_str(), get(f, "last").c_str(),
          callOf(f).c_str(), get(f, "state").c_str(), ageS);
  if (get(f, "waiting") != "-") appendf(out, ", waiting on rank %s", get(f, "waiting").c_str());
  if (get(f, "error") != "-") appendf(out, ", error %s", get(f, "error").c_str());
  *out += "\n";
}

// "rank 3" or "ranks 2,3": the ranks in [0, nranks) that are not in `ranks`.
std::string missingRanks(const std::vector<const Fields*>& ranks, long long nranks) {
  std::set<long long> seen;
  for (const Fields* f : ranks) seen.insert(num(*f, "rank"));
  std::string s;
  long long count = 0;
  for (long long r = 0; r < nranks; ++r)
    if (seen.count(r) == 0) s += (count++ ? "," : "") + std::to_string(r);
  return (count > 1 ? "ranks " : "rank ") + s;
}

// What holds this comm up: ranks behind the furthest one, different calls at one number, ranks
// in the error state, ranks that did not answer. Each on a line starting with "=>".
void diagnose(std::string* out, const std::vector<const Fields*>& ranks, long long nranks) {
  long long furthest = 0;
  for (const Fields* f : ranks) furthest = std::max(furthest, num(*f, "last"));
  std::vector<const Fields*> ahead, behind;
  for (const Fields* f : ranks) (num(*f, "last") == furthest ? ahead : behind).push_back(f);
  for (const Fields* f : behind)
    appendf(out, "  => rank %s is behind: its last operation is #%s (%s, %s); %s reached #%lld "
            "(%s)\n", get(*f, "rank").c_str(), get(*f, "last").c_str(), callOf(*f).c_str(),
            get(*f, "state").c_str(), rankList(ahead).c_str(), furthest,
            callOf(*ahead.front()).c_str());
  std::map<std::string, std::vector<const Fields*>> calls;
  for (const Fields* f : ahead) calls[callOf(*f)].push_back(f);
  if (calls.size() > 1) {
    appendf(out, "  => mismatched calls at #%lld:", furthest);
    for (const auto& [call, who] : calls)
      appendf(out, " %s: %s;", rankList(who).c_str(), call.c_str());
    *out += "\n";
  }
  for (const Fields* f : ranks)
    if (get(*f, "error") != "-")
      appendf(out, "  => rank %s is in the error state (%s)\n", get(*f, "rank").c_str(),
              get(*f, "error").c_str());
  const long long answered = static_cast<long long>(ranks.size());
  if (answered < nranks)
    appendf(out, "  => %lld of %lld ranks did not answer here (%s): they run on other machines "
            "(run zcoll_info --status there), have ZCOLL_STATUS=off, or are gone\n",
            nranks - answered, nranks, missingRanks(ranks, nranks).c_str());
}

}  // namespace

std::string formatStatus(const std::vector<std::string>& answers) {
  std::vector<Fields> lines;
  for (const std::string& answer : answers) {
    std::istringstream in(answer);
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("comm=", 0) == 0) lines.push_back(parseLine(line));
  }
  // Keyed by the communicator's id, the same on its ranks and unique among the job's
  // communicators: two groups over the same ranks are two entries.
  std::map<std::string, std::vector<const Fields*>> byComm;
  // (A process running a zcoll from before ids sends key=, its name and members' hash.)
  for (const Fields& f : lines) byComm[get(f, get(f, "id") != "-" ? "id" : "key")].push_back(&f);
  const size_t answered = static_cast<size_t>(
      std::count_if(answers.begin(), answers.end(), [](const std::string& a) { return !a.empty(); }));
  std::string out;
  appendf(&out, "zcoll status: %zu processes answered, %zu communicators\n", answered,
          byComm.size());
  for (auto& [id, ranks] : byComm) {
    std::sort(ranks.begin(), ranks.end(),
              [](const Fields* a, const Fields* b) { return num(*a, "rank") < num(*b, "rank"); });
    appendf(&out, "comm %s (id %s, %s ranks)\n", get(*ranks[0], "comm").c_str(), id.c_str(),
            get(*ranks[0], "nranks").c_str());
    for (const Fields* f : ranks) appendRank(&out, *f);
    diagnose(&out, ranks, num(*ranks[0], "nranks"));
  }
  return out;
}

int printStatus(bool json) {
  const std::vector<std::string> sockets = statusSockets();
  if (sockets.empty()) {
    std::printf("zcoll status: no process of this user runs zcoll on this machine "
                "(or all have ZCOLL_STATUS=off)\n");
    return 1;
  }
  std::vector<std::string> answers;
  for (const std::string& s : sockets) {
    const std::string answer = ask(s, json ? "json" : "status", 1500);
    if (json)
      std::fputs(answer.c_str(), stdout);
    else
      answers.push_back(answer);
  }
  if (!json) std::fputs(formatStatus(answers).c_str(), stdout);
  return 0;
}
