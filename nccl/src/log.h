// libzcoll_nccl.so's log lines, under zcoll's ZCOLL_DEBUG (NONE|WARN|INFO|TRACE) and
// ZCOLL_DEBUG_FILE's absence (stderr): "host:pid zcoll LEVEL NCCL message".
#pragma once

namespace zcoll_nccl {

void logInfo(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void logWarn(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace zcoll_nccl
