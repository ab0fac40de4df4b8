#include "trigger/shared_flags.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "exec/device_component.h"
#include "transport/shm_segment.h"

namespace zcoll {

namespace {

size_t pageRounded(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

}  // namespace

SharedFlags::~SharedFlags() {
  if (abandoned_) return;
  if (registered_) {
    const DeviceComponent* dc = deviceComponent();
    if (dc != nullptr && dc->unregisterHostMemory != nullptr) dc->unregisterHostMemory(words_);
  }
  if (words_ != nullptr) munmap(words_, bytes_);
  if (fd_ >= 0) close(fd_);
}

Result SharedFlags::create(size_t words) {
  fd_ = memfd_create("zcoll-trigger-flags", MFD_CLOEXEC);
  if (fd_ < 0) return fail(zcollSystemError, "memfd_create (trigger flags): %s", strerror(errno));
  if (ftruncate(fd_, static_cast<off_t>(pageRounded(words * sizeof(uint32_t)))) != 0)
    return fail(zcollSystemError, "ftruncate (trigger flags): %s", strerror(errno));
  return map(words);
}

Result SharedFlags::open(int pid, int fd, size_t words) {
  fd_ = pid == getpid() ? dup(fd) : shm::copyFd(pid, fd);
  if (fd_ < 0)
    return fail(zcollSystemError, "opening the trigger flags of pid %d (fd %d): %s", pid, fd,
                strerror(errno));
  return map(words);
}

Result SharedFlags::map(size_t words) {
  bytes_ = pageRounded(words * sizeof(uint32_t));
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) return fail(zcollSystemError, "mmap (trigger flags): %s", strerror(errno));
  words_ = static_cast<uint32_t*>(p);
  return zcollSuccess;
}

Result SharedFlags::registerWithDevice() {
  const DeviceComponent* dc = deviceComponent();
  if (dc == nullptr || dc->registerHostMemory == nullptr)
    return fail(zcollUnsupported, "the device component registers no host memory");
  ZCOLL_CHECK(dc->registerHostMemory(words_, bytes_));
  registered_ = true;
  return zcollSuccess;
}

}  // namespace zcoll
