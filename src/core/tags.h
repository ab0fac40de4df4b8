// 64-bit message tags. All ranks issue collectives in the same order, so a per-communicator
// sequence number identifies the operation; the source rank lets exact-match receives pick
// the sender; the step distinguishes the messages of one operation.
//
//   bit 63      kind: 0 collective, 1 point-to-point
//   bits 62-40  sequence (23 bits, wraps; operations complete in order, so no aliasing)
//   bits 39-16  source rank (24 bits)
//   bits 15-0   step within the operation (point-to-point: 0; 0xffff: peer notices)
#pragma once

#include <cstdint>

namespace zcoll {

constexpr int kMaxRanks = 1 << 24;
constexpr uint32_t kSeqMask = (1u << 23) - 1;

inline uint64_t makeCollTag(uint32_t seq, int src, uint32_t step) {
  return (uint64_t{seq & kSeqMask} << 40) | (uint64_t(uint32_t(src)) << 16) | (step & 0xffffu);
}

inline uint64_t makeP2pTag(uint32_t pairSeq, int src) {
  return (uint64_t{1} << 63) | (uint64_t{pairSeq & kSeqMask} << 40) |
         (uint64_t(uint32_t(src)) << 16);
}

// Close/failure notices (core/peer_notice.h): point-to-point kind with step 0xffff, which
// point-to-point messages (always step 0) never use.
inline uint64_t makeNoticeTag(int src) {
  return (uint64_t{1} << 63) | (uint64_t(uint32_t(src)) << 16) | 0xffffu;
}

}  // namespace zcoll
