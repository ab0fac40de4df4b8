#include "trigger/steps.h"

#include <algorithm>
#include <utility>

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
  ZCOLL_CHECK(ring.publish(ex, s, ProxyStep::gather(bytes, me)));
  for (int p = 0; p < ring.nranks(); ++p) {
    if (p == me) continue;
    ZCOLL_CHECK(ring.await(ex, p, s));
    if (bytes[p] > 0) ZCOLL_CHECK(ex.copy(out[p], ring.peerSlot(p, s), bytes[p]));
  }
  return ring.finish(ex, s);
}

namespace {

// The second half of a rail or node gather step: this rank's slot published to its node peers,
// then every node rank's parts taken (part k of local rank j: the piece of node k's rank j),
// and the step finished.
Result readNodeSlots(TriggerRing& ring, Executor& ex, uint64_t s, size_t partBytes,
                     const std::vector<size_t>& bytes,
                     const std::function<Result(int, const char*)>& take) {
  const int me = ring.me();
  const std::vector<int>& local = ring.localRanks();
  ZCOLL_CHECK(ring.publishLocal(ex, s));
  for (int j = 0; j < static_cast<int>(local.size()); ++j) {
    const char* part = ring.mySlot(s);
    if (local[j] != me) {
      ZCOLL_CHECK(ring.await(ex, local[j], s));
      part = ring.peerSlot(local[j], s);
    }
    for (int k = 0; k < ring.nodes(); ++k) {
      const int r = ring.rankAt(k, j);
      if (bytes[r] > 0) ZCOLL_CHECK(take(r, part + k * partBytes));
    }
  }
  return ring.finish(ex, s);
}

}  // namespace

Result nodeGatherStep(TriggerRing& ring, Executor& ex, size_t partBytes,
                      const std::vector<size_t>& bytes,
                      const std::function<Result(int, char*)>& place,
                      const std::function<Result(int, const char*)>& take) {
  uint64_t s = 0;
  ZCOLL_CHECK(ring.begin(ex, &s));
  for (int k = 0; k < ring.nodes(); ++k) ZCOLL_CHECK(place(k, ring.mySlot(s) + k * partBytes));
  return readNodeSlots(ring, ex, s, partBytes, bytes, take);
}

