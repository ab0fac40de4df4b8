// The control bytes that docs/ZEROPP.md's byte formulas add for the algorithms that read their
// peers in place, derived from the structures the code sends (so a test comparing them with
// zcollCommGetStats, or with the page's numbers, catches a drift of either):
//   a published buffer or window reference: an ExposedRange's fixed fields and the used part of
//   its handle (transport/peer_memory.h rangeWireBytes): shm's on the host, cuda_ipc's on a
//   device;
//   the release token: coll/in_place.h kTokenBytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coll/in_place.h"
#include "transport/cuda_ipc_transport.h"
#include "transport/peer_memory.h"
#include "transport/shm_peer_memory.h"

namespace zcoll::test {

constexpr uint64_t kRangeFixedBytes = offsetof(zcoll::ExposedRange, handle);
constexpr uint64_t kHostRangeBytes = kRangeFixedBytes + zcoll::ShmPeerMemory::kHandleBytes;
constexpr uint64_t kDeviceRangeBytes = kRangeFixedBytes + zcoll::CudaIpcPeerMemory::kHandleBytes;
constexpr uint64_t kTokenBytes = zcoll::kTokenBytes;
// hpZ's stage B read in place, per local peer: the published secondary and the release token.
constexpr uint64_t kHpzHostReadBytes = kHostRangeBytes + kTokenBytes;
constexpr uint64_t kHpzDeviceReadBytes = kDeviceRangeBytes + kTokenBytes;

}  // namespace zcoll::test
