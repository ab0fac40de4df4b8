// Copies of large host blocks that bypass the cache on their stores.
//
// A collective's output (a gathered block, a peer's chunk) is written once and not read again
// by zcoll. An ordinary copy reads every destination line before writing it
// (read-for-ownership), and glibc's memcpy streams only above about 3/4 of the last-level
// cache. On the 2-core EPYC this project measures on, copying one block (all_gather_perf on one
// rank, A/B against memcpy), streaming stores (from 8 MiB with a prefetch 512 bytes ahead) are
// 1.9-2.5x faster at 4-8 MiB, 1.85x at 16-32 MiB, 1.15x at 64 MiB and 1.04-1.08x at 1-2 MiB
// (perf/LOG.md, "Registered host memory"). bulkCopy streams from kStreamCopyBytes up;
// smaller copies stay in cache for whoever reads them next.
//
// Inside a collective, 1 MiB copies are not the single-rank case: an all-gather of 1 MiB per
// rank on 2 ranks copies its own block while reading its peer's, and with the working set in
// cache the streaming stores made the call 3.6x slower on registered buffers (medians 179 vs 49
// us) and 1.5x on ordinary ones (170 vs 113 us); all-reduce at 2-8 MiB gained too (perf/
// LOG.md, "Streaming stores from 4 MiB", 2026-11-27). So streaming starts at 4 MiB.
#pragma once

#include <cstddef>

namespace zcoll {

// Copies below this many bytes use memcpy: their destination is likely read soon, from cache.
constexpr size_t kStreamCopyBytes = size_t{4} << 20;

// memcpy(dst, src, bytes) for non-overlapping blocks; from kStreamCopyBytes up with streaming
// stores (x86-64), followed by a store fence so the bytes are visible before any later signal.
void bulkCopy(void* dst, const void* src, size_t bytes);

}  // namespace zcoll
