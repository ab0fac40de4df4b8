// A communicator's scratch memory of one kind: one region, grown on demand and reused across
// calls, since allocating per call would put malloc (or a device allocation) and page faults on
// the hot path. One region per call: an algorithm carves what it needs out of it. A region
// outgrown is freed at once, or, for memory whose release is not ordered after the call's own
// queued work (MemoryOps::deferRelease: CUDA's stream-ordered free on zcoll's stream), kept until
// release(), when no call runs. Such regions grow at least twofold, so what is kept stays below
// the size of the current one. Device scratch is allocated in stream order (never cudaMalloc,
// which would synchronize the device while the caller's stream waits for the call).
#pragma once

#include <cstddef>
#include <vector>

#include "exec/executor.h"

namespace zcoll {

class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { release(); }

  // At least `bytes` of `mem`'s memory. A region too small, or from another MemoryOps, is
  // replaced (contents are not kept).
  Result get(size_t bytes, const MemoryOps& mem, void** out);
  // Frees every region (call it where no queued call can hold a stream: comm destroy).
  void release();
  // Forgets every region without freeing it: work that may never end still uses them.
  void abandon();

 private:
  struct Region {
    const MemoryOps* mem;
    void* ptr;
  };
  const MemoryOps* mem_ = nullptr;
  void* ptr_ = nullptr;
  size_t size_ = 0;
  std::vector<Region> outgrown_;  // kept until release() (deferRelease)
};

}  // namespace zcoll
