// One logger: levels (ZCOLL_DEBUG=WARN|INFO|TRACE), subsystems (ZCOLL_DEBUG_SUBSYS=INIT,COLL,...
// or ^COLL to exclude), destination (ZCOLL_DEBUG_FILE, %h = hostname, %p = pid).
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
