#include "transport/host_memory.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "transport/shm_segment.h"

namespace zcoll::shm {

namespace {

struct Allocation {
  int fd;
  size_t bytes;  // mapped, a whole number of pages
};

// The live allocations of this process, by start address.
struct Registry {
  std::mutex mu;
  std::map<uintptr_t, Allocation> byBase;
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
  r.byBase[reinterpret_cast<uintptr_t>(p)] = Allocation{fd, length};
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
  auto it = r.byBase.upper_bound(at);
  if (it == r.byBase.begin()) return ref;
  --it;
  const uintptr_t base = it->first;
  if (at - base > it->second.bytes || bytes > it->second.bytes - (at - base)) return ref;
  ref.fd = it->second.fd;
  ref.offset = at - base;
  return ref;
}

MappedRegion::~MappedRegion() { release(); }

MappedRegion::MappedRegion(MappedRegion&& other) noexcept { *this = std::move(other); }

MappedRegion& MappedRegion::operator=(MappedRegion&& other) noexcept {
  if (this != &other) {
    release();
    std::swap(base_, other.base_);
    std::swap(length_, other.length_);
  }
  return *this;
}

void MappedRegion::release() {
  if (base_ != nullptr) munmap(base_, length_);
  base_ = nullptr;
  length_ = 0;
}

Result MappedRegion::map(int pid, const RegionRef& ref, size_t bytes, const char** at) {
  release();
  const int fd = copyFd(pid, ref.fd);
  if (fd < 0)
    return fail(zcollRemoteError, "host memory: cannot open the registered buffer of pid %d "
                "(pidfd_getfd: %s)", pid, std::strerror(errno));
  struct stat st {};
  const size_t start = ref.offset / pageSize() * pageSize();
  const size_t length = ref.offset - start + bytes;
  if (fstat(fd, &st) != 0 || ref.offset > static_cast<uint64_t>(st.st_size) ||
      bytes > static_cast<uint64_t>(st.st_size) - ref.offset) {
    close(fd);
    return fail(zcollRemoteError, "host memory: pid %d published %zu bytes at offset %llu of a "
                "registered buffer that is smaller", pid, bytes,
                static_cast<unsigned long long>(ref.offset));
  }
  void* p = mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(start));
  const int err = errno;
  close(fd);  // the mapping keeps the memory
  if (p == MAP_FAILED)
    return fail(zcollSystemError, "host memory: mapping %zu bytes of pid %d failed: %s", length,
                pid, std::strerror(err));
  base_ = p;
  length_ = length;
  *at = static_cast<const char*>(p) + (ref.offset - start);
  return zcollSuccess;
}

}  // namespace zcoll::shm
