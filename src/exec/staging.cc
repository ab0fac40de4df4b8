#include "exec/staging.h"

#include "transport/transport.h"

namespace zcoll {

namespace {
constexpr size_t kMinBlock = size_t(64) << 10;

size_t roundUpPow2(size_t n) {
  size_t b = kMinBlock;
  while (b < n) b <<= 1;
  return b;
}
}  // namespace

Result StagingPool::take(size_t bytes, const MemoryOps& mem, Block* out) {
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it)
    if (it->mem == &mem && it->bytes >= bytes && (best == free_.end() || it->bytes < best->bytes))
      best = it;
  if (best != free_.end()) {
    *out = *best;
    free_.erase(best);
    return zcollSuccess;
  }
  Block b{nullptr, roundUpPow2(bytes), &mem};
  Result r = mem.allocStaging(b.bytes, &b.ptr);
  if (r != zcollSuccess) return failWithContext(r, "staging device bytes through host memory");
  *out = b;
  return zcollSuccess;
}

void StagingPool::release() {
  for (const Block& b : free_) b.mem->releaseStaging(b.ptr);
  free_.clear();
}

Staging::~Staging() {
  for (const StagingPool::Block& b : held_) pool_.giveBack(b);
}

Result Staging::block(size_t bytes, void** host) {
  StagingPool::Block b;
  ZCOLL_CHECK(pool_.take(bytes, exec_.memory(), &b));
  held_.push_back(b);
  *host = b.ptr;
  return zcollSuccess;
}

Result Staging::forSend(const void* dev, size_t bytes, const void** host) {
  void* h = nullptr;
  ZCOLL_CHECK(block(bytes, &h));
  ZCOLL_CHECK(exec_.copy(h, dev, bytes));
  *host = h;
  return zcollSuccess;
}

Result Staging::forRecv(void* dev, size_t bytes, const Request* req, void** host) {
  ZCOLL_CHECK(block(bytes, host));
  recvs_.push_back({req, dev, *host, bytes});
  return zcollSuccess;
}

Result Staging::arrived(const Request* reqs, size_t n) {
  for (auto it = recvs_.begin(); it != recvs_.end();) {
    if (it->req >= reqs && it->req < reqs + n) {
      ZCOLL_CHECK(exec_.copy(it->dev, it->host, it->bytes));
      it = recvs_.erase(it);
    } else {
      ++it;
    }
  }
  return zcollSuccess;
}

}  // namespace zcoll
