#include "base/process.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>

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

uint64_t processToken() {
  static std::mutex mu;
  static pid_t owner = 0;
  static uint64_t token = 0;
  std::lock_guard<std::mutex> lock(mu);
  if (owner != getpid()) {  // first use, or the first in a forked child
    std::random_device entropy;
    token = (uint64_t{entropy()} << 32) ^ entropy();
    owner = getpid();
  }
  return token;
}

}  // namespace zcoll
