// Windows: zcoll-owned memory that a rank exposes and the ranks of its node map and read in
// place, with no copy at all (the "expose a buffer, map a peer's" primitive; mscclpp's
// registered memory). Node stages put their own intermediate data there (qgZ's quantized
// pieces) and their peers' kernels read it straight from the mapping.
//
// One memfd per rank and communicator, created at first use, grown (never shrunk or replaced)
// with fallocate, so a machine short of memory fails with a message instead of a SIGBUS. A
// WindowRef names it; a peer copies the descriptor once with pidfd_getfd (the same permission
// as the shm segments) and remaps only when the reference shows it has grown. Like the
// segments, nothing is named in /dev/shm: it vanishes with the last process that maps it.
//
// Who may write when is the algorithm's business: an owner writes its window only while no
// peer reads it (messages order the two; see coll/qgz_reducescatter.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/result.h"

namespace zcoll::shm {

// What a peer needs to map a window: the owner's descriptor number and the bytes it covers.
struct WindowRef {
  int32_t fd = -1;
  uint32_t reserved = 0;
  uint64_t bytes = 0;
};

// This rank's window.
class OwnWindow {
 public:
  OwnWindow() = default;
  ~OwnWindow();
  OwnWindow(const OwnWindow&) = delete;
  OwnWindow& operator=(const OwnWindow&) = delete;

  // Grows the window to at least `bytes` (its contents are kept; its address may change).
  Result reserve(size_t bytes);
  char* base() const { return base_; }
  WindowRef ref() const;

 private:
  int fd_ = -1;
  char* base_ = nullptr;
  size_t bytes_ = 0;
};

// A peer's window, mapped read-only here.
class PeerWindow {
 public:
  PeerWindow() = default;
  ~PeerWindow();
  PeerWindow(PeerWindow&& other) noexcept;
  PeerWindow& operator=(PeerWindow&& other) noexcept;
  PeerWindow(const PeerWindow&) = delete;
  PeerWindow& operator=(const PeerWindow&) = delete;

  // Maps the window `ref` of process `pid` (again only when it has grown); *base = its start.
  Result map(int pid, const WindowRef& ref, const char** base);

 private:
  void release();

  int ownerFd_ = -1;  // the owner's descriptor number, as in its WindowRef
  int fd_ = -1;       // this process's copy
  char* base_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace zcoll::shm
