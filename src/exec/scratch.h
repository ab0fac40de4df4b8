// A communicator's scratch memory of one kind: one region, grown on demand and reused across
// calls, since allocating per call would put malloc (or cudaMalloc) and page faults on the hot
// path. One region per call: an algorithm carves what it needs out of it.
#pragma once

#include <cstddef>

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
  void release();

 private:
  const MemoryOps* mem_ = nullptr;
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace zcoll
