// Reading a node peer's memory in place: the primitive under every algorithm that takes its
// peers' data with no message carrying it (coll/in_place.h: all-gather, reduce-scatter and
// all-reduce `shm_read`, hpZ's `*_shm_read` node stages, qgZ's `two_hop_shm_read`). The shape is
// mscclpp's RegisteredMemory: a rank exposes a range, its peers map it (or, where no mapping can
// exist, copy out of it one-sidedly), and a message tells the owner when they are done.
//
// Implemented by the transports that share memory with node peers, one per memory kind:
//   host    shm (transport/shm_peer_memory.h): an ordinary buffer is read with process_vm_readv
//           (one kernel copy; no mapping exists), a buffer in zcollMemAllocHost memory is mapped
//           once and read with loads (transport/peer_regions.h), windows are memfds;
//   device  cuda_ipc (transport/cuda_ipc_transport.h): memory exported as IPC handles and mapped
//           into this device's address space at init (windows) or at registration (caller
//           buffers), where the call's kernels read it (NVLink or PCIe peer access, or the same
//           GPU); nothing can be read unmapped, and nothing is mapped inside a call
//           (base/stream_holds.h).
// The communicator offers it per group and memory kind (coll/in_place.h: peerMemoryOf): only
// when every peer of the group is routed through the same implementation for that kind.
//
// The rules every implementation keeps, and every algorithm relies on:
// - Exposing describes, it moves nothing. The owner's bytes must be complete before it tells a
//   peer about them, and stay unchanged (for a range it only reads) until every peer said it is
//   done: the algorithms publish and release by messages (Stage::send and Stage::recv flush the
//   call's executor first, so a device's earlier kernels are done on both sides).
// - A mapping of a caller's buffer may outlive the call (mapped once, kept: mapping costs a
//   first-touch fault per page on the host and milliseconds on a GPU), so an implementation
//   exposes caller buffers only where a later free cannot leave a peer reading other memory:
//   host memory by (owner pid, allocation generation, count of frees); device memory only once
//   registered (zcollCommWindowRegister: collective, mapped then, outside any call, and the
//   user keeps it allocated until it is deregistered), since a mapping opened inside a call
//   could deadlock the device and CUDA leaves a freed allocation that a peer still maps
//   undefined, which zcoll cannot see.
// - Windows are zcoll's own memory, kept for the communicator's life (shm: grown on demand;
//   cuda_ipc: fixed at init, windowLimit); an owner writes its window only while no peer reads
//   it (messages order the two).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/result.h"

namespace zcoll {

// A range of a rank's memory as its peers see it. Plain old data: it travels between the ranks
// of one call, as its first rangeWireBytes(pm) bytes (the handle's unused tail stays home).
struct ExposedRange {
  uint64_t addr = 0;   // the range's first byte in the owner's process
  uint64_t bytes = 0;  // its length
  uint32_t mappable = 0;  // 1: peers map it through `handle`; 0: read() only, where it exists
  uint32_t reserved = 0;
  // The implementation's description of it (shm: shm::RegionRef or shm::WindowRef; cuda_ipc:
  // IpcHandle), opaque to everyone else.
  alignas(8) unsigned char handle[104] = {};
};
static_assert(sizeof(ExposedRange) == 128, "ExposedRange travels between ranks");

// A peer's range mapped here, valid while it lives.
struct PeerView {
  const char* at = nullptr;  // the range's first byte here; nullptr: read it with read()
  char* writable = nullptr;  // the same bytes to write into, when mapped writable
  std::shared_ptr<const void> hold;  // keeps the mapping (null where the implementation does)
};

class PeerMemory {
 public:
  virtual ~PeerMemory() = default;

