// The stream-triggered collectives (trigger/ring.h): all-gather, reduce-scatter and all-reduce
// on device buffers of a node whose ranks each have their own device (or process). Each
// enqueues its whole schedule on `ex` (the caller's stream) and returns: no progress thread,
// no host wait. They compose (the quantized all-reduce is qgZ's steps, a gather and an exact
// all-reduce); the caller notes the stream on the ring once, after the call's last step
// (api/launch.cc: TriggerRing::noteStream). Arguments as coll/coll.h's CollArgs (validated by the entry point).
#pragma once

#include "coll/coll.h"
#include "trigger/reduce_order.h"
#include "trigger/ring.h"

namespace zcoll {

// One gather step per slot's worth of each rank's bytes.
Result triggeredAllGather(TriggerRing& ring, Executor& ex, const CollArgs& a);
// One reduce step per piece of each rank's chunk (trigger/steps.h: reducePieceElems), summed in
// `order` (trigger/reduce_order.h: the host path's for the call).
Result triggeredReduceScatter(TriggerRing& ring, Executor& ex, const CollArgs& a,
                              const ReduceOrder& order);
// qwZ (zcollQuantizedAllGather, a.quant->inter): quantized gather steps of whole blocks; the
// bits of coll/qwz_allgather.cc.
Result triggeredQuantizedAllGather(TriggerRing& ring, Executor& ex, const CollArgs& a);
// The gather qwZ and the quantized all-reduce end with: this rank's `count` elements at `mine`
// quantized once with `p` (element k of rank r numbered indexBase + r * count + k for
// stochastic rounding) and every rank's dequantized codes, the owner's too, to
// recv + r * count elements; with `residual` (count fp32) the owner keeps error feedback.
Result triggeredQuantizedGather(TriggerRing& ring, Executor& ex, const char* mine, size_t count,
                                zcollDataType_t dtype, const quant::QuantParams& p,
                                uint64_t indexBase, char* recv, float* residual);
// qgZ inside one node (zcollQuantizedReduceScatter, a.quant->intra): quantized reduce steps of
// whole blocks; the bits of coll/qgz_reducescatter.cc's two_hop algorithms on one node.
Result triggeredQuantizedReduceScatter(TriggerRing& ring, Executor& ex, const CollArgs& a);
// hpZ's forward call (zcollAllGatherHier): the shards gathered (qwZ's steps when a.quant is
// set; across nodes by rail, then node) and this rank's secondary shard (a.secondary, unless
// NULL) the gathered shards of its rail in node order: the bits of coll/hpz_allgather.cc.
Result triggeredAllGatherHier(TriggerRing& ring, Executor& ex, const CollArgs& a);
// hpZ's backward call (zcollAllGatherFromSecondary, a.send the secondary): the node's
// secondaries gathered inside the node (on one node, the shards).
Result triggeredAllGatherFromSecondary(TriggerRing& ring, Executor& ex, const CollArgs& a);
// zcollQuantizedAllReduce inside one node, coll/quantized_allreduce.cc's qgz_then_qwz bits:
// qgZ's steps on the W chunks (a.firstResidual: error feedback), the gather of the reduced
// chunks (a.ownerResidual), the tail of count % W elements all-reduced exactly in `tailOrder`
// (the host's order for the tail's bytes).
Result triggeredQuantizedAllReduce(TriggerRing& ring, Executor& ex, const CollArgs& a,
                                   const ReduceOrder& tailOrder);
// Reduce-scatter of the host's balanced chunks in `order` (the host path's for the call), each
// reduce step followed by the gather step of its reduced pieces: every rank ends with the
// owners' bits.
Result triggeredAllReduce(TriggerRing& ring, Executor& ex, const CollArgs& a,
                          const ReduceOrder& order);

}  // namespace zcoll
