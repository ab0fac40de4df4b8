#include "transport/host_memory.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>

namespace zcoll::shm {

namespace {

struct Allocation {
  int fd;
  size_t bytes;  // mapped, a whole number of pages
  uint64_t generation;
};

// The live allocations of this process, by start address.
struct Registry {
  std::mutex mu;
  std::map<uintptr_t, Allocation> byBase;
  uint64_t allocations = 0;  // made so far: the next one's generation is this + 1
  uint64_t frees = 0;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: frees may come from static destructors
  return *r;
}

size_t pageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

size_t roundUp(size_t bytes, size_t to) { return (bytes + to - 1) / to * to; }

// The memfd behind a new allocation of `bytes`, its pages reserved.
Result createBacking(size_t bytes, int* fd) {
  *fd = memfd_create("zcoll-host-memory", MFD_CLOEXEC);
  if (*fd < 0)
    return fail(zcollSystemError, "zcollMemAllocHost: memfd_create failed: %s",
                std::strerror(errno));
  if (ftruncate(*fd, static_cast<off_t>(bytes)) != 0 ||
      fallocate(*fd, 0, 0, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    close(*fd);
    return fail(zcollSystemError, "zcollMemAllocHost: cannot reserve %zu bytes of shared memory: "
                "%s", bytes, std::strerror(err));
  }
  return zcollSuccess;
}

}  // namespace

Result allocHostMemory(size_t bytes, void** ptr) {
  if (bytes > (SIZE_MAX >> 1))
    return fail(zcollInvalidArgument, "zcollMemAllocHost: size %zu is too large", bytes);
  const size_t length = roundUp(bytes, pageSize());
  int fd = -1;
  ZCOLL_CHECK(createBacking(length, &fd));
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    close(fd);
    return fail(zcollSystemError, "zcollMemAllocHost: mmap of %zu bytes failed: %s", length,
                std::strerror(err));
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.byBase[reinterpret_cast<uintptr_t>(p)] = Allocation{fd, length, ++r.allocations};
  *ptr = p;
  return zcollSuccess;
}

Result freeHostMemory(void* ptr) {
  if (ptr == nullptr) return zcollSuccess;
  Allocation a{};
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.byBase.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == r.byBase.end())
      return fail(zcollInvalidArgument, "zcollMemFreeHost: %p was not returned by "
                  "zcollMemAllocHost, or was freed already", ptr);
    a = it->second;
    r.byBase.erase(it);
    // Counted before the memory goes: a peer that sees this count drops its mappings of this
    // process's allocations (theirs keep the pages alive until then, never reused meanwhile).
    ++r.frees;
  }
  munmap(ptr, a.bytes);
  close(a.fd);
  return zcollSuccess;
}

RegionRef findHostMemory(const void* ptr, size_t bytes) {
  RegionRef ref;
  const uintptr_t at = reinterpret_cast<uintptr_t>(ptr);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  ref.frees = r.frees;
  auto it = r.byBase.upper_bound(at);
  if (it == r.byBase.begin()) return ref;
  --it;
  const uintptr_t base = it->first;
  if (at - base > it->second.bytes || bytes > it->second.bytes - (at - base)) return ref;
  ref.fd = it->second.fd;
  ref.offset = at - base;
  ref.generation = it->second.generation;
  return ref;
}

}  // namespace zcoll::shm
