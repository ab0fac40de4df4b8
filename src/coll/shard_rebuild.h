// Keep training after a shrink: rebuild the shards of a ZeRO-partitioned vector that died with
// their ranks, from copies other ranks hold, and re-partition the vector over the new
// communicator (zcollRebuildFromSecondary, zcollRebuildFromBuddy; docs/FAULT_TOLERANCE.md,
// "Keep training"). zcollBuddyCopy makes the opt-in buddy copies.
//
// The vector V: the old communicator's W ranks held C elements each, rank o the piece
// V[o*C, (o+1)*C) (its primary shard); the first T elements are the parameters, the rest padding.
// The new communicator's W' ranks get C' each: new rank i gets V[i*C', (i+1)*C') (zeros past T).
// Every piece of V comes from one rank of the new communicator (the plan, the same on every
// rank, as it is a pure function of the old layout, which old ranks are in the new comm, and the
// shapes):
//   - a surviving old rank's piece from its primary (hpZ's kind without primaries: from its own
//     secondary, the snapshot every rank's secondary holds);
//   - a dead rank's piece, hpZ: from the secondaries of the surviving ranks of its rail (its
//     local index on the other nodes: their secondary holds it at node(o)*C), split evenly among
//     them; buddy: from its buddy's copy (the slot of o among the buddy's wards).
// A piece that no rank holds any more (its rail, or its buddy, died with it) fails the call on
// every rank alike, naming the old rank, before anything moves.
#pragma once

#include <cstddef>
#include <vector>

#include "coll/coll.h"
#include "topology/node_layout.h"

namespace zcoll {

enum class CopyKind { kSecondary, kBuddy };

struct RebuildShape {
  size_t count = 0;     // C: elements per old rank
  size_t newCount = 0;  // C': elements per new rank
  size_t total = 0;     // T: elements of V that are parameters (<= W*C, <= W'*C')
  CopyKind kind = CopyKind::kSecondary;
  bool primaries = true;  // survivors' pieces from their primaries (always, with buddies)
};

// One piece of V, from one new rank's buffer to another's (ranks of the new comm, elements).
struct ShardSegment {
  int src;
  bool fromCopy;  // the source's copy (secondary or buddy copy), else its primary
  size_t srcOffset;
  int dst;
  size_t dstOffset;
  size_t len;
};

// The plan: every segment, by destination then position. newToOld[i] is new rank i's old rank.
// `fn` names the call in messages.
Result planRebuild(const NodeLayout& old, const std::vector<int>& newToOld,
                   const RebuildShape& shape, const char* fn, std::vector<ShardSegment>* plan);

// What this rank passes.
struct RebuildBuffers {
  const void* primary;
  const void* copy;
  void* newPrimary;
  zcollDataType_t dtype;
};

// The old communicator as a rebuild needs it: its layout and its members' ids, in rank order
// (PeerInfo::memberId: a communicator made from another keeps its members' ids).
struct OldMembers {
  NodeLayout layout;
  std::vector<uint64_t> ids;
};
OldMembers oldMembersOf(const zcollComm* oldComm);

// New rank i's old rank, *newToOld[i], by member id; zcollInvalidUsage when a rank of `comm` is
// not an old member.
Result oldRanksOf(const char* fn, const OldMembers& old, const zcollComm* comm,
                  std::vector<int>* newToOld);

// Everything a rebuild does on the new comm, in its turn: the ranks check that they all passed
// the same shapes and old communicator (else all fail, zcollInvalidUsage naming the rank), the
// plan, then this rank's part of it (copies, sends and receives; zeros past T).
Result rebuildShards(const char* fn, const OldMembers& old, zcollComm* comm,
                     const std::vector<int>& newToOld, const RebuildShape& shape,
                     const RebuildBuffers& bufs);

// zcollBuddyCopy: this rank's `bytes` go to its buddy (NodeLayout::buddyOf); its wards' land in
// `copy`, one slot of `bytes` each in wardsOf order.
Result buddyCopy(zcollComm* comm, const void* send, void* copy, size_t bytes);

}  // namespace zcoll
