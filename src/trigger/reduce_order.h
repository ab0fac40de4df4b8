// The order and roundings in which the host path reduces a call's elements, so that a
// stream-triggered reduction gives its bits (zcoll.h: "bit-identical to the synchronous path's
// on the same buffers"; tests/trigger_ring_test.cc checks it with values whose sums depend on
// the order). The
// host picks its algorithm by size and layout (coll/registry.cc, ZCOLL_ALGO_*), and each sums
// in its own order:
//   rank order  direct: every rank's piece 0..W-1, in the accumulator type (fp32 for 16-bit
//               floats), rounded once (shm_read too, but on device buffers it reads in place
//               only registered windows, which a rank cannot tell of its peers' buffers at call
//               time: with registrations the call runs synchronously; without, shm_read runs
//               the ring, and so does the triggered call);
//   ring        ring (and ring all-reduce's reduce-scatter, on balanced chunks): chunk c summed
//               from rank c+1 around to c, in the accumulator type rounded once, or with
//               ZCOLL_REDUCE_PARTIALS=dtype for 16-bit floats rounded at every hop;
//   tree        recursive doubling: the first 2R ranks folded in pairs (W = P + R, P a power of
//               two), then a balanced tree over the P core values, in the accumulator type,
//               rounded once.
// A triggered reduce step has every rank's piece at once, so it can sum them in any of these
// orders (trigger/steps.h: reduceStep). An algorithm it cannot reproduce (hierarchical, forced
// by ZCOLL_ALGO_*; shm_read with registered windows) leaves the call to run synchronously.
#pragma once

#include <cstddef>

#include "coll/coll.h"

namespace zcoll {

struct ReduceOrder {
  enum class Kind { kRankOrder, kRing, kTree };
  Kind kind = Kind::kRankOrder;
  bool partialsInDtype = false;  // kRing: every hop rounds to the data type
};

// The order of the algorithm the host path picks for a `kind` call (kReduceScatter or
// kAllReduce) of `bytesPerRank` on device buffers of `comm`; false when a triggered step cannot
// reproduce it.
bool hostReduceOrder(const zcollComm* comm, CollKind kind, size_t bytesPerRank,
                     zcollDataType_t dtype, ReduceOrder* out);

// Accumulator buffers (each of a piece's elements in the accumulator type) that summing in
// `order` over `n` ranks needs at once: 1, or for a tree one per level.
int accBuffersFor(const ReduceOrder& order, int n);

}  // namespace zcoll
