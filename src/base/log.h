// One logger: levels (ZCOLL_DEBUG=NONE|WARN|INFO|TRACE, any case), subsystems
// (ZCOLL_DEBUG_SUBSYS=INIT,COLL,... or ^COLL to exclude, any case), destination
// (ZCOLL_DEBUG_FILE, %h = hostname, %p = pid). An unknown level or subsystem gives one warning
// naming the variable and the values it takes. With INFO or TRACE, the first line is the
// version: "zcoll version X.Y.Z (build: cuda ON|OFF, ucx ON|OFF)". Lines are
// "host:pid [rank R] zcoll LEVEL SUBSYS message", the rank while a call on a communicator (or
// its init) runs on the thread.
#pragma once

#include <cstdint>

namespace zcoll {

enum class LogLevel : int { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

enum class LogSubsys : uint32_t {
  kCore = 1u << 0,
  kInit = 1u << 1,
  kBootstrap = 1u << 2,
  kNet = 1u << 3,
  kColl = 1u << 4,
  kTopo = 1u << 5,
  kQuant = 1u << 6,
  kP2p = 1u << 7,
};

bool logEnabled(LogLevel level, LogSubsys subsys);

// The rank this thread's log lines name, for the scope's lifetime (-1: none); scopes nest.
// Set by the guard of every call on a communicator (api/guard.h) and by init.
class LogRankScope {
 public:
  explicit LogRankScope(int rank);
  ~LogRankScope();
  LogRankScope(const LogRankScope&) = delete;
  LogRankScope& operator=(const LogRankScope&) = delete;

 private:
  int previous_;
};
int logRank();
void logMessage(LogLevel level, LogSubsys subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

}  // namespace zcoll

#define ZCOLL_LOG_AT(level, subsys, ...)                                          \
  do {                                                                            \
    if (::zcoll::logEnabled(level, subsys))                                       \
      ::zcoll::logMessage(level, subsys, __FILE__, __LINE__, __VA_ARGS__);        \
  } while (0)
#define ZCOLL_WARN(subsys, ...) ZCOLL_LOG_AT(::zcoll::LogLevel::kWarn, subsys, __VA_ARGS__)
#define ZCOLL_INFO(subsys, ...) ZCOLL_LOG_AT(::zcoll::LogLevel::kInfo, subsys, __VA_ARGS__)
#define ZCOLL_TRACE_LOG(subsys, ...) ZCOLL_LOG_AT(::zcoll::LogLevel::kTrace, subsys, __VA_ARGS__)
