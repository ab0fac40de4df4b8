// A growable host buffer, 8-byte aligned, never empty (so no call ever sees a NULL pointer):
// the benchmarks' send and receive blocks (zcoll's driver and the NCCL peer).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace zcoll::perf {

class HostBuffer {
 public:
  unsigned char* ensure(size_t bytes) {
    size_t words = std::max<size_t>(1, (bytes + 7) / 8);
    if (words_.size() < words) words_.resize(words);
    return reinterpret_cast<unsigned char*>(words_.data());
  }

 private:
  std::vector<uint64_t> words_;
};

}  // namespace zcoll::perf
