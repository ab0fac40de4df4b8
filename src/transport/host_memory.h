// Host memory the ranks of a node can read in place (zcollMemAllocHost / zcollMemFreeHost).
//
// A caller's ordinary buffer (malloc, a torch tensor) is private to its process: a node peer
// can only copy out of it through the kernel (process_vm_readv, one copy at CMA's speed). An
// allocation from here is a memfd mapped MAP_SHARED, so a node peer that is told about it
// (a RegionRef, published by the algorithm that reads it) maps the bytes it needs and reads
// them with plain loads: no copy at all for a reduction, and memcpy's speed for a gather
// (perf/RESULTS.md, "registered buffers"). The shape is NCCL's ncclMemAlloc plus a registered
// buffer, for host memory.
//
// The pages are reserved at allocation (fallocate), so a machine short of memory fails the
// allocation with a message instead of killing a process with SIGBUS later. A peer maps a region
// only for the call that reads it and unmaps it before that call returns: zcollMemFreeHost
// releases the memory at once, whatever the peers read before.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/result.h"

namespace zcoll::shm {

// Where a buffer lies in a registered allocation: the owner's descriptor of the memfd and the
// buffer's byte offset in it. fd < 0: not registered (read it with process_vm_readv).
struct RegionRef {
  int32_t fd = -1;
  uint32_t reserved = 0;
  uint64_t offset = 0;
};

// A fresh registered allocation of `bytes` (> 0), page-aligned, zero-filled.
Result allocHostMemory(size_t bytes, void** ptr);
// Frees an allocation by the pointer allocHostMemory returned (nullptr: nothing to do).
Result freeHostMemory(void* ptr);
// The registered allocation holding all of [ptr, ptr + bytes), or fd = -1 when there is none.
RegionRef findHostMemory(const void* ptr, size_t bytes);

// `bytes` of a peer's registered allocation, mapped read-only here until this object goes.
class MappedRegion {
 public:
  MappedRegion() = default;
  ~MappedRegion();
  MappedRegion(MappedRegion&& other) noexcept;
  MappedRegion& operator=(MappedRegion&& other) noexcept;
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;

  // Maps `bytes` (> 0) from ref.offset of process pid's allocation; *at = their first byte here.
  Result map(int pid, const RegionRef& ref, size_t bytes, const char** at);

 private:
  void release();

  void* base_ = nullptr;
  size_t length_ = 0;
};

}  // namespace zcoll::shm