Result railGatherStep(TriggerRing& ring, Executor& ex, size_t partBytes,
                      const std::vector<size_t>& bytes, const std::function<Result(char*)>& place,
                      const std::function<Result(int, const char*)>& take) {
  const int me = ring.me(), myNode = ring.nodeOf(me), myLocal = ring.myLocalIndex();
  uint64_t s = 0;
  ZCOLL_CHECK(ring.begin(ex, &s));
  char* slot = ring.mySlot(s);
  ZCOLL_CHECK(place(slot + myNode * partBytes));
  // To the rail peers only, and from them.
  std::vector<size_t> to(ring.nranks(), 0), from(ring.nranks(), 0);
  for (int k = 0; k < ring.nodes(); ++k) {
    const int q = ring.rankAt(k, myLocal);
    if (q == me) continue;
    to[q] = bytes[me];
    from[q] = bytes[q];
  }
  ProxyStep rail;
  rail.toRank = std::move(to);
  rail.fromRank = std::move(from);
  ZCOLL_CHECK(ring.publishRemote(ex, s, slot + myNode * partBytes, rail));
  for (int k = 0; k < ring.nodes(); ++k) {
    const int q = ring.rankAt(k, myLocal);
    if (q == me) continue;
    ZCOLL_CHECK(ring.await(ex, q, s));
    if (bytes[q] > 0) ZCOLL_CHECK(ex.copy(slot + k * partBytes, ring.peerSlot(q, s), bytes[q]));
  }
  return readNodeSlots(ring, ex, s, partBytes, bytes, take);
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

size_t quantizedElemsIn(size_t room, const quant::QuantParams& p) {
  const size_t block = static_cast<size_t>(p.blockSize);
  size_t blocks = room / std::max<size_t>(1, quant::quantizedBytes(block, p));
  while (blocks > 0 && quant::quantizedBytes(blocks * block, p) > room) --blocks;
  return blocks * block;
}

size_t quantizedPieceElems(const TriggerRing& ring, const quant::QuantParams& p, int parts,
                           bool feedback) {
  const size_t block = static_cast<size_t>(p.blockSize);
  size_t elems = quantizedElemsIn(ring.slotBytes() / static_cast<size_t>(std::max(1, parts)), p);
  if (feedback) elems = std::min(elems, ring.accBytes() / sizeof(float) / block * block);
  return elems;
}

size_t railPartBytes(const TriggerRing& ring) {
  return ring.slotBytes() / static_cast<size_t>(std::max(1, ring.nodes())) / 64 * 64;
}

size_t reducePieceElems(const TriggerRing& ring, zcollDataType_t dtype, const ReduceOrder& order) {
  const size_t bySlot = ring.slotBytes() / (size_t(ring.nranks()) * dtypeSize(dtype));
  const size_t byAcc =
      ring.accBytes() / (accSize(dtype) * static_cast<size_t>(accBuffersFor(order, ring.nranks())));
  return std::min(bySlot, byAcc) / 64 * 64;
}

namespace {

// The `m` elements of every rank (in[r]) reduced into `out` in `order`, on `ex`'s stream, with
// accumulator buffers of `stride` bytes from `acc`; `owner` is the rank whose chunk it is.
class OrderedReduce {
 public:
  OrderedReduce(Executor& ex, char* acc, size_t stride, const std::vector<const char*>& in,
                size_t m, zcollDataType_t dtype, zcollRedOp_t op)
      : ex_(ex), acc_(acc), stride_(stride), in_(in), n_(static_cast<int>(in.size())), m_(m),
        dtype_(dtype), op_(op) {}

  Result run(const ReduceOrder& order, int owner, char* out) {
    switch (order.kind) {
      case ReduceOrder::Kind::kRing: return ring(owner, order.partialsInDtype, out);
      case ReduceOrder::Kind::kTree: return tree(out);
      case ReduceOrder::Kind::kRankOrder: break;
    }
    return inSequence([&](int k) { return in_[k]; }, out);
  }

 private:
  // direct, shm_read, and the ring with accumulator partials: in(0), in(1), ... summed in the
  // accumulator type, rounded once.
  template <typename In>
  Result inSequence(In in, char* out) {
    ZCOLL_CHECK(ex_.toAcc(acc_, in(0), dtype_, m_));
    for (int k = 1; k < n_; ++k) ZCOLL_CHECK(ex_.accumulate(acc_, in(k), false, dtype_, op_, m_));
    return ex_.fromAcc(out, acc_, dtype_, op_, n_, m_);
  }

  // coll/reducescatter_ring.cc: from owner + 1 around to the owner; two ranks combine once.
  Result ring(int owner, bool partialsInDtype, char* out) {
    auto in = [&](int k) { return in_[(owner + 1 + k) % n_]; };
    if (n_ == 2) return ex_.combine(out, in(0), in(1), dtype_, op_, n_, m_);
    if (!partialsInDtype) return inSequence(in, out);
    ZCOLL_CHECK(ex_.combine(acc_, in(0), in(1), dtype_, op_, 0, m_));
    for (int k = 2; k < n_ - 1; ++k)
      ZCOLL_CHECK(ex_.combine(acc_, acc_, in(k), dtype_, op_, 0, m_));
    return ex_.combine(out, acc_, in(n_ - 1), dtype_, op_, n_, m_);
  }

  // coll/allreduce_recursive_doubling.cc: the first 2R ranks folded in pairs into R core values,
  // then a balanced tree over the P core values (one accumulator buffer per level).
  Result tree(char* out) {
    int p = 1;
    while (p * 2 <= n_) p *= 2;
    ZCOLL_CHECK(subtree(0, p, p, 0));
    return ex_.fromAcc(out, acc_, dtype_, op_, n_, m_);
  }
  Result subtree(int first, int size, int p, int level) {
    char* buf = acc_ + static_cast<size_t>(level) * stride_;
    if (size == 1) {
      const int r = n_ - p;  // ranks folded in
      if (first >= r) return ex_.toAcc(buf, in_[first + r], dtype_, m_);
      ZCOLL_CHECK(ex_.toAcc(buf, in_[2 * first + 1], dtype_, m_));
      return ex_.accumulate(buf, in_[2 * first], false, dtype_, op_, m_);
    }
    ZCOLL_CHECK(subtree(first, size / 2, p, level));
    ZCOLL_CHECK(subtree(first + size / 2, size / 2, p, level + 1));
    return ex_.accumulate(buf, buf + stride_, true, dtype_, op_, m_);
  }

  Executor& ex_;
  char* acc_;
  size_t stride_;
  const std::vector<const char*>& in_;
  int n_;
  size_t m_;
  zcollDataType_t dtype_;
  zcollRedOp_t op_;
};

}  // namespace

Result reduceStep(TriggerRing& ring, Executor& ex, zcollDataType_t dtype, zcollRedOp_t op,
                  const ReduceOrder& order, const std::vector<const char*>& toRank,
                  const std::vector<size_t>& count, char* out) {
  const int me = ring.me(), n = ring.nranks();
  const size_t es = dtypeSize(dtype);
  const size_t piece = reducePieceElems(ring, dtype, order);
  const size_t region = piece * es;  // each rank's part of a slot
  uint64_t s = 0;
  ZCOLL_CHECK(ring.begin(ex, &s));
  for (int d = 0; d < n; ++d)
    if (d != me && count[d] > 0)
      ZCOLL_CHECK(ex.copy(ring.mySlot(s) + d * region, toRank[d], count[d] * es));
  std::vector<size_t> partBytes(n);
  for (int d = 0; d < n; ++d) partBytes[d] = count[d] * es;
  ZCOLL_CHECK(ring.publish(ex, s, ProxyStep::parts(region, partBytes, me)));
  std::vector<const char*> in(n);
  for (int p = 0; p < n; ++p) {
    if (p != me) ZCOLL_CHECK(ring.await(ex, p, s));
    in[p] = p == me ? toRank[me] : ring.peerSlot(p, s) + me * region;
  }
  if (count[me] > 0)
    ZCOLL_CHECK(OrderedReduce(ex, ring.acc(), piece * accSize(dtype), in, count[me], dtype, op)
                    .run(order, me, out));
  return ring.finish(ex, s);
}

}  // namespace zcoll
