// The shared memory of the shm transport (transport/shm_transport.h): one segment per rank and
// communicator, and what lies in it.
//
// A segment is a memfd, not a name in /dev/shm: a peer opens it with pidfd_getfd on the
// owner's pid and fd number, so nothing can be left behind however a process ends (exit, abort,
// SIGKILL), and no two jobs can collide on a name. The same permission (ptrace access to the
// peer) also allows process_vm_readv, which carries large messages in one copy; probeSharing
// checks both before the transport offers itself.
//
// Layout, for a node of L ranks (each side computes the same size from the node layout, and
// sizes the memfd itself, so no one maps a segment its owner has not sized yet):
//   Doorbell                      the owner sleeps on it; every writer rings it
//   Ring[L]        inbound[s]     messages from local rank s to the owner (s writes, owner reads)
//   RndvTable[L]   rndv[d]        the owner's large sends to local rank d (owner posts, d reads)
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/result.h"

namespace zcoll::shm {

constexpr uint32_t kSlots = 32;        // ring entries per (source, destination) pair
constexpr size_t kSlotBytes = 16384;   // one entry: a header and an eager payload
constexpr size_t kHeaderBytes = 64;
constexpr size_t kSlotPayload = kSlotBytes - kHeaderBytes;
constexpr uint32_t kMaxEagerSlots = 4;  // an eager message spans up to this many slots
constexpr size_t kEagerBytes = kMaxEagerSlots * kSlotPayload;  // larger go by rendezvous
constexpr uint32_t kRndvSlots = 64;    // large sends in flight per destination

enum MsgKind : uint32_t {
  kEager = 1,  // the payload is in this slot and the next ones (eagerSlots(bytes) in all)
  kRndv = 2,   // the slot names the sender's buffer and a rendezvous state: the receiver reads
};

// A rendezvous state, in the sender's segment. The sender posts; the receiver moves it from
// kPosted to kReading (or finds it withdrawn), reads, and marks it kDone; the sender frees it.
enum RndvState : uint32_t {
  kFree = 0,
  kPosted = 1,
  kReading = 2,
  kDone = 3,
  kWithdrawn = 4,  // the sender gave up before the receiver started: never read
};

struct alignas(64) SlotHeader {
  std::atomic<uint64_t> seq;  // slot number + 1 once the slot is filled; an eager message
                              // over several slots publishes its first slot last
  uint32_t kind;
  uint32_t rndvIndex;
  uint64_t tag;
  uint64_t bytes;
  uint64_t addr;  // kRndv: the sender's buffer, in its address space
};
static_assert(sizeof(SlotHeader) == kHeaderBytes, "slot header is one cache line");

struct Slot {
  SlotHeader h;
  unsigned char payload[kSlotPayload];
};

struct Ring {
  alignas(64) std::atomic<uint64_t> tail;  // messages the reader consumed (reader writes)
  Slot slots[kSlots];
};

struct alignas(64) RndvTable {
  std::atomic<uint32_t> state[kRndvSlots];
};

struct alignas(64) Doorbell {
  std::atomic<uint32_t> bell;      // bumped by every writer; the futex word
  std::atomic<uint32_t> sleeping;  // the owner is (about to be) asleep on `bell`
};

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared atomics must be lock-free");

size_t segmentBytes(uint32_t localRanks);

// A copy of process `pid`'s descriptor `fd` in this process (pidfd_getfd), or -1 with errno set.
int copyFd(int pid, int fd);
// One-sided: `bytes` at address `addr` of process `pid` into dst (process_vm_readv, in pieces
// of at most 2 MiB). The permission is the same as copyFd's (probeSharing checks both).
Result readProcess(int pid, uint64_t addr, void* dst, size_t bytes);

// Ring slots an eager message of `bytes` takes.
constexpr uint32_t eagerSlots(size_t bytes) {
  return bytes <= kSlotPayload ? 1 : static_cast<uint32_t>((bytes + kSlotPayload - 1) / kSlotPayload);
}

// One mapped segment: this rank's own, or a peer's.
class Segment {
 public:
  Segment() = default;
  ~Segment();
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // A new memfd of this process (not sized or mapped yet).
  static Result create(Segment* out);
  // Opens the segment that process `pid` holds as `fd`.
  static Result open(int pid, int fd, Segment* out);
  // Sizes (idempotent: owner and peers size it alike, reserving the memory so a full machine
  // fails here rather than with SIGBUS later) and maps it.
  Result map(uint32_t localRanks);

  int fd() const { return fd_; }
  bool mapped() const { return base_ != nullptr; }
  Doorbell& doorbell() const;
  Ring& inbound(int localSource) const;
  RndvTable& rndv(int localDestination) const;

 private:
  void release();

  int fd_ = -1;
  unsigned char* base_ = nullptr;
  size_t bytes_ = 0;
  uint32_t localRanks_ = 0;
};

// Wakes the owner of `d` if it sleeps (a write to its rings or rendezvous states precedes).
void ring(Doorbell& d);
// Sleeps on `d` until it rings after `seen` was read, or `timeoutMs` passes.
void sleepOn(Doorbell& d, uint32_t seen, int timeoutMs);

// Whether this process can share memory with a peer of the same user: memfd, pidfd_getfd and
// process_vm_readv all work (containers' seccomp profiles often forbid the last two). Allows
// peers to read this process when Yama restricts ptrace to descendants (PR_SET_PTRACER), as
// MPI's CMA transports do. `why` names what failed.
bool probeSharing(std::string* why);

}  // namespace zcoll::shm
