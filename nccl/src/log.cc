#include "log.h"

#include <strings.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace zcoll_nccl {
namespace {

// 0 none, 1 warn, 2 info, 3 trace: zcoll's ZCOLL_DEBUG (default WARN).
int level() {
  const char* v = std::getenv("ZCOLL_DEBUG");
  if (v == nullptr || *v == '\0') return 1;
  if (strcasecmp(v, "NONE") == 0) return 0;
  if (strcasecmp(v, "INFO") == 0) return 2;
  if (strcasecmp(v, "TRACE") == 0) return 3;
  return 1;
}

void emit(const char* what, const char* fmt, va_list ap) {
  char host[64] = "?";
  gethostname(host, sizeof(host) - 1);
  char msg[1024];
  vsnprintf(msg, sizeof(msg), fmt, ap);
  std::fprintf(stderr, "%s:%d zcoll %s NCCL %s\n", host, static_cast<int>(getpid()), what, msg);
}

}  // namespace

void logInfo(const char* fmt, ...) {
  if (level() < 2) return;
  va_list ap;
  va_start(ap, fmt);
  emit("INFO", fmt, ap);
  va_end(ap);
}

void logWarn(const char* fmt, ...) {
  if (level() < 1) return;
  va_list ap;
  va_start(ap, fmt);
  emit("WARN", fmt, ap);
  va_end(ap);
}

}  // namespace zcoll_nccl
