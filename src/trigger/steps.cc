#include "trigger/steps.h"

#include <algorithm>

#include "base/dtype.h"
#include "coll/feedback.h"
#include "exec/reduce_kernels.h"

namespace zcoll {

namespace {

// `elems` elements at `in` quantized with `p` to `codes`; with `residual`, keeping error
// feedback (coll/feedback.h), the fp32 values in the ring's accumulator (stream-ordered: a step
// of this rank uses it at a time).
Result quantizeInto(TriggerRing& ring, Executor& ex, const char* in, zcollDataType_t dtype,
                    size_t elems, const quant::QuantParams& p, float* residual, char* codes) {
  if (residual == nullptr) return ex.quantize(in, dtype, elems, p, codes);
  return quantizeWithFeedback(ex, in, dtype, elems, p, residual,
                              reinterpret_cast<float*>(ring.acc()), codes);
}

}  // namespace

Result gatherStep(TriggerRing& ring, Executor& ex, const char* mine,
                  const std::vector<size_t>& bytes, const std::vector<char*>& out) {
  const int me = ring.me();
  uint64_t s = 0;
  ZCOLL_CHECK(ring.begin(ex, &s));
  if (bytes[me] > 0) ZCOLL_CHECK(ex.copy(ring.mySlot(s), mine, bytes[me]));
  ZCOLL_CHECK(ring.publish(ex, s, bytes[me]));
  for (int p = 0; p < ring.nranks(); ++p) {
    if (p == me) continue;
    ZCOLL_CHECK(ring.await(ex, p, s));
    if (bytes[p] > 0) ZCOLL_CHECK(ex.copy(out[p], ring.peerSlot(p, s), bytes[p]));
  }
  return ring.finish(ex, s);
}

Result quantizedGatherStep(TriggerRing& ring, Executor& ex, const char* mine,
                           zcollDataType_t dtype, size_t elems, const quant::QuantParams& p,
                           const std::vector<char*>& out, float* residual) {
  const int me = ring.me();
  uint64_t s = 0;
  ZCOLL_CHECK(ring.begin(ex, &s));
  ZCOLL_CHECK(quantizeInto(ring, ex, mine, dtype, elems, p, residual, ring.mySlot(s)));
  ZCOLL_CHECK(ring.publish(ex, s, quant::quantizedBytes(elems, p)));
  ZCOLL_CHECK(ex.dequantize(ring.mySlot(s), elems, p, out[me], dtype));  // after: may be `mine`
  for (int r = 0; r < ring.nranks(); ++r) {
    if (r == me) continue;
    ZCOLL_CHECK(ring.await(ex, r, s));
    ZCOLL_CHECK(ex.dequantize(ring.peerSlot(r, s), elems, p, out[r], dtype));
  }
  return ring.finish(ex, s);
}

Result quantizedReduceStep(TriggerRing& ring, Executor& ex, zcollDataType_t dtype, size_t elems,
                           const std::vector<const char*>& toRank,
                           const std::vector<quant::QuantParams>& params, float scale,
                           char* out, const std::vector<float*>& residuals) {
  const int me = ring.me(), n = ring.nranks();
  const size_t part = quant::quantizedBytes(elems, params[me]);
  uint64_t s = 0;
  ZCOLL_CHECK(ring.begin(ex, &s));
  for (int d = 0; d < n; ++d)
    ZCOLL_CHECK(quantizeInto(ring, ex, toRank[d], dtype, elems, params[d],
                             residuals.empty() ? nullptr : residuals[d],
                             ring.mySlot(s) + d * part));
  ZCOLL_CHECK(ring.publish(ex, s, n * part));
  std::vector<const void*> parts(n);
  for (int r = 0; r < n; ++r) {
    if (r != me) ZCOLL_CHECK(ring.await(ex, r, s));
    parts[r] = (r == me ? ring.mySlot(s) : ring.peerSlot(r, s)) + me * part;
  }
  ZCOLL_CHECK(ex.dequantizeSum(parts.data(), n, elems, params[me], scale, out, dtype));
  return ring.finish(ex, s);
}

size_t quantizedPieceElems(const TriggerRing& ring, const quant::QuantParams& p, int parts,
                           bool feedback) {
  const size_t block = static_cast<size_t>(p.blockSize);
  const size_t room = ring.slotBytes() / static_cast<size_t>(std::max(1, parts));
  size_t blocks = room / std::max<size_t>(1, quant::quantizedBytes(block, p));
  while (blocks > 0 && quant::quantizedBytes(blocks * block, p) > room) --blocks;
  if (feedback) blocks = std::min(blocks, ring.accBytes() / sizeof(float) / block);
  return blocks * block;
}

size_t reducePieceElems(const TriggerRing& ring, zcollDataType_t dtype) {
  const size_t bySlot = ring.slotBytes() / (size_t(ring.nranks()) * dtypeSize(dtype));
  const size_t byAcc = ring.accBytes() / accSize(dtype);
  return std::min(bySlot, byAcc) / 64 * 64;
}

Result reduceStep(TriggerRing& ring, Executor& ex, zcollDataType_t dtype, zcollRedOp_t op,
                  const std::vector<const char*>& toRank, const std::vector<size_t>& count,
                  char* out) {
  const int me = ring.me(), n = ring.nranks();
  const size_t es = dtypeSize(dtype);
  const size_t region = reducePieceElems(ring, dtype) * es;  // each rank's part of a slot
  uint64_t s = 0;
  ZCOLL_CHECK(ring.begin(ex, &s));
  for (int d = 0; d < n; ++d)
    if (d != me && count[d] > 0)
      ZCOLL_CHECK(ex.copy(ring.mySlot(s) + d * region, toRank[d], count[d] * es));
  ZCOLL_CHECK(ring.publish(ex, s, n * region));
  const size_t m = count[me];
  for (int p = 0; p < n; ++p) {
    if (p != me) ZCOLL_CHECK(ring.await(ex, p, s));
    if (m == 0) continue;
    const char* in = p == me ? toRank[me] : ring.peerSlot(p, s) + me * region;
    if (p == 0) ZCOLL_CHECK(ex.toAcc(ring.acc(), in, dtype, m));
    else ZCOLL_CHECK(ex.accumulate(ring.acc(), in, false, dtype, op, m));
  }
  if (m > 0) ZCOLL_CHECK(ex.fromAcc(out, ring.acc(), dtype, op, n, m));
  return ring.finish(ex, s);
}

}  // namespace zcoll
