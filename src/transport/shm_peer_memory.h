// shm's peer memory (transport/peer_memory.h over shared host memory): the host memory of the
// node peers the shm transport connected, read in place. ShmTransport (transport/
// shm_transport.h) owns it and tells it, as it connects, which peers it reaches and their pids;
// it moves no message itself.
//
// Every caller buffer is exposed: ordinary memory is read with process_vm_readv (the peer keeps
// it unchanged until told the read is over), zcollMemAllocHost memory is mapped once and kept
// across calls (transport/peer_regions.h); an ordinary buffer's range carries its owner's count
// of frees, so a peer drops the owner's mappings that may have been freed. Windows are memfds
// (transport/shm_window.h), remapped by a peer only when they have grown.
#pragma once

#include <cstddef>
#include <vector>

#include "transport/peer_memory.h"
#include "transport/peer_regions.h"
#include "transport/shm_window.h"

namespace zcoll {

class ShmPeerMemory final : public PeerMemory {
 public:
  // The used part of a range's handle: a region or a window reference, whichever is larger
  // (the byte formulas of docs/ZEROPP.md are derived from it: tests/zeropp_doc_test.cc).
  static constexpr size_t kHandleBytes = sizeof(shm::RegionRef) > sizeof(shm::WindowRef)
                                             ? sizeof(shm::RegionRef)
                                             : sizeof(shm::WindowRef);

  // ---- The transport's connect ----
  // Forgets any earlier connect's peers: room for `nranks` comm ranks, this one `myRank`.
  void startConnect(int myRank, int nranks);
  // `peer` (process `pid`) is reached through shared memory.
  void addPeer(int peer, int pid);
  const shm::PeerRegions& peerRegions() const { return peerRegions_; }

  // ---- PeerMemory ----
  bool exposesCallerBuffers() const override { return true; }
  bool readsUnmapped() const override { return true; }
  size_t handleBytes() const override { return kHandleBytes; }
  // Every rank of a node that can share memory, as the same user, reaches every other such rank
  // (the transport's canConnect decides from what every rank published): one clique, so this
  // rank's own peers answer for the group. Windows grow on demand.
  bool pairsConnected(const std::vector<int>& ranks) const override;
  size_t windowLimit(const std::vector<int>&) const override { return SIZE_MAX; }
  Result expose(const void* ptr, size_t bytes, ExposedRange* out) override;
  Result map(int peer, const ExposedRange& r, bool writable, PeerView* view) override;
  Result read(int peer, const ExposedRange& r, size_t offset, void* dst, size_t bytes) override;
  Result ownWindow(size_t bytes, char** base, ExposedRange* ref) override;
  Result mapWindow(int peer, const ExposedRange& ref, const char** base) override;

 private:
  struct Peer {
    bool connected = false;
    int pid = -1;
    shm::PeerWindow window;  // its window, mapped here once it sent a reference
  };
  Result checkConnected(int peer) const;

  int myRank_ = -1;
  std::vector<Peer> peers_;       // by comm rank
  shm::OwnWindow window_;
  shm::PeerRegions peerRegions_;  // peers' registered memory, mapped once
};

}  // namespace zcoll
