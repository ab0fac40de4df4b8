// A communicator's scratch memory of one kind: one region, grown on demand and reused across
// calls, since allocating per call would put malloc (or cudaMalloc) and page faults on the hot
// path. One region per call: an algorithm carves what it needs out of it. A region outgrown is
// freed at once, or, for memory whose release waits for the device (cudaFree), kept until
// release(): a call running on the progress thread must not wait for the device while its
// caller's stream waits for it. Such regions grow at least twofold, so what is kept stays below
// the size of the current one.
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

 private:
  struct Region {
    const MemoryOps* mem;
    void* ptr;
  };
  const MemoryOps* mem_ = nullptr;
  void* ptr_ = nullptr;
  size_t size_ = 0;
  std::vector<Region> outgrown_;  // kept until release() (releaseWaitsForDevice)
};

}  // namespace zcoll
