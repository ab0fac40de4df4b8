#include "base/log.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "base/params.h"

namespace zcoll {

namespace {

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

LogLevel parseLevel(const std::string& v) {
  if (v == "NONE") return LogLevel::kNone;
  if (v == "INFO") return LogLevel::kInfo;
  if (v == "TRACE") return LogLevel::kTrace;
  return LogLevel::kWarn;
}

uint32_t parseSubsys(std::string v) {
  bool exclude = !v.empty() && v[0] == '^';
  if (exclude) v.erase(0, 1);
  uint32_t mask = 0;
  size_t pos = 0;
  while (pos <= v.size()) {
    size_t comma = v.find(',', pos);
    std::string tok = v.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (tok == "ALL") mask = ~0u;
    for (const SubsysName& n : kSubsysNames)
      if (tok == n.name) mask |= static_cast<uint32_t>(n.subsys);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
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

LogConfig& config() {
  static LogConfig cfg = [] {
    LogConfig c;
    gethostname(c.host, sizeof(c.host) - 1);
    c.level = parseLevel(paramString("ZCOLL_DEBUG"));
    c.subsysMask = parseSubsys(paramString("ZCOLL_DEBUG_SUBSYS"));
    std::string file = paramString("ZCOLL_DEBUG_FILE");
    if (!file.empty()) {
      FILE* f = std::fopen(expandPath(file, c.host).c_str(), "a");
      if (f != nullptr) c.out = f;
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

bool logEnabled(LogLevel level, LogSubsys subsys) {
  const LogConfig& c = config();
  return level <= c.level && (c.subsysMask & static_cast<uint32_t>(subsys)) != 0;
}

void logMessage(LogLevel level, LogSubsys subsys, const char* file, int line, const char* fmt,
                ...) {
  static std::mutex mu;
  const LogConfig& c = config();
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const char* base = std::strrchr(file, '/');
  std::lock_guard<std::mutex> lock(mu);
  if (level == LogLevel::kTrace) {
    std::fprintf(c.out, "%s:%d zcoll %s %s %s:%d %s\n", c.host, getpid(), levelName(level),
                 subsysName(subsys), base ? base + 1 : file, line, msg);
  } else {
    std::fprintf(c.out, "%s:%d zcoll %s %s %s\n", c.host, getpid(), levelName(level),
                 subsysName(subsys), msg);
  }
  std::fflush(c.out);
}

}  // namespace zcoll
