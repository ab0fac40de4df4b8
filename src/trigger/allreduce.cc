#include <algorithm>
#include <vector>

#include "base/dtype.h"
#include "trigger/collectives.h"
#include "trigger/steps.h"

namespace zcoll {

namespace {

// Rank r's segment: the host's balanced chunks (coll/group.cc: balancedChunks), from count * r / n
// (the ring's order depends on who owns an element), at most `each` = ceil(count / n) long.
struct Segments {
  size_t count;
  int n;
  size_t each;
  size_t start(int r) const { return count * static_cast<size_t>(r) / static_cast<size_t>(n); }
  size_t length(int r) const { return start(r + 1) - start(r); }
  // Elements of r's segment in the piece at `at` (of `piece` elements).
  size_t inPiece(int r, size_t at, size_t piece) const {
    return at >= length(r) ? 0 : std::min(piece, length(r) - at);
  }
};

}  // namespace

Result triggeredAllReduce(TriggerRing& ring, Executor& ex, const CollArgs& a,
                          const ReduceOrder& order) {
  const int n = ring.nranks(), me = ring.me();
  const size_t es = dtypeSize(a.dtype);
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  const Segments seg{a.count, n, (a.count + n - 1) / n};
  const size_t piece = reducePieceElems(ring, a.dtype, order);
  for (size_t at = 0; at < seg.each; at += piece) {
    std::vector<const char*> toRank(n);
    std::vector<size_t> count(n), bytes(n);
    std::vector<char*> out(n);
    for (int r = 0; r < n; ++r) {
      toRank[r] = send + (seg.start(r) + at) * es;
      count[r] = seg.inPiece(r, at, piece);
      bytes[r] = count[r] * es;
      out[r] = recv + (seg.start(r) + at) * es;
    }
    ZCOLL_CHECK(reduceStep(ring, ex, a.dtype, a.op, order, toRank, count, out[me]));
    ZCOLL_CHECK(gatherStep(ring, ex, out[me], bytes, out));
  }
  return zcollSuccess;
}

}  // namespace zcoll
