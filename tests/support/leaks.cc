#include "support/leaks.h"

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace zcoll::test {

namespace {

// The inodes of this machine's listening TCP sockets.
std::set<std::string> listeningInodes() {
  std::set<std::string> inodes;
  for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, state, queues, timer, retr, uid, timeout, inode;
      f >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (state == "0A") inodes.insert(inode);
    }
  }
  return inodes;
}

}  // namespace

int openDescriptors() {
  const std::set<std::string> listening = listeningInodes();
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      char target[256] = {};
      const std::string path = std::string("/proc/self/fd/") + e->d_name;
      if (readlink(path.c_str(), target, sizeof(target) - 1) < 0) continue;
      const std::string t = target;
      if (t.rfind("socket:[", 0) == 0 && listening.count(t.substr(8, t.size() - 9))) continue;
      ++n;
    }
    closedir(d);
  }
  return n;
}

int memfdMappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);)
    if (line.find("memfd:") != std::string::npos) ++n;
  return n;
}

}  // namespace zcoll::test
