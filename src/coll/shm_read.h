// What the algorithms that read their peers in place share (reducescatter_shm_read.cc,
// allreduce_shm_read.cc): every peer must be on shm (everyPeerOnShm, coll.h). Buffers are
// published by address (tradeAddresses), read with one-sided ShmTransport::read, and released
// with a token to and from every peer (tradeTokens): after it, no peer reads them any more.
#pragma once

#include <cstdint>
#include <vector>

#include "coll/coll.h"

namespace zcoll {

// (*addr)[p] = the address rank p published (`mine` for this rank).
Result tradeAddresses(const Stage& st, zcollComm* comm, const void* mine,
                      std::vector<uint64_t>* addr);

// A one-byte token to and from every peer, as step `step` of the stage.
Result tradeTokens(const Stage& st, zcollComm* comm, uint32_t step);

// out[0..m) = op over ranks 0..W-1 (in that order) of the m elements at byte `offset` in every
// rank's input (`in` here, at addr[p] in peer p), read a cache-sized piece at a time.
Result readAndReduce(zcollComm* comm, Executor& ex, const std::vector<uint64_t>& addr,
                     const char* in, size_t offset, size_t m, zcollDataType_t dtype,
                     zcollRedOp_t op, char* out);

// One-sided read of `bytes` at `addr` in peer `peer`; a failure breaks the comm and tells the
// peers (they may be waiting for this rank's token).
Result readPeer(zcollComm* comm, int peer, uint64_t addr, void* dst, size_t bytes);

// Counts `bytes` read from every peer and as many read by every peer from this rank.
void countPeerReads(zcollComm* comm, size_t bytes);

}  // namespace zcoll
