#include "base/process.h"

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace zcoll {

bool processGone(int pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return false;
  char buf[512] = {};
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  const char* close = std::strrchr(buf, ')');  // the state follows the command name
  return n > 0 && close != nullptr && (close[2] == 'Z' || close[2] == 'X');
}

}  // namespace zcoll
