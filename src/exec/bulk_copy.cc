#include "exec/bulk_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace zcoll {

#if defined(__x86_64__)
namespace {

// Streams whole 64-byte lines from src to a line-aligned dst; returns the bytes copied.
size_t streamLines(char* dst, const char* src, size_t bytes) {
  const size_t lines = bytes / 64;
  for (size_t i = 0; i < lines; ++i, dst += 64, src += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 48), d);
  }
  return lines * 64;
}

}  // namespace

void bulkCopy(void* dst, const void* src, size_t bytes) {
  if (bytes < kStreamCopyBytes) {
    if (bytes != 0) std::memcpy(dst, src, bytes);
    return;
  }
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const size_t head = (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64;  // to a cache line
  std::memcpy(d, s, head);
  const size_t streamed = streamLines(d + head, s + head, bytes - head);
  std::memcpy(d + head + streamed, s + head + streamed, bytes - head - streamed);
  _mm_sfence();
}

#else

void bulkCopy(void* dst, const void* src, size_t bytes) {
  if (bytes != 0) std::memcpy(dst, src, bytes);
}

#endif

}  // namespace zcoll
