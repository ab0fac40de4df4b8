// The rebuild of shards after a shrink (coll/shard_rebuild.h): agree, plan, move.
#include "coll/shard_rebuild.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/dtype.h"
#include "base/hash.h"

namespace zcoll {

namespace {

// A stretch [begin, end) of V and where its first element lies on a new rank.
struct Piece {
  size_t begin, end;
  int src;
  bool fromCopy;
  size_t srcOffset;
};

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

// The pieces of old rank o's part of V (none when it is all padding).
Result piecesOf(const NodeLayout& old, const std::vector<int>& oldToNew, const RebuildShape& s,
                const char* fn, int o, std::vector<Piece>* out) {
  const size_t begin = o * s.count, end = std::min(begin + s.count, s.total);
  if (begin >= end) return zcollSuccess;
  const bool alive = oldToNew[o] >= 0;
  if (alive && (s.kind == CopyKind::kBuddy || s.primaries)) {
    out->push_back({begin, end, oldToNew[o], false, 0});
    return zcollSuccess;
  }
  if (s.kind == CopyKind::kBuddy) {
    const int b = old.buddyOf(o);
    if (b < 0 || oldToNew[b] < 0)
      return fail(zcollInvalidUsage, "%s: old rank %d's buddy copy was on old rank %d, which is "
                  "not in the new communicator either: its shard is lost (no communicator "
                  "rank holds it)", fn, o, b);
    const std::vector<int> wards = old.wardsOf(b);
    const size_t slot = std::find(wards.begin(), wards.end(), o) - wards.begin();
    out->push_back({begin, end, oldToNew[b], true, slot * s.count});
    return zcollSuccess;
  }
  // hpZ: rank r's secondary holds, at node m, the shard of its rail's rank on node m.
  std::vector<int> holders;
  if (alive) {
    holders.push_back(oldToNew[o]);  // its own secondary: nothing crosses the network
  } else {
    for (int r : old.railGroup(o))
      if (r != o && oldToNew[r] >= 0) holders.push_back(oldToNew[r]);
  }
  if (holders.empty())
    return fail(zcollInvalidUsage, "%s: no rank of the new communicator holds a copy of old "
                "rank %d's shard: the ranks of its rail (old ranks %s, its local index on every "
                "node) are all gone", fn, o, rankList(old.railGroup(o)).c_str());
  const size_t len = end - begin, k = holders.size();
  for (size_t j = 0; j < k; ++j) {  // a dead rank's shard split evenly among its rail
    const size_t a = begin + len * j / k, b = begin + len * (j + 1) / k;
    if (a < b)
      out->push_back({a, b, holders[j], true, old.nodeOf[o] * s.count + (a - begin)});
  }
  return zcollSuccess;
}

// What every rank sends every other first: a call that differs fails on all alike.
struct RebuildRecord {
  uint64_t count, newCount, total, oldKey;
  int32_t dtype, kind, primaries, pad;
};

// The old comm's identity as its members see it: its members' ids, in rank order.
uint64_t memberKey(const OldMembers& old) {
  return fnv1a64(std::string_view(reinterpret_cast<const char*>(old.ids.data()),
                                  old.ids.size() * sizeof(uint64_t)));
}

Result agree(const char* fn, zcollComm* comm, const RebuildRecord& mine) {
  std::vector<RebuildRecord> all(comm->nranks);
  CollArgs a{&mine, all.data(), sizeof(mine), zcollUint8, zcollSum, 0};
  ZCOLL_CHECK(allGatherRing(comm, a));
  for (int r = 0; r < comm->nranks; ++r) {
    const RebuildRecord& t = all[r];
    const char* what = t.count != mine.count         ? "count"
                       : t.newCount != mine.newCount ? "newCount"
                       : t.total != mine.total       ? "totalCount"
                       : t.dtype != mine.dtype       ? "datatype"
                       : t.primaries != mine.primaries
                           ? "primary (NULL on one rank, not on the other)"
                       : t.oldKey != mine.oldKey ? "oldComm (another communicator)"
                                                 : nullptr;
    if (what != nullptr)
      return fail(zcollInvalidUsage, "%s: rank %d passed another %s than rank %d: every rank "
                  "must pass the same; nothing was moved", fn, r, what, comm->rank);
  }
  return zcollSuccess;
}

}  // namespace

OldMembers oldMembersOf(const zcollComm* oldComm) {
  OldMembers old;
  old.layout = oldComm->layout;
  for (const PeerInfo& p : oldComm->peers) old.ids.push_back(p.memberId);
  return old;
}

Result oldRanksOf(const char* fn, const OldMembers& old, const zcollComm* comm,
                  std::vector<int>* newToOld) {
  newToOld->assign(comm->nranks, -1);
  for (int i = 0; i < comm->nranks; ++i) {
    for (size_t o = 0; o < old.ids.size(); ++o)
      if (old.ids[o] == comm->peers[i].memberId) (*newToOld)[i] = static_cast<int>(o);
    if ((*newToOld)[i] < 0)
      return fail(zcollInvalidUsage, "%s: rank %d of the new communicator (pid %d on %s) is not "
                  "a rank of oldComm: newComm must be made from oldComm (zcollCommShrink)", fn,
                  i, comm->peers[i].pid, comm->peers[i].hostName);
  }
  return zcollSuccess;
}

namespace {

// This rank's part of the plan: receives first, then sends, then its own copies; zeros past T.
Result runPlan(zcollComm* comm, const std::vector<ShardSegment>& plan, const RebuildShape& s,
               const RebuildBuffers& b) {
  const int me = comm->rank;
  const size_t es = dtypeSize(b.dtype);
  char* out = static_cast<char*>(b.newPrimary);
  const size_t first = me * s.newCount;
  if (s.total < first + s.newCount) {
    const size_t from = s.total > first ? s.total - first : 0;
    std::memset(out + from * es, 0, (s.newCount - from) * es);
  }
  auto source = [&](const ShardSegment& g) {
    const void* base = g.fromCopy ? b.copy : b.primary;
    return static_cast<const char*>(base) + g.srcOffset * es;
  };
  size_t messages = 0;
  for (const ShardSegment& g : plan) messages += (g.src == me) != (g.dst == me);
  Stage st(comm, hostExecutor());
  RequestList reqs(messages);
  std::vector<uint32_t> sent(comm->nranks, 0), received(comm->nranks, 0);  // steps, per peer
  for (const ShardSegment& g : plan)
    if (g.dst == me && g.src != me)
      ZCOLL_CHECK(st.recv(g.src, out + g.dstOffset * es, g.len * es, received[g.src]++,
                          reqs.next()));
  for (const ShardSegment& g : plan)
    if (g.src == me && g.dst != me)
      ZCOLL_CHECK(st.send(g.dst, source(g), g.len * es, sent[g.dst]++, reqs.next()));
  for (const ShardSegment& g : plan)
    if (g.src == me && g.dst == me) ZCOLL_CHECK(st.copy(out + g.dstOffset * es, source(g),
                                                        g.len * es));
  return st.wait(reqs);
}

}  // namespace

Result planRebuild(const NodeLayout& old, const std::vector<int>& newToOld,
                   const RebuildShape& s, const char* fn, std::vector<ShardSegment>* plan) {
  const int w = static_cast<int>(old.nodeOf.size());
  if (s.kind == CopyKind::kSecondary && !old.uniform())
    return fail(zcollInvalidUsage, "%s: oldComm's nodes have different numbers of ranks, so hpZ "
                "never ran there and no rank holds secondary shards of it", fn);
  std::vector<int> oldToNew(w, -1);
  for (size_t i = 0; i < newToOld.size(); ++i) oldToNew[newToOld[i]] = static_cast<int>(i);
  std::vector<Piece> pieces;  // by position: they tile [0, T)
  for (int o = 0; o < w; ++o) ZCOLL_CHECK(piecesOf(old, oldToNew, s, fn, o, &pieces));
  plan->clear();
  size_t p = 0;
  for (size_t i = 0; i < newToOld.size(); ++i) {
    const size_t lo = i * s.newCount, hi = std::min(lo + s.newCount, s.total);
    for (size_t at = lo; at < hi;) {
      while (pieces[p].end <= at) ++p;
      const Piece& q = pieces[p];
      const size_t end = std::min(hi, q.end);
      plan->push_back({q.src, q.fromCopy, q.srcOffset + (at - q.begin), static_cast<int>(i),
                       at - lo, end - at});
      at = end;
    }
  }
  return zcollSuccess;
}

Result rebuildShards(const char* fn, const OldMembers& old, zcollComm* comm,
                     const std::vector<int>& newToOld, const RebuildShape& shape,
                     const RebuildBuffers& bufs) {
  RebuildRecord mine{shape.count, shape.newCount, shape.total, memberKey(old),
                     bufs.dtype, static_cast<int32_t>(shape.kind), shape.primaries, 0};
  ZCOLL_CHECK(agree(fn, comm, mine));
  std::vector<ShardSegment> plan;
  ZCOLL_CHECK(planRebuild(old.layout, newToOld, shape, fn, &plan));
  return runPlan(comm, plan, shape, bufs);
}

}  // namespace zcoll
