// Copies of large host blocks that bypass the cache on their stores.
//
// A collective's output (a gathered block, a peer's chunk) is written once and not read again
// by zcoll. Above the caches an ordinary copy reads every destination line before writing it
// (read-for-ownership): on the 2-core EPYC this project measures on, memcpy moves 8-32 MiB at
// 6.5 GB/s while streaming (non-temporal) stores move it at 10.5 GB/s, and glibc only streams
// above about 3/4 of the last-level cache. bulkCopy streams from kStreamCopyBytes up
// (perf/RESULTS.md, "registered buffers"); smaller copies stay in cache for whoever reads them.
#pragma once

#include <cstddef>

namespace zcoll {

// Copies below this many bytes use memcpy: their destination is likely read soon, from cache.
constexpr size_t kStreamCopyBytes = size_t{1} << 20;

// memcpy(dst, src, bytes) for non-overlapping blocks; from kStreamCopyBytes up with streaming
// stores (x86-64), followed by a store fence so the bytes are visible before any later signal.
void bulkCopy(void* dst, const void* src, size_t bytes);

}  // namespace zcoll
