#include "coll/in_place.h"

#include <algorithm>
#include <cstddef>

#include "base/dtype.h"
#include "exec/reduce_kernels.h"

namespace zcoll {

namespace {

constexpr size_t kPieceBytes = 128 * 1024;  // a piece and its accumulator stay in L2

// Whether a piece can be reduced straight into the output, in one pass per input: out = in0 op
// in1, then out op= in_p for p = 2.. . Those are the accumulator's operations in the same order
// (its type is the data's own for every type but fp16/bf16, and a pair of 16-bit inputs is
// combined in fp32 and rounded once, as fromAcc rounds), so the bits are the same, without the
// copies into and out of the accumulator (2 of 4 passes over a piece at 2 ranks). Avg divides
// at the end, and an output that is also a later member's input (in place, this rank >= 2)
// would be overwritten before it is read: those keep the accumulator.
bool reducesInOutput(const PeerBuffers& in, int w, zcollDataType_t dtype, zcollRedOp_t op,
                     int me, size_t offset, const char* out) {
  const bool plainOp = op == zcollSum || op == zcollProd || op == zcollMax || op == zcollMin;
  if (!plainOp || w < 2 || (isHalfType(dtype) && w != 2)) return false;
  for (int p = 0; p < w; ++p)
    if (in.view(p) == nullptr) return false;
  return me < 2 || in.view(me) + offset != out;
}

Result reducePieceInOutput(Executor& ex, const PeerBuffers& in, int w, size_t at, size_t k,
                           zcollDataType_t dtype, zcollRedOp_t op, char* out) {
  ZCOLL_CHECK(ex.combine(out, in.view(0) + at, in.view(1) + at, dtype, op, 0, k));
  for (int p = 2; p < w; ++p) ZCOLL_CHECK(ex.accumulate(out, in.view(p) + at, false, dtype, op, k));
  return zcollSuccess;
}

}  // namespace

Result tradeItems(const Stage& st, const Group& g, uint32_t step, void* items, size_t stride,
                  size_t bytes) {
  char* at = static_cast<char*>(items);
  RequestList reqs(2 * static_cast<size_t>(g.size()));
  for (int k = 1; k < g.size(); ++k) {
    int p = (g.me + k) % g.size();
    ZCOLL_CHECK(st.recvControl(g.ranks[p], at + p * stride, bytes, step, reqs.next()));
    ZCOLL_CHECK(st.sendControl(g.ranks[p], at + g.me * stride, bytes, step, reqs.next()));
  }
  return st.wait(reqs);
}

namespace {

// Every member's range: this rank's (ranges[g.me]) to the others, theirs into ranges[p].
Result tradeRanges(const Stage& st, const Group& g, const PeerMemory& pm, uint32_t step,
                   std::vector<ExposedRange>* ranges) {
  return tradeItems(st, g, step, ranges->data(), sizeof(ExposedRange), rangeWireBytes(pm));
}

}  // namespace

PeerMemory* peerMemoryOf(const zcollComm* comm, const Group& g, MemKind kind) {
  const bool device = kind == MemKind::kDevice;
  PeerMemory* pm = nullptr;
  const std::vector<Transport*>& routes = device ? comm->deviceRoute : comm->route;
  for (int p : g.ranks) {
    if (p == comm->rank) continue;
    if (static_cast<size_t>(p) >= routes.size() || routes[p] == nullptr) return nullptr;
    PeerMemory* reached = routes[p]->peerMemory();
    if (reached == nullptr || (pm != nullptr && reached != pm)) return nullptr;
    pm = reached;
  }
  // Every member must reach every other the same way, or some would read in place while others
  // exchange (cuda_ipc's pairs need not form a clique: GPUs within a path class of one another).
  return pm != nullptr && pm->pairsConnected(g.ranks) ? pm : nullptr;
}

bool readsCallerBuffersInPlace(const zcollComm* comm, const Group& g, const Executor& exec) {
  const PeerMemory* pm = peerMemoryOf(comm, g, exec.memKind());
  return pm != nullptr && pm->exposesCallerBuffers();
}

Result PeerBuffers::publish(const Stage& st, const Group& g, const void* mine, size_t bytes) {
  return publishAs(st, g, mine, bytes, false);
}

Result PeerBuffers::publishWritable(const Stage& st, const Group& g, void* mine, size_t bytes) {
  ZCOLL_CHECK(publishAs(st, g, mine, bytes, true));
  if (ranges_[g.me].mappable) writable_[g.me] = static_cast<char*>(mine);
  return zcollSuccess;
}

Result PeerBuffers::publishAs(const Stage& st, const Group& g, const void* mine, size_t bytes,
                              bool write) {
  memory_ = peerMemoryOf(st.comm(), g, st.exec().memKind());
  if (memory_ == nullptr)
    return fail(zcollInternalError, "an in-place algorithm ran without peer memory for its group");
  group_ = g;
  ranges_.assign(g.size(), ExposedRange{});
  ZCOLL_CHECK(memory_->expose(mine, bytes, &ranges_[g.me]));
  ZCOLL_CHECK(tradeRanges(st, g, *memory_, 0, &ranges_));
  views_.assign(g.size(), PeerView{});
  views_[g.me].at = static_cast<const char*>(mine);
  writable_.assign(g.size(), nullptr);
  // Every member decides from the same ranges, its own included, so all fall back together.
  readable_ = true;
  for (const ExposedRange& r : ranges_)
    if (!r.mappable && r.bytes > 0 && !memory_->readsUnmapped()) readable_ = false;
  if (!readable_) return zcollSuccess;
  for (int i = 0; i < g.size(); ++i) {
    if (i == g.me) continue;
    ZCOLL_CHECK(memory_->map(g.ranks[i], ranges_[i], write, &views_[i]));
    writable_[i] = views_[i].writable;
  }
  return zcollSuccess;
}

Result PeerBuffers::read(Executor& ex, int i, size_t offset, void* dst, size_t bytes) const {
  const ExposedRange& r = ranges_[i];
  if (offset > r.bytes || bytes > r.bytes - offset)
    return fail(zcollInternalError, "in-place read: %zu bytes at %zu lie outside the %llu bytes "
                "rank %d published", bytes, offset, static_cast<unsigned long long>(r.bytes),
                group_.ranks[i]);
  if (views_[i].at != nullptr) return ex.copy(dst, views_[i].at + offset, bytes);
  return memory_->read(group_.ranks[i], r, offset, dst, bytes);
}

Result PeerBuffers::release(const Stage& st, uint32_t step) const {
  return tradeTokens(st, group_, step);
}

Result tradeTokens(const Stage& st, const Group& g, uint32_t step) {
  std::vector<uint8_t> tokens(g.size() * kTokenBytes, 1);
  return tradeItems(st, g, step, tokens.data(), kTokenBytes, kTokenBytes);
}

Result shareWindows(const Stage& st, const Group& g, PeerMemory& pm, const ExposedRange& mine,
                    const char* myBase, uint32_t step, std::vector<const char*>* base) {
  std::vector<ExposedRange> refs(g.size());
  refs[g.me] = mine;
  ZCOLL_CHECK(tradeRanges(st, g, pm, step, &refs));
  base->assign(g.size(), myBase);
  for (int p = 0; p < g.size(); ++p)
    if (p != g.me) ZCOLL_CHECK(pm.mapWindow(g.ranks[p], refs[p], &(*base)[p]));
  return zcollSuccess;
}

Result readAndReduce(zcollComm* comm, Executor& ex, const PeerBuffers& in, size_t offset,
                     size_t m, zcollDataType_t dtype, zcollRedOp_t op, char* out,
                     const std::vector<char*>& copies) {
  const int w = comm->nranks;
  const size_t es = dtypeSize(dtype);
  const size_t pieceElems = std::max<size_t>(1, kPieceBytes / es);
  const bool direct = reducesInOutput(in, w, dtype, op, comm->rank, offset, out);
  const size_t accOffset = (pieceElems * es + 63) / 64 * 64;
  void* scratch = nullptr;
  if (!direct)
    ZCOLL_CHECK(scratchGet(comm, ex, accOffset + pieceElems * accSize(dtype), &scratch));
  char* buf = static_cast<char*>(scratch);
  char* acc = buf + accOffset;
  for (size_t done = 0; done < m; done += pieceElems) {
    const size_t k = std::min(pieceElems, m - done);
    const size_t at = offset + done * es;
    if (direct) {
      ZCOLL_CHECK(reducePieceInOutput(ex, in, w, at, k, dtype, op, out + done * es));
      for (char* copy : copies) ZCOLL_CHECK(ex.copy(copy + done * es, out + done * es, k * es));
      continue;
    }
    for (int p = 0; p < w; ++p) {
      const void* piece = in.view(p) != nullptr ? in.view(p) + at : buf;
      if (piece == buf) ZCOLL_CHECK(in.read(ex, p, at, buf, k * es));
      ZCOLL_CHECK(p == 0 ? ex.toAcc(acc, piece, dtype, k)
                         : ex.accumulate(acc, piece, false, dtype, op, k));
    }
    ZCOLL_CHECK(ex.fromAcc(out + done * es, acc, dtype, op, w, k));
    // Plain stores, to pieces in cache: streaming them measured 1.9x slower at 4 MiB and no
    // better from 16 MiB (perf/LOG.md, "write to peers").
    for (char* copy : copies) ZCOLL_CHECK(ex.copy(copy + done * es, out + done * es, k * es));
  }
  return zcollSuccess;
}

void countPeerReads(zcollComm* comm, const Group& g, size_t bytes) {
  for (int p : g.ranks) {
    if (p == comm->rank) continue;
    countTransfer(comm, p, bytes, false);
    countTransfer(comm, p, bytes, true);
  }
}

}  // namespace zcoll
