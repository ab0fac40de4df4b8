// What the algorithms that read their peers in place share (reducescatter_shm_read.cc,
// allreduce_shm_read.cc, qgz_reducescatter.cc): every peer must be on shm (everyPeerOnShm,
// coll.h). The caller's buffers are published by address (tradeAddresses) and read with the
// one-sided ShmTransport::read (a copy by the kernel); zcoll's own intermediate data lives in
// windows (transport/shm_window.h) that peers map and read with no copy (shareWindows). Either
// is released with a token to and from every peer (tradeTokens): after it, no peer reads it.
// A failed read or mapping fails the algorithm, and runAlgorithm then breaks the comm and tells
// the peers (they may be waiting for this rank's token).
#pragma once

#include <cstdint>
#include <vector>

#include "coll/coll.h"
#include "transport/shm_window.h"

namespace zcoll {

// (*addr)[p] = the address member p of g published (`mine` for this rank).
Result tradeAddresses(const Stage& st, const Group& g, const void* mine,
                      std::vector<uint64_t>* addr);

// A one-byte token to and from every other member of g, as step `step` of the stage.
Result tradeTokens(const Stage& st, const Group& g, uint32_t step);

// Sends `mine` (this rank's window, at `myBase` here) to every member of g and maps theirs:
// (*base)[i] = the start of member i's window in this process. As step `step` of the stage.
Result shareWindows(const Stage& st, const Group& g, const shm::WindowRef& mine, const char* myBase,
                    uint32_t step, std::vector<const char*>* base);

// out[0..m) = op over ranks 0..W-1 (in that order) of the m elements at byte `offset` in every
// rank's input (`in` here, at addr[p] in peer p), read a cache-sized piece at a time.
Result readAndReduce(zcollComm* comm, Executor& ex, const std::vector<uint64_t>& addr,
                     const char* in, size_t offset, size_t m, zcollDataType_t dtype,
                     zcollRedOp_t op, char* out);

// Counts `bytes` read from every other member of g and as many read by each from this rank.
void countPeerReads(zcollComm* comm, const Group& g, size_t bytes);

}  // namespace zcoll
