#include "base/log.h"

#include <strings.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "base/params.h"
#include "zcoll/zcoll_version.h"

namespace zcoll {

namespace {

#ifdef ZCOLL_HAVE_CUDA
constexpr const char* kBuildCuda = "ON";
#else
constexpr const char* kBuildCuda = "OFF";
#endif
#ifdef ZCOLL_HAVE_UCX
constexpr const char* kBuildUcx = "ON";
#else
constexpr const char* kBuildUcx = "OFF";
#endif

struct LogConfig {
  LogLevel level = LogLevel::kWarn;
  uint32_t subsysMask = ~0u;
  FILE* out = stderr;
  char host[64] = "?";
};

struct SubsysName {
  const char* name;
  LogSubsys subsys;
};
const SubsysName kSubsysNames[] = {
    {"CORE", LogSubsys::kCore}, {"INIT", LogSubsys::kInit}, {"BOOTSTRAP", LogSubsys::kBootstrap},
    {"NET", LogSubsys::kNet},   {"COLL", LogSubsys::kColl}, {"TOPO", LogSubsys::kTopo},
    {"QUANT", LogSubsys::kQuant}, {"P2P", LogSubsys::kP2p},
};

const char* subsysName(LogSubsys s) {
  for (const SubsysName& n : kSubsysNames)
    if (n.subsys == s) return n.name;
  return "?";
}

const char* const kLevelValues = "NONE, WARN, INFO or TRACE (any case)";

bool sameText(const std::string& a, const char* b) { return strcasecmp(a.c_str(), b) == 0; }

LogLevel parseLevel(const std::string& v, std::vector<std::string>* warnings) {
  if (sameText(v, "NONE")) return LogLevel::kNone;
  if (sameText(v, "WARN")) return LogLevel::kWarn;
  if (sameText(v, "INFO")) return LogLevel::kInfo;
  if (sameText(v, "TRACE")) return LogLevel::kTrace;
  warnings->push_back("ZCOLL_DEBUG=" + v + ": unknown level, using WARN; ZCOLL_DEBUG takes " +
                      kLevelValues);
  return LogLevel::kWarn;
}

std::string subsysValues() {
  std::string all;
  for (const SubsysName& n : kSubsysNames) all += std::string(n.name) + ",";
  return all + "ALL";
}

uint32_t parseSubsys(std::string v, std::vector<std::string>* warnings) {
  bool exclude = !v.empty() && v[0] == '^';
  if (exclude) v.erase(0, 1);
  uint32_t mask = 0;
  std::string unknown;
  size_t pos = 0;
  while (pos <= v.size()) {
    size_t comma = v.find(',', pos);
    std::string tok = v.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    bool known = tok.empty();
    if (sameText(tok, "ALL")) {
      mask = ~0u;
      known = true;
    }
    for (const SubsysName& n : kSubsysNames)
      if (sameText(tok, n.name)) {
        mask |= static_cast<uint32_t>(n.subsys);
        known = true;
      }
    if (!known) unknown += (unknown.empty() ? "" : ", ") + tok;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (!unknown.empty())
    warnings->push_back("ZCOLL_DEBUG_SUBSYS=" + std::string(exclude ? "^" : "") + v +
                        ": unknown subsystem " + unknown + " ignored; ZCOLL_DEBUG_SUBSYS takes a "
                        "comma-separated list of " + subsysValues() +
                        " (any case), or ^ and a list to exclude");
  return exclude ? ~mask : mask;
}

// Expands %h (hostname) and %p (pid) in ZCOLL_DEBUG_FILE.
std::string expandPath(const std::string& pattern, const char* host) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[++i];
      if (c == 'h') out += host;
      else if (c == 'p') out += std::to_string(getpid());
      else out += c;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

thread_local int tRank = -1;

// "host:pid [rank R] zcoll " in front of every line.
void printPrefix(FILE* out, const char* host) {
  if (tRank >= 0) std::fprintf(out, "%s:%d [rank %d] zcoll ", host, getpid(), tRank);
  else std::fprintf(out, "%s:%d zcoll ", host, getpid());
}

LogConfig& config() {
  static LogConfig cfg = [] {
    LogConfig c;
    gethostname(c.host, sizeof(c.host) - 1);
    std::vector<std::string> warnings;
    c.level = parseLevel(paramString("ZCOLL_DEBUG"), &warnings);
    c.subsysMask = parseSubsys(paramString("ZCOLL_DEBUG_SUBSYS"), &warnings);
    std::string file = paramString("ZCOLL_DEBUG_FILE");
    if (!file.empty()) {
      FILE* f = std::fopen(expandPath(file, c.host).c_str(), "a");
      if (f != nullptr) c.out = f;
    }
    // Once per process (this runs once): what was not understood, unless logging is off.
    if (c.level != LogLevel::kNone)
      for (const std::string& w : warnings) {
        printPrefix(c.out, c.host);
        std::fprintf(c.out, "WARN INIT %s\n", w.c_str());
      }
    return c;
  }();
  return cfg;
}

const char* levelName(LogLevel l) {
  switch (l) {
    case LogLevel::kWarn: return "WARN";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kTrace: return "TRACE";
    default: return "";
  }
}

}  // namespace

LogRankScope::LogRankScope(int rank) : previous_(tRank) { tRank = rank; }
LogRankScope::~LogRankScope() { tRank = previous_; }
int logRank() { return tRank; }

bool logEnabled(LogLevel level, LogSubsys subsys) {
  const LogConfig& c = config();
  return level <= c.level && (c.subsysMask & static_cast<uint32_t>(subsys)) != 0;
}

void logMessage(LogLevel level, LogSubsys subsys, const char* file, int line, const char* fmt,
                ...) {
  static std::mutex mu;
  static bool versionPrinted = false;
  const LogConfig& c = config();
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const char* base = std::strrchr(file, '/');
  std::lock_guard<std::mutex> lock(mu);
  // As NCCL's: with INFO on, the first line says which zcoll this is.
  if (!versionPrinted && c.level >= LogLevel::kInfo) {
    versionPrinted = true;
    printPrefix(c.out, c.host);
    std::fprintf(c.out, "INFO INIT zcoll version %d.%d.%d (build: cuda %s, ucx %s)\n",
                 ZCOLL_MAJOR, ZCOLL_MINOR, ZCOLL_PATCH, kBuildCuda, kBuildUcx);
  }
  printPrefix(c.out, c.host);
  if (level == LogLevel::kTrace) {
    std::fprintf(c.out, "%s %s %s:%d %s\n", levelName(level), subsysName(subsys),
                 base ? base + 1 : file, line, msg);
  } else {
    std::fprintf(c.out, "%s %s %s\n", levelName(level), subsysName(subsys), msg);
  }
  std::fflush(c.out);
}

}  // namespace zcoll