  // Whether expose() lets peers reach a caller's buffer (map or read it). False where only
  // zcoll's windows can be shared (cuda_ipc): the algorithms
  // then move caller buffers by messages.
  virtual bool exposesCallerBuffers() const = 0;
  // Whether a range that is not mappable can still be copied out with read() (host: CMA).
  virtual bool readsUnmapped() const = 0;
  // How many bytes of ExposedRange::handle its descriptions use (what travels).
  virtual size_t handleBytes() const = 0;
  // Whether every two of these comm ranks (this one among them) reach each other through this
  // implementation, as each of them sees it: an algorithm decides on reading in place from this,
  // so the answer must be the same on every rank of the group (shm: a node's ranks that share
  // memory form one clique; cuda_ipc: the pairs traded at connect).
  virtual bool pairsConnected(const std::vector<int>& ranks) const = 0;
  // The most bytes ownWindow may be asked for when these ranks (this one among them) read each
  // other's windows: the same on every rank of the group. SIZE_MAX where windows grow on demand.
  virtual size_t windowLimit(const std::vector<int>& ranks) const = 0;

  // Describes [ptr, ptr + bytes) of this process for its peers. Never fails for memory of its
  // kind: a range it cannot offer for mapping comes out with mappable = 0.
  virtual Result expose(const void* ptr, size_t bytes, ExposedRange* out) = 0;
  // Peer `peer`'s range r, as it exposed it: view->at set when mapped (view->writable too when
  // `writable` and the range allows it), nullptr when it can only be read with read().
  virtual Result map(int peer, const ExposedRange& r, bool writable, PeerView* view) = 0;
  // One-sided: `bytes` from byte `offset` of peer `peer`'s range r into dst (host memory of
  // this process). zcollUnsupported where readsUnmapped() is false.
  virtual Result read(int peer, const ExposedRange& r, size_t offset, void* dst,
                      size_t bytes) = 0;

  // ---- Registered caller memory (zcollCommWindowRegister), for kinds whose peers can only
  // read caller memory mapped beforehand (cuda_ipc: exposesCallerBuffers() says whether any is).
  // Registration `id` is made by every rank of the comm in the same order, outside any call
  // and while no stream is held (mapping synchronizes the device). ----
  // Whether caller memory of this kind is exposed only once registered.
  virtual bool registersCallerMemory() const { return false; }
  // Exports [ptr, ptr + bytes) as registration `id`: *out describes it for the peers (its
  // handle in full, whatever handleBytes says; it travels once, at registration).
  virtual Result registerOwn(uint32_t id, void* ptr, size_t bytes, ExposedRange* out);
  // Maps peer `peer`'s registration `id` (what its registerOwn described); a peer this
  // implementation does not connect to is skipped.
  virtual Result registerPeer(int peer, uint32_t id, const ExposedRange& r);
  // Forgets registration `id`: this rank's, and its mappings of the peers' (closed).
  virtual Result deregister(uint32_t id);

  // This rank's window, grown to at least `bytes`: *base its first byte here (its contents are
  // kept when it grows; its address may change), *ref what peers map it with.
  virtual Result ownWindow(size_t bytes, char** base, ExposedRange* ref) = 0;
  // Peer `peer`'s window from the reference it sent: *base its first byte here (read-only).
  virtual Result mapWindow(int peer, const ExposedRange& ref, const char** base) = 0;
};

inline Result PeerMemory::registerOwn(uint32_t, void*, size_t, ExposedRange*) {
  return fail(zcollUnsupported, "this memory kind registers no caller memory");
}
inline Result PeerMemory::registerPeer(int, uint32_t, const ExposedRange&) {
  return fail(zcollUnsupported, "this memory kind registers no caller memory");
}
inline Result PeerMemory::deregister(uint32_t) {
  return fail(zcollUnsupported, "this memory kind registers no caller memory");
}

// The bytes of a range of `pm` that travel: the fixed fields and the handle's used part.
inline size_t rangeWireBytes(const PeerMemory& pm) {
  return offsetof(ExposedRange, handle) + pm.handleBytes();
}

}  // namespace zcoll
