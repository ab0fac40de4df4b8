#include "exec/scratch.h"

#include <algorithm>

namespace zcoll {

Result Scratch::get(size_t bytes, const MemoryOps& mem, void** out) {
  if (bytes == 0) bytes = 1;
  if (bytes > size_ || mem_ != &mem) {
    size_t want = bytes + bytes / 4;  // room to grow a little without reallocating
    if (mem_ == &mem && mem.deferRelease) want = std::max(want, 2 * size_);
    if (ptr_ != nullptr && mem_->deferRelease)
      outgrown_.push_back({mem_, ptr_});
    else if (ptr_ != nullptr)
      mem_->release(ptr_);
    ptr_ = nullptr;
    mem_ = nullptr;
    size_ = 0;
    Result r = mem.alloc(want, &ptr_);
    if (r != zcollSuccess) {
      ptr_ = nullptr;
      return failWithContext(r, "scratch");
    }
    mem_ = &mem;
    size_ = want;
  }
  *out = ptr_;
  return zcollSuccess;
}

void Scratch::abandon() {
  outgrown_.clear();
  ptr_ = nullptr;
  mem_ = nullptr;
  size_ = 0;
}

void Scratch::release() {
  if (ptr_ != nullptr) mem_->release(ptr_);
  for (const Region& r : outgrown_) r.mem->release(r.ptr);
  outgrown_.clear();
  ptr_ = nullptr;
  mem_ = nullptr;
  size_ = 0;
}

}  // namespace zcoll
