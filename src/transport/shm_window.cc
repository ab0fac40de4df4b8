#include "transport/shm_window.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "transport/shm_segment.h"

namespace zcoll::shm {

namespace {

constexpr size_t kGranule = size_t{1} << 20;  // windows grow in whole MiB

size_t roundUp(size_t bytes) { return (bytes + kGranule - 1) / kGranule * kGranule; }

}  // namespace

OwnWindow::~OwnWindow() {
  if (base_ != nullptr) munmap(base_, bytes_);
  if (fd_ >= 0) close(fd_);
}

Result OwnWindow::reserve(size_t bytes) {
  if (bytes <= bytes_) return zcollSuccess;
  if (fd_ < 0) {
    fd_ = memfd_create("zcoll-window", MFD_CLOEXEC);
    if (fd_ < 0)
      return fail(zcollSystemError, "shm window: memfd_create failed: %s", std::strerror(errno));
  }
  const size_t want = roundUp(bytes);
  if (ftruncate(fd_, static_cast<off_t>(want)) != 0 ||
      fallocate(fd_, 0, 0, static_cast<off_t>(want)) != 0)
    return fail(zcollSystemError, "shm window: cannot reserve %zu bytes of shared memory: %s "
                "(free memory, or ZCOLL_TRANSPORT=ucx)", want, std::strerror(errno));
  void* p = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED)
    return fail(zcollSystemError, "shm window: mmap of %zu bytes failed: %s", want,
                std::strerror(errno));
  if (base_ != nullptr) munmap(base_, bytes_);
  base_ = static_cast<char*>(p);
  bytes_ = want;
  return zcollSuccess;
}

WindowRef OwnWindow::ref() const {
  WindowRef r;
  r.fd = fd_;
  r.bytes = bytes_;
  return r;
}

PeerWindow::~PeerWindow() { release(); }

PeerWindow::PeerWindow(PeerWindow&& other) noexcept { *this = std::move(other); }

PeerWindow& PeerWindow::operator=(PeerWindow&& other) noexcept {
  if (this != &other) {
    release();
    std::swap(ownerFd_, other.ownerFd_);
    std::swap(fd_, other.fd_);
    std::swap(base_, other.base_);
    std::swap(bytes_, other.bytes_);
  }
  return *this;
}

void PeerWindow::release() {
  if (base_ != nullptr) munmap(base_, bytes_);
  if (fd_ >= 0) close(fd_);
  ownerFd_ = fd_ = -1;
  base_ = nullptr;
  bytes_ = 0;
}

Result PeerWindow::map(int pid, const WindowRef& ref, const char** base) {
  if (ref.fd < 0 || ref.bytes == 0)
    return fail(zcollInternalError, "shm window: pid %d sent an empty window reference", pid);
  if (ref.fd != ownerFd_) {
    release();
    fd_ = copyFd(pid, ref.fd);
    if (fd_ < 0)
      return fail(zcollRemoteError, "shm window: cannot open the window of pid %d "
                  "(pidfd_getfd: %s)", pid, std::strerror(errno));
    ownerFd_ = ref.fd;
  }
  if (ref.bytes > bytes_) {
    void* p = mmap(nullptr, ref.bytes, PROT_READ, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED)
      return fail(zcollSystemError, "shm window: mapping %llu bytes of pid %d failed: %s",
                  static_cast<unsigned long long>(ref.bytes), pid, std::strerror(errno));
    if (base_ != nullptr) munmap(base_, bytes_);
    base_ = static_cast<char*>(p);
    bytes_ = ref.bytes;
  }
  *base = base_;
  return zcollSuccess;
}

}  // namespace zcoll::shm
