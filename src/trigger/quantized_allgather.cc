// qwZ triggered: coll/qwz_allgather.cc's bits (each shard quantized once with its global element
// offset, every copy of it, the owner's too, dequantized from those codes), in gather steps of
// whole blocks: a piece of every shard at the same offset per step.
#include <algorithm>
#include <vector>

#include "base/dtype.h"
#include "base/result.h"
#include "coll/zeropp_config.h"
#include "trigger/collectives.h"
#include "trigger/steps.h"

namespace zcoll {

namespace {

// Across equal nodes: rail gather steps of quantized pieces (each rank's codes enter each other
// node once), every rank's piece, this one's too, dequantized from the codes.
Result railQuantizedGather(TriggerRing& ring, Executor& ex, const char* mine, size_t count,
                           zcollDataType_t dtype, const quant::QuantParams& p,
                           uint64_t indexBase, char* recv) {
  const int n = ring.nranks(), me = ring.me();
  const size_t es = dtypeSize(dtype);
  const size_t partBytes = railPartBytes(ring);
  const size_t piece = quantizedElemsIn(partBytes, p);
  if (piece == 0)
    return fail(zcollInternalError, "a quantized gather on the trigger ring: a block of %d "
                "elements at %d bits does not fit a %zu-byte part of a window slot", p.blockSize,
                p.bits, partBytes);
  for (size_t at = 0; at < count; at += piece) {
    const size_t len = std::min(piece, count - at);
    quant::QuantParams mineParams = p;
    mineParams.elementOffset = indexBase + static_cast<uint64_t>(me) * count + at;
    ZCOLL_CHECK(railGatherStep(
        ring, ex, partBytes, std::vector<size_t>(n, quant::quantizedBytes(len, p)),
        [&](char* part) { return ex.quantize(mine + at * es, dtype, len, mineParams, part); },
        [&](int r, const char* from) {
          return ex.dequantize(from, len, p, recv + (r * count + at) * es, dtype);
        }));
  }
  return zcollSuccess;
}

}  // namespace

Result triggeredQuantizedGather(TriggerRing& ring, Executor& ex, const char* mine, size_t count,
                                zcollDataType_t dtype, const quant::QuantParams& p,
                                uint64_t indexBase, char* recv, float* residual) {
  const int n = ring.nranks(), me = ring.me();
  const size_t es = dtypeSize(dtype);
  if (ring.equalNodes() && residual == nullptr)
    return railQuantizedGather(ring, ex, mine, count, dtype, p, indexBase, recv);
  const size_t piece = quantizedPieceElems(ring, p, 1, residual != nullptr);
  if (piece == 0)
    return fail(zcollInternalError, "a quantized gather on the trigger ring: a block of %d "
                "elements at %d bits does not fit a %zu-byte window slot%s", p.blockSize, p.bits,
                ring.slotBytes(), residual ? " (or in fp32 its accumulator)" : "");
  for (size_t at = 0; at < count; at += piece) {
    const size_t len = std::min(piece, count - at);
    quant::QuantParams mineParams = p;
    mineParams.elementOffset = indexBase + static_cast<uint64_t>(me) * count + at;
    std::vector<char*> out(n);
    for (int r = 0; r < n; ++r) out[r] = recv + (r * count + at) * es;
    ZCOLL_CHECK(quantizedGatherStep(ring, ex, mine + at * es, dtype, len, mineParams, out,
                                    residual ? residual + at : nullptr));
  }
  return zcollSuccess;
}

Result triggeredQuantizedAllGather(TriggerRing& ring, Executor& ex, const CollArgs& a) {
  // The host's stochastic-rounding index of an element: its index in the gathered output.
  return triggeredQuantizedGather(ring, ex, static_cast<const char*>(a.send), a.count, a.dtype,
                                  a.quant->inter, 0, static_cast<char*>(a.recv), nullptr);
}

}  // namespace zcoll
