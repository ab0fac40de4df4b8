// What the algorithms that read their peers in place share (allgather_shm_read.cc,
// reducescatter_shm_read.cc, allreduce_shm_read.cc, hpz_allgather.cc, qgz_reducescatter.cc),
// over the PeerMemory interface (transport/peer_memory.h), so each runs on host buffers over
// shm and on device buffers over cuda_ipc alike. Every peer of the group must be reached through
// one PeerMemory for the call's memory kind (peerMemoryOf); the algorithm falls back to its
// message-based twin otherwise, decided alike on every rank.
//
// A call publishes its buffers (PeerBuffers: each member exposes its range and trades the
// description with the others), reads the peers' ranges (mapped, through the call's executor:
// loads on the host, the call's kernels on a device; or, where the host offers no mapping, a
// one-sided copy), and releases them with a token to and from every peer: after it, no peer
// reads them (and, for the outputs written to, none writes). zcoll's own intermediate data lives
// in windows that peers map (shareWindows). A failed read or mapping fails the algorithm, and
// runAlgorithm then breaks the comm and tells the peers (they may be waiting for this rank's
// token).
#pragma once

#include <cstdint>
#include <vector>

#include "coll/coll.h"
#include "transport/peer_memory.h"

namespace zcoll {

// The PeerMemory through which this rank reaches every other member of g for memory of `kind`
// (host: the host routes, all shm; device: the device routes, all cuda_ipc), and through which
// every two members reach each other (so every member gets the same answer), or null.
PeerMemory* peerMemoryOf(const zcollComm* comm, const Group& g, MemKind kind);
// Whether the call's caller buffers (of exec's kind) can be read in place from every other
// member of g: peerMemoryOf is set and exposes caller buffers.
bool readsCallerBuffersInPlace(const zcollComm* comm, const Group& g, const Executor& exec);

// The buffers the members of a group published for one call, readable here.
class PeerBuffers {
 public:
  // Exposes this rank's `bytes` at `mine` to every other member of g and takes theirs (as step 0
  // of the stage); maps the ones that can be mapped. The group must have peer memory for the
  // stage's kind (peerMemoryOf).
  Result publish(const Stage& st, const Group& g, const void* mine, size_t bytes);
  // The same for buffers this rank may write into (outputs): mapped writable where they can be.
  Result publishWritable(const Stage& st, const Group& g, void* mine, size_t bytes);
  // Whether every member's buffer can be read here (mapped, or read unmapped): alike on every
  // rank (each saw every member's description). When false, nothing may be read: fall back.
  bool readable() const { return readable_; }
  // Member i's buffer mapped here (mine for this rank), or nullptr: read it with read().
  const char* view(int i) const { return views_[i].at; }
  // After publishWritable: member i's buffer to write into (mine for this rank), or nullptr
  // when it cannot be written from here. Every member sees the same set of nullptrs.
  char* writable(int i) const { return writable_[i]; }
  // Copies `bytes` from byte `offset` of member i's buffer to dst (through the executor when
  // mapped: dst is then memory of the executor's kind; else one-sidedly, into host memory).
  Result read(Executor& ex, int i, size_t offset, void* dst, size_t bytes) const;
  // The token to and from every member, as step `step` of the stage: after it, no member reads
  // (or writes) any buffer published with this object.
  Result release(const Stage& st, uint32_t step) const;

 private:
  Result publishAs(const Stage& st, const Group& g, const void* mine, size_t bytes, bool write);

  PeerMemory* memory_ = nullptr;
  Group group_;
  std::vector<ExposedRange> ranges_;
  std::vector<PeerView> views_;  // held for the call
  std::vector<char*> writable_;
  bool readable_ = false;
};

// Sends the first `bytes` of this member's item (items + g.me * stride) to every other member
// of g and receives member p's into items + p * stride: host memory, as control messages.
Result tradeItems(const Stage& st, const Group& g, uint32_t step, void* items, size_t stride,
                  size_t bytes);

// The bytes of a release token on the wire (docs/ZEROPP.md counts them).
constexpr size_t kTokenBytes = 1;

// A kTokenBytes token to and from every other member of g, as step `step` of the stage.
Result tradeTokens(const Stage& st, const Group& g, uint32_t step);

// This rank's window of `pm`, grown to `bytes`, shared with every member of g (as step `step`
// of the stage): (*base)[i] = the start of member i's window in this process (this rank's own
// for g.me). Members must have written what they share before, and must release it
// (tradeTokens) before writing it again.
Result shareWindows(const Stage& st, const Group& g, PeerMemory& pm, const ExposedRange& mine,
                    const char* myBase, uint32_t step, std::vector<const char*>* base);

// out[0..m) = op over members 0..W-1 of the world (in that order) of the m elements at byte
// `offset` of every member's published input, a cache-sized piece at a time; each piece is
// also copied, while in cache, to the same place of every buffer of `copies`. Where the output
// can hold the partial results with the accumulator's bits (sum/prod/max/min of 32/64-bit types,
// or of two 16-bit inputs, every input mapped) a piece is reduced straight into it, one pass per
// input; otherwise through an accumulator in scratch (16-bit types at 3+ ranks, avg, unmapped
// inputs).
Result readAndReduce(zcollComm* comm, Executor& ex, const PeerBuffers& in, size_t offset,
                     size_t m, zcollDataType_t dtype, zcollRedOp_t op, char* out,
                     const std::vector<char*>& copies = {});

// Counts `bytes` read from every other member of g and as many read by each from this rank.
void countPeerReads(zcollComm* comm, const Group& g, size_t bytes);

}  // namespace zcoll
