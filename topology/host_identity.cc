// Host identity: which ranks share a node, i.e. can reach each other's memory.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "base/hash.h"
#include "base/params.h"
#include "topology/topology.h"

namespace zcoll {
namespace {

// FNV-1a, then a splitmix64 finalizer: FNV alone leaves the high bits of similar strings
// ("node0", "node1") close, and callers may bucket on any bits of the hash.
uint64_t hashIdentity(const std::string& s) {
  uint64_t h = fnv1a64(s);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

std::string readFirstLine(const char* path) {
  std::string line;
  if (FILE* f = std::fopen(path, "r")) {
    char buf[128];
    if (std::fgets(buf, sizeof(buf), f)) line = buf;
    std::fclose(f);
  }
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return line;
}

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "unknown-host";
  return buf;
}

// "ipc:[4026531839]": two containers with their own IPC namespace cannot share SysV memory.
std::string ipcNamespace() {
  char buf[64] = {};
  ssize_t n = readlink("/proc/self/ns/ipc", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// The device of the /dev/shm mount: a container with a private /dev/shm cannot share POSIX
// shared memory with the host even when it kept the host's IPC namespace.
std::string shmMount() {
  struct stat st;
  if (stat("/dev/shm", &st) != 0) return std::string();
  return std::to_string(static_cast<unsigned long long>(st.st_dev));
}

std::string discoveredIdentity(const std::string& host) {
  std::string bootId = readFirstLine("/proc/sys/kernel/random/boot_id");
  if (bootId.empty())
    ZCOLL_INFO(LogSubsys::kTopo, "no boot id readable; host identity uses the hostname only");
  return "host=" + host + ";boot=" + bootId + ";ipc=" + ipcNamespace() + ";shm=" + shmMount();
}

void setName(const std::string& name, HostIdentity* out) {
  size_t n = name.size() < sizeof(out->name) - 1 ? name.size() : sizeof(out->name) - 1;
  std::memcpy(out->name, name.data(), n);
  out->name[n] = '\0';
}

}  // namespace

Result getHostIdentity(const char* overrideId, HostIdentity* out) {
  if (out == nullptr) return fail(zcollInvalidArgument, "getHostIdentity: out is NULL");
  *out = HostIdentity{};
  std::string chosen = overrideId ? overrideId : "";
  if (chosen.empty()) chosen = paramString("ZCOLL_HOSTID");
  if (!chosen.empty()) {
    // Same prefix for both sources: an id given by config or by environment names one node.
    out->hash = hashIdentity("id=" + chosen);
    setName(chosen, out);
    return zcollSuccess;
  }
  std::string host = hostName();
  out->hash = hashIdentity(discoveredIdentity(host));
  setName(host, out);
  return zcollSuccess;
}

}  // namespace zcoll
