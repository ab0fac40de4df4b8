// exec/bulk_copy.h alone: bulkCopy gives memcpy's bytes at every size and alignment, below and
// above the size where it streams, and writes nothing outside the destination.
#include "exec/bulk_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace zcoll {
namespace {

constexpr uint8_t kGuard = 0xA5;

// Copies `bytes` from src + srcOff to dst + dstOff with `copy`; checks the bytes and the guards.
template <typename Copy>
void checkCopy(Copy copy, size_t bytes, size_t srcOff, size_t dstOff) {
  std::vector<uint8_t> src(bytes + 128), dst(bytes + 256, kGuard);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  copy(dst.data() + dstOff, src.data() + srcOff, bytes);
  for (size_t i = 0; i < dst.size(); ++i) {
    const bool inside = i >= dstOff && i < dstOff + bytes;
    const uint8_t want = inside ? src[srcOff + i - dstOff] : kGuard;
    ASSERT_EQ(dst[i], want) << "byte " << i << " of a copy of " << bytes << " bytes, src +"
                            << srcOff << ", dst +" << dstOff;
  }
}

TEST(BulkCopy, MatchesMemcpyAtEverySmallSizeAndAlignment) {
  for (size_t bytes = 0; bytes <= 200; ++bytes)
    for (size_t dstOff : {0, 1, 17, 63, 64, 100})
      for (size_t srcOff : {0, 3})
        checkCopy([](void* d, const void* s, size_t n) { bulkCopy(d, s, n); }, bytes, srcOff,
                  dstOff);
}

TEST(BulkCopy, MatchesMemcpyAroundTheStreamingSizes) {
  for (size_t bytes : {kStreamCopyBytes - 1, kStreamCopyBytes, kStreamCopyBytes + 77,
                       (size_t{8} << 20) + 5}) {
    checkCopy([](void* d, const void* s, size_t n) { bulkCopy(d, s, n); }, bytes, 1, 33);
    checkCopy([](void* d, const void* s, size_t n) { bulkCopy(d, s, n); }, bytes, 0, 64);
  }
}

}  // namespace
}  // namespace zcoll
