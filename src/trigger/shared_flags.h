// The flags of stream-triggered calls (trigger/ring.h): 32-bit words in host memory that every
// rank of a node maps (one memfd, made by the group's first rank and opened by the others with
// pidfd_getfd, as the shm transport opens its segments) and registers with its device, so that
// a rank's stream writes a word (Executor::writeValue) that a peer's stream waits on
// (Executor::waitBits). Host memory, not device memory, so that the host can release every
// wait without calling CUDA (an abort: releaseAll), which the device rule requires of anything
// a stream may wait on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/result.h"

namespace zcoll {

class SharedFlags {
 public:
  SharedFlags() = default;
  ~SharedFlags();
  SharedFlags(const SharedFlags&) = delete;
  SharedFlags& operator=(const SharedFlags&) = delete;

  // A new memfd of `words` zeroed words, mapped here; fd() names it for the peers.
  Result create(size_t words);
  // Maps the memfd `fd` of process `pid` (this process: a dup), `words` long.
  Result open(int pid, int fd, size_t words);
  // Registers the mapping with the active device component (synchronizes the device: only
  // while no stream is held).
  Result registerWithDevice();

  int fd() const { return fd_; }
  uint32_t* word(size_t i) const { return words_ + i; }
  // Keeps the mapping (and its registration) for the rest of the process: a stream that may
  // still wait on it never reads unmapped memory.
  void abandon() { abandoned_ = true; }

 private:
  Result map(size_t words);

  int fd_ = -1;
  uint32_t* words_ = nullptr;
  size_t bytes_ = 0;
  bool registered_ = false;
  bool abandoned_ = false;
};

}  // namespace zcoll
