// Staging: device bytes through host memory, for transports that carry host memory only (shm,
// UCX without CUDA support: Debian's UCX 1.13 has none). A device call's Stage sends a device
// buffer by copying it (its executor, on the call's stream) into a staging block and sending the
// block; it receives into a block and, once the receive is complete, copies the block into the
// device buffer. Only what an algorithm sends crosses PCIe: for the ZeRO++ collectives, the
// quantized bytes (the kernels run on the device).
//
// StagingPool: the comm's blocks (pinned host memory for CUDA), kept across calls because
// pinning costs milliseconds. Staging: the blocks one Stage holds, given back when it dies. Both
// are used by one call at a time (the comm's order, exec/engine.h).
#pragma once

#include <cstddef>
#include <vector>

#include "exec/executor.h"

namespace zcoll {

struct Request;

class StagingPool {
 public:
  StagingPool() = default;
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;
  ~StagingPool() { release(); }

  struct Block {
    void* ptr = nullptr;
    size_t bytes = 0;
    const MemoryOps* mem = nullptr;
  };
  // A free block of at least `bytes` from `mem` (the smallest that fits), or a new one.
  Result take(size_t bytes, const MemoryOps& mem, Block* out);
  void giveBack(const Block& b) { free_.push_back(b); }
  // Frees every block given back (none may be taken).
  void release();
  size_t freeBlocks() const { return free_.size(); }

 private:
  std::vector<Block> free_;
};

class Staging {
 public:
  Staging(StagingPool& pool, Executor& exec) : pool_(pool), exec_(exec) {}
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  ~Staging();

  // A host copy of device `dev` to send: issues the copy on the executor and returns the block.
  // The caller flushes the executor before a transport reads it (Stage::send does).
  Result forSend(const void* dev, size_t bytes, const void** host);
  // A host block to receive `bytes` into for device `dev`; arrived() copies it there once `req`
  // is complete.
  Result forRecv(void* dev, size_t bytes, const Request* req, void** host);
  // Issues the copy into the device buffer for every staged receive among reqs[0, n), all
  // complete. Later operations of the executor see the data (issue order).
  Result arrived(const Request* reqs, size_t n);

 private:
  struct PendingRecv {
    const Request* req;
    void* dev;
    void* host;
    size_t bytes;
  };
  Result block(size_t bytes, void** host);

  StagingPool& pool_;
  Executor& exec_;
  std::vector<StagingPool::Block> held_;
  std::vector<PendingRecv> recvs_;
};

}  // namespace zcoll
