// The two steps every stream-triggered collective is made of (trigger/ring.h), each enqueued
// whole on the executor's stream: a gather step (every rank's piece to every rank) and a reduce
// step (every rank's piece for rank d, reduced in rank order, to rank d).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "quant/quant.h"
#include "trigger/reduce_order.h"
#include "trigger/ring.h"

namespace zcoll {

// Rank p's piece of `bytes[p]` bytes lands at out[p] on every rank (this rank's own piece
// excluded: the caller places it). `mine` (bytes[me] bytes) is this rank's piece. Across nodes
// the proxy sends it to every rank of other nodes and receives theirs (ProxyStep::gather).
Result gatherStep(TriggerRing& ring, Executor& ex, const char* mine,
                  const std::vector<size_t>& bytes, const std::vector<char*>& out);

// One reduce step: for every rank d, toRank[d] holds this rank's `count[d]` elements for d
// (toRank[me]: its own contribution). On return (in stream order) `out` holds the count[me]
// elements op-reduced over all ranks in `order` (trigger/reduce_order.h: the host path's
// algorithm's order and roundings, this rank the owner of the chunk), so the host's bits.
// Across nodes the proxy sends each rank of another node only its part (ProxyStep::parts).
Result reduceStep(TriggerRing& ring, Executor& ex, zcollDataType_t dtype, zcollRedOp_t op,
                  const ReduceOrder& order, const std::vector<const char*>& toRank,
                  const std::vector<size_t>& count, char* out);

// One gather step across equal nodes by rail, then node (the shape of
// coll/allgather_hierarchical.cc, so each piece enters each other node once): this rank's piece
// placed (`place`) in part n of its slot, n its node, that part sent by the proxy to its rail
// peers only (its local index on the other nodes) and theirs received, each copied into its
// node's part of the slot; then every node peer's slot read. `take(r, from)` reads rank r's
// piece (bytes[r] bytes, every rank's, this one's too) from a part. Parts are `partBytes` apart
// (at most slotBytes() / nodes()).
Result railGatherStep(TriggerRing& ring, Executor& ex, size_t partBytes,
                      const std::vector<size_t>& bytes, const std::function<Result(char*)>& place,
                      const std::function<Result(int, const char*)>& take);

// One gather step inside each node of a ring across equal nodes (hpZ's backward stage): this
// rank places every part of its slot itself (`place(k, part)` for each node k: the pieces of
// its rail it holds), then every node peer's slot is read as in railGatherStep. Nothing crosses
// nodes.
Result nodeGatherStep(TriggerRing& ring, Executor& ex, size_t partBytes,
                      const std::vector<size_t>& bytes,
                      const std::function<Result(int, char*)>& place,
                      const std::function<Result(int, const char*)>& take);

// One gather step of quantized pieces (qwZ, coll/qwz_allgather.cc): this rank's `elems`
// elements at `mine` quantized with `p` into its slot, then every rank's piece, its own too,
// dequantized from its slot to out[p], so every rank holds the same bits. Every rank's piece has
// `elems` elements; its codes must fit a slot (quantizedPieceElems). With `residual` (`elems`
// fp32), the quantization keeps error feedback (coll/feedback.h), in the ring's accumulator.
Result quantizedGatherStep(TriggerRing& ring, Executor& ex, const char* mine,
                           zcollDataType_t dtype, size_t elems, const quant::QuantParams& p,
                           const std::vector<char*>& out, float* residual = nullptr);

// One reduce step of quantized pieces (qgZ inside a node, coll/qgz_reducescatter.cc with one
// node): for every rank d, toRank[d] (`elems` elements) quantized with params[d] into part d of
// this rank's slot; then the parts every rank made for this one, its own too, dequantized and
// summed in fp32 in rank order, times `scale`, rounded once to `out`. Every part's codes must fit
// (quantizedPieceElems with `parts` = ranks). With `residuals` (one per rank d, `elems` fp32
// each), every quantization keeps error feedback, in the ring's accumulator.
Result quantizedReduceStep(TriggerRing& ring, Executor& ex, zcollDataType_t dtype, size_t elems,
                           const std::vector<const char*>& toRank,
                           const std::vector<quant::QuantParams>& params, float scale, char* out,
                           const std::vector<float*>& residuals = {});

// The most elements (whole blocks of `p`) whose codes, `parts` times, fit a slot of `ring`, and
// with `feedback` whose fp32 values fit its accumulator; 0 when none do.
size_t quantizedPieceElems(const TriggerRing& ring, const quant::QuantParams& p, int parts = 1,
                           bool feedback = false);
// The most elements (whole blocks of `p`) whose codes fit `room` bytes; 0 when none do.
size_t quantizedElemsIn(size_t room, const quant::QuantParams& p);

// A rail gather step's part of a slot: one per node, 64-byte aligned.
size_t railPartBytes(const TriggerRing& ring);

// The most elements of `dtype` a reduce step in `order` takes per rank on `ring` (a multiple
// of 64): its slot holds one part per rank, its accumulator the buffers `order` needs.
size_t reducePieceElems(const TriggerRing& ring, zcollDataType_t dtype, const ReduceOrder& order);

}  // namespace zcoll
