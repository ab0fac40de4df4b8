// Host memory the ranks of a node can read in place (zcollMemAllocHost / zcollMemFreeHost).
//
// A caller's ordinary buffer (malloc, a torch tensor) is private to its process: a node peer
// can only copy out of it through the kernel (process_vm_readv, one copy at CMA's speed). An
// allocation from here is a memfd mapped MAP_SHARED, so a node peer that is told about it
// (a RegionRef, published by the algorithm that reads it) maps the bytes it needs and reads
// them with plain loads: no copy at all for a reduction, and memcpy's speed for a gather
// (perf/LOG.md, "registered buffers"). The shape is NCCL's ncclMemAlloc plus a registered
// buffer, for host memory.
//
// The pages are reserved at allocation (fallocate), so a machine short of memory fails the
// allocation with a message instead of killing a process with SIGBUS later. Peers keep their
// mappings across calls (transport/peer_regions.h): each allocation has a number never reused
// in its process (its generation) and the process counts its frees, so a peer tells a new
// allocation from an old one that had the same descriptor, and drops what may have been freed.
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
  uint64_t generation = 0;  // the allocation's number in the owner's process (from 1, never reused)
  uint64_t frees = 0;       // how many allocations the owner had freed when this ref was made
};

// A fresh registered allocation of `bytes` (> 0), page-aligned, zero-filled.
Result allocHostMemory(size_t bytes, void** ptr);
// Frees an allocation by the pointer allocHostMemory returned (nullptr: nothing to do).
Result freeHostMemory(void* ptr);
// The registered allocation holding all of [ptr, ptr + bytes), or fd = -1 when there is none
// (frees is set either way).
RegionRef findHostMemory(const void* ptr, size_t bytes);

}  // namespace zcoll::shm
