// Blocks of one kind of memory kept for reuse by a transport (allocating costs far more than a
// lookup): take(bytes) gives the smallest free block that fits, else a new one whose capacity is
// `bytes` rounded up to a power of two (at least 4 KiB), so a block serves several sizes. A pool
// made with `headroom` puts that many bytes in front of every block's capacity (a header), so a
// message of a power-of-two size takes a block of that size plus the header, not twice the size.
// Blocks given back stay until release() or the pool's end. Used by one thread at a time (the
// comm's order).
#pragma once

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "base/result.h"

namespace zcoll {

class BlockPool {
 public:
  struct Block {
    void* ptr = nullptr;  // headroom, then `bytes` of capacity
    size_t bytes = 0;     // capacity after the headroom
  };
  using Alloc = std::function<Result(size_t bytes, void** out)>;
  using Free = std::function<void(void* p)>;

  BlockPool(Alloc alloc, Free free, size_t headroom = 0)
      : alloc_(std::move(alloc)), free_(std::move(free)), headroom_(headroom) {}
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;
  ~BlockPool() { release(); }

  // A block with at least `bytes` of capacity after the headroom.
  Result take(size_t bytes, Block* out) {
    auto best = blocks_.end();
    for (auto it = blocks_.begin(); it != blocks_.end(); ++it)
      if (it->bytes >= bytes && (best == blocks_.end() || it->bytes < best->bytes)) best = it;
    if (best != blocks_.end()) {
      *out = *best;
      blocks_.erase(best);
      return zcollSuccess;
    }
    Block b;
    b.bytes = 4096;
    while (b.bytes < bytes) b.bytes <<= 1;
    ZCOLL_CHECK(alloc_(headroom_ + b.bytes, &b.ptr));
    *out = b;
    return zcollSuccess;
  }
  void giveBack(const Block& b) {
    if (b.ptr != nullptr) blocks_.push_back(b);
  }
  // Frees every block given back.
  void release() {
    for (const Block& b : blocks_) free_(b.ptr);
    blocks_.clear();
  }

 private:
  Alloc alloc_;
  Free free_;
  size_t headroom_;
  std::vector<Block> blocks_;
};

}  // namespace zcoll
