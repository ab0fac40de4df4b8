// qwZ: quantized all-gather (ZeRO++ forward weights).
//   q_me = quant(x_me)                         once, into slot me of a packed wire buffer
//   ring over the node-ordered ranks: step s sends slot (me - s), receives slot (me - s - 1)
//   out[r] = dequant(q_r) for every r, me included (identical bits on every rank)
//   Step s+1 is posted before slot (me - s - 1) is dequantized, so dequantization overlaps
//   the next transfer. Wire bytes per rank: (W-1) * quantizedBytes(C) instead of (W-1)*C*2.
#include <vector>

#include "base/dtype.h"
#include "coll/zeropp_allgather.h"
#include "coll/zeropp_config.h"

namespace zcoll {

Result quantizedRingAllGather(const Stage& st, const Group& g, const void* own, size_t count,
                              zcollDataType_t dtype, const quant::QuantParams& p, void* wire,
                              void* out, const size_t* outElem, const SlotLanded& landed) {
  const int w = g.size();
  const size_t qb = quant::quantizedBytes(count, p);
  const size_t es = dtypeSize(dtype);
  char* q = static_cast<char*>(wire);
  auto slot = [&](int i) { return q + static_cast<size_t>((i % w + w) % w) * qb; };
  auto land = [&](int i) -> Result {
    int k = (i % w + w) % w;
    ZCOLL_CHECK(st.exec().dequantize(slot(k), count, p, static_cast<char*>(out) + outElem[k] * es,
                                     dtype));
    return landed ? landed(k) : zcollSuccess;
  };
  RequestList reqs(2 * static_cast<size_t>(w));
  auto post = [&](int s) -> Result {
    auto step = static_cast<uint32_t>(s);
    ZCOLL_CHECK(st.recv(g.at(g.me - 1), slot(g.me - s - 1), qb, step, reqs.next()));
    return st.send(g.at(g.me + 1), slot(g.me - s), qb, step, reqs.next());
  };
  if (own != nullptr) ZCOLL_CHECK(st.exec().quantize(own, dtype, count, p, slot(g.me)));
  if (w > 1) ZCOLL_CHECK(post(0));
  ZCOLL_CHECK(land(g.me));  // after quantize: `own` may be this very slot of `out`
  for (int s = 0; s + 1 < w; ++s) {
    ZCOLL_CHECK(st.wait(reqs.data() + 2 * s, 2));
    if (s + 2 < w) ZCOLL_CHECK(post(s + 1));
    ZCOLL_CHECK(land(g.me - s - 1));
  }
  return zcollSuccess;
}

Group nodeOrderedRing(const zcollComm* comm) {
  std::vector<int> ranks;
  for (const auto& node : comm->layout.members) ranks.insert(ranks.end(), node.begin(), node.end());
  return makeGroup(comm, std::move(ranks));
}

Result qwzAllGather(zcollComm* comm, Executor& exec, const void* send, void* recv, size_t count,
                    zcollDataType_t dtype, const quant::QuantParams& p) {
  const Group g = nodeOrderedRing(comm);
  void* wire = nullptr;
  ZCOLL_CHECK(scratchGet(comm, exec, quant::quantizedBytes(count, p) * g.size(), &wire));
  std::vector<size_t> outElem(g.size());
  for (int i = 0; i < g.size(); ++i) outElem[i] = static_cast<size_t>(g.ranks[i]) * count;
  quant::QuantParams mine = p;
  mine.elementOffset = static_cast<uint64_t>(comm->rank) * count;  // SR: disjoint per shard
  Stage st(comm, exec);
  return quantizedRingAllGather(st, g, send, count, dtype, mine, wire, recv, outElem.data());
}

// Registry entry (registry.cc).
Result quantizedAllGatherRing(zcollComm* comm, const CollArgs& a) {
  return qwzAllGather(comm, *a.exec, a.send, a.recv, a.count, a.dtype, a.quant->inter);
}

}  // namespace zcoll
