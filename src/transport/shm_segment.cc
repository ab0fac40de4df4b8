#include "transport/shm_segment.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>

namespace zcoll::shm {

namespace {

constexpr size_t kDoorbellBytes = sizeof(Doorbell);

int pidfdOpen(int pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

int pidfdGetfd(int pidfd, int fd) { return static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0)); }

// Yama's ptrace_scope 1 lets a process be read only by its ancestors unless it names a tracer.
void allowPeersToRead() {
  FILE* f = std::fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
  if (f == nullptr) return;
  int scope = 0;
  if (std::fscanf(f, "%d", &scope) != 1) scope = 0;
  std::fclose(f);
  if (scope == 1) prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
}

}  // namespace

int copyFd(int pid, int fd) {
  int pidfd = pidfdOpen(pid);
  if (pidfd < 0) return -1;
  int copy = pidfdGetfd(pidfd, fd);
  int saved = errno;
  close(pidfd);
  errno = saved;
  return copy;
}

Result readProcess(int pid, uint64_t addr, void* dst, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    size_t piece = std::min<size_t>(bytes - done, size_t{2} << 20);
    iovec local{static_cast<char*>(dst) + done, piece};
    iovec remote{reinterpret_cast<void*>(addr + done), piece};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n <= 0)
      return fail(zcollRemoteError, "shm: reading %zu bytes from pid %d failed: %s", bytes, pid,
                  n < 0 ? std::strerror(errno) : "no progress");
    done += static_cast<size_t>(n);
  }
  return zcollSuccess;
}

size_t segmentBytes(uint32_t localRanks) {
  return kDoorbellBytes + localRanks * (sizeof(Ring) + sizeof(RndvTable));
}

Segment::~Segment() { release(); }

Segment::Segment(Segment&& other) noexcept { *this = std::move(other); }

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    base_ = other.base_;
    bytes_ = other.bytes_;
    localRanks_ = other.localRanks_;
    other.fd_ = -1;
    other.base_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void Segment::release() {
  if (base_ != nullptr) munmap(base_, bytes_);
  if (fd_ >= 0) close(fd_);
  base_ = nullptr;
  fd_ = -1;
}

Result Segment::create(Segment* out) {
  int fd = memfd_create("zcoll-shm", MFD_CLOEXEC);
  if (fd < 0) return fail(zcollSystemError, "shm: memfd_create failed: %s", std::strerror(errno));
  out->release();
  out->fd_ = fd;
  return zcollSuccess;
}

Result Segment::open(int pid, int fd, Segment* out) {
  int copy = copyFd(pid, fd);
  if (copy < 0)
    return fail(zcollSystemError, "shm: cannot open the segment of pid %d (pidfd_getfd: %s); "
                "ZCOLL_TRANSPORT=ucx avoids shared memory", pid, std::strerror(errno));
  out->release();
  out->fd_ = copy;
  return zcollSuccess;
}

Result Segment::map(uint32_t localRanks) {
  size_t bytes = segmentBytes(localRanks);
  if (ftruncate(fd_, static_cast<off_t>(bytes)) != 0 ||
      fallocate(fd_, 0, 0, static_cast<off_t>(bytes)) != 0)
    return fail(zcollSystemError, "shm: cannot reserve %zu bytes of shared memory for %u local "
                "ranks: %s (free memory, or ZCOLL_TRANSPORT=ucx)", bytes, localRanks,
                std::strerror(errno));
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED)
    return fail(zcollSystemError, "shm: mmap of %zu bytes failed: %s", bytes, std::strerror(errno));
  base_ = static_cast<unsigned char*>(p);
  bytes_ = bytes;
  localRanks_ = localRanks;
  return zcollSuccess;
}

Doorbell& Segment::doorbell() const { return *reinterpret_cast<Doorbell*>(base_); }

Ring& Segment::inbound(int localSource) const {
  return reinterpret_cast<Ring*>(base_ + kDoorbellBytes)[localSource];
}

RndvTable& Segment::rndv(int localDestination) const {
  unsigned char* tables = base_ + kDoorbellBytes + localRanks_ * sizeof(Ring);
  return reinterpret_cast<RndvTable*>(tables)[localDestination];
}

void ring(Doorbell& d) {
  d.bell.fetch_add(1, std::memory_order_seq_cst);
  if (d.sleeping.load(std::memory_order_seq_cst) != 0)
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&d.bell), FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
}

void sleepOn(Doorbell& d, uint32_t seen, int timeoutMs) {
  timespec ts{timeoutMs / 1000, (timeoutMs % 1000) * 1000000L};
  // Shared (not FUTEX_PRIVATE): the writers are other processes.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&d.bell), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

bool probeSharing(std::string* why) {
  allowPeersToRead();
  Segment seg;
  if (Segment::create(&seg) != zcollSuccess) {
    *why = "memfd_create failed";
    return false;
  }
  int copy = copyFd(getpid(), seg.fd());
  if (copy < 0) {
    *why = std::string("pidfd_getfd is not permitted here (") + std::strerror(errno) + ")";
    return false;
  }
  close(copy);
  uint64_t from = 0x5a636f6c6c, to = 0;
  iovec local{&to, sizeof(to)}, remote{&from, sizeof(from)};
  if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != sizeof(to) || to != from) {
    *why = std::string("process_vm_readv is not permitted here (") + std::strerror(errno) + ")";
    return false;
  }
  *why = "memfd rings, single-copy process_vm_readv";
  return true;
}

}  // namespace zcoll::shm
