#include "transport/peer_regions.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "transport/shm_segment.h"

namespace zcoll::shm {

PeerMapping::~PeerMapping() { munmap(base_, length_); }

Result PeerRegions::view(int pid, const RegionRef& ref, size_t bytes, bool writable,
                         std::shared_ptr<const PeerMapping>* held, const char** at) {
  std::lock_guard<std::mutex> lock(mu_);
  Owner& owner = owners_[pid];
  forgetFreed(owner, ref.frees, ref.generation);
  Kept& kept = owner.byGeneration[ref.generation];
  if (!kept.mapping || (writable && kept.mapping->writableBase() == nullptr)) {
    std::shared_ptr<const PeerMapping> fresh;
    Result r = mapWhole(pid, ref, writable, &fresh);
    if (r != zcollSuccess) {
      if (!kept.mapping) owner.byGeneration.erase(ref.generation);
      return r;
    }
    kept.mapping = std::move(fresh);  // a read-only one it replaces lives on with its holders
    ++mapped_;
  }
  kept.lastUse = ++uses_;
  if (ref.offset > kept.mapping->length() || bytes > kept.mapping->length() - ref.offset)
    return fail(zcollRemoteError, "host memory: pid %d published %zu bytes at offset %llu of a "
                "registered buffer that is smaller", pid, bytes,
                static_cast<unsigned long long>(ref.offset));
  *held = kept.mapping;
  *at = kept.mapping->base() + ref.offset;
  if (owner.byGeneration.size() > kMaxPerPeer) evictOldest(owner);
  return zcollSuccess;
}

// The owner freed something since the newest count seen: any kept mapping but `keep`'s (an
// allocation live now, published for this call) may be of it. An older count, from another rank
// of the same process, needs nothing: those frees were handled.
void PeerRegions::forgetFreed(Owner& owner, uint64_t frees, uint64_t keep) {
  if (frees <= owner.frees) return;
  owner.frees = frees;
  for (auto it = owner.byGeneration.begin(); it != owner.byGeneration.end();)
    it = it->first == keep ? std::next(it) : owner.byGeneration.erase(it);
}

void PeerRegions::noteFrees(int pid, uint64_t frees) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = owners_.find(pid);
  if (it != owners_.end()) forgetFreed(it->second, frees, 0);  // generations start at 1
}

void PeerRegions::evictOldest(Owner& owner) {
  auto oldest = owner.byGeneration.begin();
  for (auto it = owner.byGeneration.begin(); it != owner.byGeneration.end(); ++it)
    if (it->second.lastUse < oldest->second.lastUse) oldest = it;
  owner.byGeneration.erase(oldest);
}

Result PeerRegions::mapWhole(int pid, const RegionRef& ref, bool writable,
                             std::shared_ptr<const PeerMapping>* out) {
  const int fd = copyFd(pid, ref.fd);
  if (fd < 0)
    return fail(zcollRemoteError, "host memory: cannot open the registered buffer of pid %d "
                "(pidfd_getfd: %s)", pid, std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size <= 0) {
    const int err = errno;
    close(fd);
    return fail(zcollRemoteError, "host memory: the registered buffer of pid %d cannot be sized "
                "(fstat: %s)", pid, std::strerror(err));
  }
  const size_t length = static_cast<size_t>(st.st_size);
  void* p = mmap(nullptr, length, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);  // the mapping keeps the memory
  if (p == MAP_FAILED)
    return fail(zcollSystemError, "host memory: mapping %zu bytes of pid %d failed: %s", length,
                pid, std::strerror(err));
  *out = std::make_shared<const PeerMapping>(p, length, writable);
  return zcollSuccess;
}

size_t PeerRegions::kept() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [pid, owner] : owners_) n += owner.byGeneration.size();
  return n;
}

uint64_t PeerRegions::mapped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mapped_;
}

}  // namespace zcoll::shm
