#include "exec/scratch.h"

namespace zcoll {

Result Scratch::get(size_t bytes, const MemoryOps& mem, void** out) {
  if (bytes == 0) bytes = 1;
  if (bytes > size_ || mem_ != &mem) {
    release();
    const size_t want = bytes + bytes / 4;  // room to grow a little without reallocating
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

void Scratch::release() {
  if (ptr_ != nullptr) mem_->release(ptr_);
  ptr_ = nullptr;
  mem_ = nullptr;
  size_ = 0;
}

}  // namespace zcoll
