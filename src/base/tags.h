// 64-bit message tags. All ranks issue collectives in the same order, so a per-communicator
// sequence number identifies the operation; the source rank lets exact-match receives pick
// the sender; the step distinguishes the messages of one operation.
//
//   bit 63      kind: 0 collective, 1 point-to-point
//   bit 62      control: the cuda_ipc transport's descriptors (the rendezvous of a device
//               message, so a host receive never matches one), acknowledgements, init probe
//   bit 61      with control: an acknowledgement
//   bits 60-40  sequence (21 bits, wraps; operations complete in order, so no aliasing)
//   bits 39-16  source rank (24 bits; in an acknowledgement, the rank that acknowledges)
//   bits 15-0   step within the operation (point-to-point: 0; 0xffff, 0xfffb: peer notices;
//               0xfffc-0xfffd: a shrink's exchange; 0xfff7-0xfffa: a grow's; with the
//               control bit: 0xfffe a transport's exchange at init, 0xfffa its close)
#pragma once

#include <cstdint>

namespace zcoll {

constexpr int kMaxRanks = 1 << 24;
constexpr uint32_t kSeqMask = (1u << 21) - 1;
constexpr uint64_t kControlBit = uint64_t{1} << 62;
constexpr uint64_t kAckBit = uint64_t{1} << 61;
constexpr uint64_t kSourceMask = uint64_t{0xffffff} << 16;

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

// "My communicator is gone" (core/peer_notice.h sendGoneNotices), after a failure notice: the
// same kind, step 0xfffb.
inline uint64_t makeGoneTag(int src) {
  return (uint64_t{1} << 63) | (uint64_t(uint32_t(src)) << 16) | 0xfffbu;
}

// A shrink's exchange between the ranks that stay (core/shrink.cc): point-to-point kind, the
// parent's shrink attempt in the sequence bits, step kShrinkRecordStep or kShrinkAddressStep,
// which point-to-point messages (step 0) and notices (0xffff) never use.
constexpr uint32_t kShrinkRecordStep = 0xfffd;
constexpr uint32_t kShrinkAddressStep = 0xfffc;
inline uint64_t makeShrinkTag(uint32_t attempt, int src, uint32_t step) {
  return (uint64_t{1} << 63) | (uint64_t{attempt & kSeqMask} << 40) |
         (uint64_t(uint32_t(src)) << 16) | (step & 0xffffu);
}

// A grow's exchange between the members of the comm it grows (core/grow.cc): as a shrink's,
// with the comm's grow attempt count and steps of its own.
constexpr uint32_t kGrowRecordStep = 0xfffa;
constexpr uint32_t kGrowAddressStep = 0xfff9;
constexpr uint32_t kGrowResultStep = 0xfff8;
constexpr uint32_t kGrowJoinersStep = 0xfff7;
inline uint64_t makeGrowTag(uint32_t attempt, int src, uint32_t step) {
  return makeShrinkTag(attempt, src, step);
}

// The cuda_ipc transport's descriptor of the device message tagged `tag` (transport/
// cuda_ipc_transport.h): a receive on host memory, posted with `tag`, never takes it.
inline uint64_t makeDescriptorTag(uint64_t tag) { return tag | kControlBit; }

// Its acknowledgement, sent back by `acker`: the sender may post several messages with one tag
// to several peers, so the acknowledging rank takes the source's place.
inline uint64_t makeAckTag(uint64_t tag, int acker) {
  return (tag & ~kSourceMask) | kControlBit | kAckBit | (uint64_t(uint32_t(acker)) << 16);
}

// What a transport's connect trades with its peers at init over the host routes (core/init.cc
// exchangeWith, ConnectArgs::exchange; cuda_ipc's probe verdicts and slot handles).
inline uint64_t makeConnectExchangeTag(int src) {
  return (uint64_t{1} << 63) | kControlBit | (uint64_t(uint32_t(src)) << 16) | 0xfffeu;
}
// What a transport trades with its peers when it closes (cuda_ipc: "I closed my mappings of your
// memory", so the exporter may free it), over the host routes, which close after it.
inline uint64_t makeTransportCloseTag(int src) {
  return (uint64_t{1} << 63) | kControlBit | (uint64_t(uint32_t(src)) << 16) | 0xfffau;
}

}  // namespace zcoll
