// Internal interface of the ZeRO++ all-gathers: qwZ (qwz_allgather.cc) and hpZ
// (hpz_allgather.cc). The public entry points (api/zeropp_allgather.cc) check the
// arguments, then call these. Semantics and byte counts: docs/ZEROPP.md.
#pragma once

#include <cstddef>
#include <functional>

#include "coll/coll.h"
#include "quant/quant.h"

namespace zcoll {

// Quantized ring all-gather over `g`, the building block of qwZ and of hpZ's stage A.
// This rank quantizes `own` (count elements) with p into slot g.me of `wire` (g.size() slots
// of quantizedBytes(count, p) bytes), the packed slots travel round the ring, and slot i is
// dequantized to out + outElem[i] elements while the next slot is in flight. `own` is read
// before anything is written, so it may be one of the output slots (in place). The owner's
// slot is dequantized too: every member writes the same bits for every slot. `landed`, when
// given, runs after each slot i is dequantized (own slot first, while the ring's first step is
// in flight), so a caller can pass it on at once.
// `own` NULL: slot g.me of `wire` holds this rank's codes already (quantized by the caller,
// e.g. with error feedback).
using SlotLanded = std::function<Result(int slot)>;
Result quantizedRingAllGather(const Stage& st, const Group& g, const void* own, size_t count,
                              zcollDataType_t dtype, const quant::QuantParams& p, void* wire,
                              void* out, const size_t* outElem, const SlotLanded& landed = {});

// The ring qwZ runs on: ranks node by node (nodes in order, ranks in node order), so the
// ring crosses between nodes exactly `nodes` times (once when there is one node: never).
Group nodeOrderedRing(const zcollComm* comm);

// qwZ: recv[r*count ..] = dequant(quant(shard of rank r)) on every rank.
Result qwzAllGather(zcollComm* comm, Executor& exec, const void* send, void* recv, size_t count,
                    zcollDataType_t dtype, const quant::QuantParams& p);

// hpZ backward: stage B only (intra-node all-gather of the secondary shards).
Result hpzAllGatherFromSecondary(zcollComm* comm, Executor& exec, const void* secondary,
                                 void* recv, size_t count, zcollDataType_t dtype, bool shmRead);

}  // namespace zcoll
