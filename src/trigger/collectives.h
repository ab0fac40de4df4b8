// The stream-triggered collectives (trigger/ring.h): all-gather, reduce-scatter and all-reduce
// on device buffers of a node whose ranks each have their own device (or process). Each
// enqueues its whole schedule on `ex` (the caller's stream) and returns: no progress thread,
// no host wait. Arguments as coll/coll.h's CollArgs (validated by the entry point).
#pragma once

#include "coll/coll.h"
#include "trigger/ring.h"

namespace zcoll {

// One gather step per slot's worth of each rank's bytes.
Result triggeredAllGather(TriggerRing& ring, Executor& ex, const CollArgs& a);
// One reduce step per piece of each rank's chunk (trigger/steps.h: reducePieceElems).
Result triggeredReduceScatter(TriggerRing& ring, Executor& ex, const CollArgs& a);
// qwZ (zcollQuantizedAllGather, a.quant->inter): quantized gather steps of whole blocks; the
// bits of coll/qwz_allgather.cc.
Result triggeredQuantizedAllGather(TriggerRing& ring, Executor& ex, const CollArgs& a);
// qgZ inside one node (zcollQuantizedReduceScatter, a.quant->intra): quantized reduce steps of
// whole blocks; the bits of coll/qgz_reducescatter.cc's two_hop algorithms on one node.
Result triggeredQuantizedReduceScatter(TriggerRing& ring, Executor& ex, const CollArgs& a);
// Reduce-scatter of ceil(count / n)-element segments, each reduce step followed by the gather
// step of its reduced pieces: every rank ends with the owners' bits.
Result triggeredAllReduce(TriggerRing& ring, Executor& ex, const CollArgs& a);

}  // namespace zcoll
