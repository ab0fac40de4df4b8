// A growable host buffer from zcollMemAllocHost (-R 1): memory the node's peers read in place.
// Never empty, so no call sees a NULL pointer; grows by a fresh allocation (contents dropped).
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>

#include "zcoll/zcoll.h"

namespace zcoll::perf {

class RegisteredHostBuffer {
 public:
  RegisteredHostBuffer() = default;
  ~RegisteredHostBuffer() { zcollMemFreeHost(ptr_); }
  RegisteredHostBuffer(const RegisteredHostBuffer&) = delete;
  RegisteredHostBuffer& operator=(const RegisteredHostBuffer&) = delete;

  unsigned char* ensure(size_t bytes) {
    if (bytes == 0) bytes = 1;
    if (bytes > bytes_) {
      zcollMemFreeHost(ptr_);
      ptr_ = nullptr;
      bytes_ = 0;
      if (zcollMemAllocHost(&ptr_, bytes) != zcollSuccess) {
        std::fprintf(stderr, "-R 1: zcollMemAllocHost(%zu) failed: %s\n", bytes,
                     zcollGetLastError(nullptr));
        std::exit(1);
      }
      bytes_ = bytes;
    }
    return static_cast<unsigned char*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace zcoll::perf
