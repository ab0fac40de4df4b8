// What the algorithms that read their peers in place share (allgather_shm_read.cc,
// reducescatter_shm_read.cc, allreduce_shm_read.cc, hpz_allgather.cc, qgz_reducescatter.cc):
// every peer must be on shm (everyPeerOnShm, coll.h). The caller's buffers are published
// (PeerBuffers): an ordinary buffer by address, read with the one-sided ShmTransport::read (a
// copy by the kernel); a buffer in memory from zcollMemAllocHost (transport/host_memory.h)
// also by its region, which the readers map once (transport/peer_regions.h) and read with plain
// loads. zcoll's
// own intermediate data lives in windows (transport/shm_window.h) that peers map and read with
// no copy (shareWindows). Either is released with a token to and from every peer
// (tradeTokens): after it, no peer reads it.
// A failed read or mapping fails the algorithm, and runAlgorithm then breaks the comm and tells
// the peers (they may be waiting for this rank's token).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "coll/coll.h"
#include "transport/host_memory.h"
#include "transport/peer_regions.h"
#include "transport/shm_window.h"

namespace zcoll {

// The buffers the members of a group published for one call, readable here.
class PeerBuffers {
 public:
  // What each member sends each other member (a 32-byte message).
  struct Published {
    uint64_t addr = 0;
    uint64_t bytes = 0;
    shm::RegionRef region;  // fd < 0: ordinary memory
  };

  // Sends this rank's `bytes` at `mine` to every other member of g (as step 0 of the stage)
  // and takes theirs; maps the ones in registered memory.
  Result publish(const Stage& st, const Group& g, const void* mine, size_t bytes);
  // The same for buffers this rank may write into (outputs): registered ones mapped writable.
  Result publishWritable(const Stage& st, const Group& g, void* mine, size_t bytes);
  // Member i's buffer mapped here (mine for this rank), or nullptr: read it with read().
  const char* view(int i) const { return view_[i]; }
  // After publishWritable: member i's buffer to write into (mine for this rank), or nullptr
  // when it is not registered. Every member sees the same set of nullptrs.
  char* writable(int i) const { return writable_[i]; }
  // Copies `bytes` from byte `offset` of member i's buffer to dst.
  Result read(int i, size_t offset, void* dst, size_t bytes) const;

 private:
  zcollComm* comm_ = nullptr;
  std::vector<int> ranks_;
  std::vector<Published> published_;
  Result publishAs(const Stage& st, const Group& g, const void* mine, size_t bytes, bool write);

  std::vector<const char*> view_;
  std::vector<char*> writable_;
  std::vector<std::shared_ptr<const shm::PeerMapping>> maps_;  // held for the call
};

// A one-byte token to and from every other member of g, as step `step` of the stage.
Result tradeTokens(const Stage& st, const Group& g, uint32_t step);

// Sends `mine` (this rank's window, at `myBase` here) to every member of g and maps theirs:
// (*base)[i] = the start of member i's window in this process. As step `step` of the stage.
Result shareWindows(const Stage& st, const Group& g, const shm::WindowRef& mine, const char* myBase,
                    uint32_t step, std::vector<const char*>* base);

// out[0..m) = op over members 0..W-1 of the world (in that order) of the m elements at byte
// `offset` of every member's published input, a cache-sized piece at a time; each piece is
// also copied, while in cache, to the same place of every buffer of `copies`.
Result readAndReduce(zcollComm* comm, Executor& ex, const PeerBuffers& in, size_t offset,
                     size_t m, zcollDataType_t dtype, zcollRedOp_t op, char* out,
                     const std::vector<char*>& copies = {});

// Counts `bytes` read from every other member of g and as many read by each from this rank.
void countPeerReads(zcollComm* comm, const Group& g, size_t bytes);

}  // namespace zcoll
