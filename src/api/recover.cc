// Public C API: keep training after a shrink (coll/shard_rebuild.h has the plan and the
// exchange): zcollBuddyCopyCount, zcollBuddyCopy, zcollRebuildFromSecondary,
// zcollRebuildFromBuddy. Host buffers only.
#include "api/guard.h"
#include "api/validate.h"
#include "base/dtype.h"
#include "coll/shard_rebuild.h"

using namespace zcoll;

namespace {

// The buffers of a call, all host memory (zcollUnsupported for device memory).
Result checkHostMemory(const void* const* bufs, const char* const* names, int n,
                       zcollStream_t stream, const char* fn) {
  CallExecutor ce;
  ZCOLL_CHECK(checkCallMemory(bufs, names, n, stream, fn, &ce));
  if (ce.exec->memKind() != MemKind::kHost)
    return fail(zcollUnsupported, "%s takes host buffers only (a recovery step, not a hot path): "
                "copy device shards to the host first", fn);
  return zcollSuccess;
}

// Elements of this rank's buddy copy on `comm` for shards of `count` elements.
size_t buddyCopyElements(const zcollComm* comm, int rank, size_t count) {
  return comm->layout.wardsOf(rank).size() * count;
}

Result needsTwoNodes(const zcollComm* comm, const char* fn) {
  if (comm->layout.nodes >= 2) return zcollSuccess;
  return fail(zcollInvalidUsage, "%s: a buddy copy lives on another node, and communicator %s "
              "has one", fn, comm->name.c_str());
}

// The old communicator's layout and members: oldComm's (pinned while read; it may be revoked or
// broken), or with oldComm NULL what newComm kept of the comm zcollCommShrink made it from.
Result readOldMembers(const char* fn, zcollComm* oldComm, const zcollComm* newComm,
                      OldMembers* out) {
  if (oldComm == nullptr) {
    if (newComm->parentMemberIds.empty())
      return fail(zcollInvalidArgument, "%s: oldComm is NULL and newComm was not made by "
                  "zcollCommShrink (pass the communicator the shards were partitioned over)",
                  fn);
    out->layout = newComm->parentLayout;
    out->ids = newComm->parentMemberIds;
    return zcollSuccess;
  }
  if (oldComm == newComm)
    return fail(zcollInvalidArgument, "%s: oldComm and newComm are the same communicator", fn);
  const Pin pin = pinComm(oldComm);
  if (pin != Pin::kPinned) return notPinned(pin, oldComm, fn);
  *out = oldMembersOf(oldComm);
  unpinComm(oldComm);
  return zcollSuccess;
}

struct RebuildArgs {
  CopyKind kind;
  const void* primary;
  const void* copy;
  size_t count;
  void* newPrimary;
  size_t newCount;
  size_t total;
  zcollDataType_t dtype;
};

// Sizes, buffers and their kind, in the order a user fixes them.
Result checkRebuildArgs(const char* fn, const RebuildArgs& a, const OldMembers& old,
                        const zcollComm* comm, int oldRank, zcollStream_t stream) {
  ZCOLL_CHECK(checkDtype(a.dtype, fn));
  const size_t es = dtypeSize(a.dtype);
  const int oldRanks = static_cast<int>(old.ids.size());
  ZCOLL_CHECK(checkSize(a.count, oldRanks, es, fn));
  ZCOLL_CHECK(checkSize(a.newCount, comm->nranks, es, fn));
  if (a.total > a.count * oldRanks)
    return fail(zcollInvalidArgument, "%s: totalCount %zu is more than oldComm's %d ranks hold "
                "(count %zu each)", fn, a.total, oldRanks, a.count);
  if (a.total > a.newCount * comm->nranks)
    return fail(zcollInvalidArgument, "%s: newCount %zu on each of the %d ranks of newComm "
                "cannot hold totalCount %zu", fn, a.newCount, comm->nranks, a.total);
  const bool secondary = a.kind == CopyKind::kSecondary;
  const char* copyName = secondary ? "secondary" : "buddyCopy";
  const size_t copyElems = secondary ? old.layout.nodes * a.count
                                     : old.layout.wardsOf(oldRank).size() * a.count;
  if (!secondary) ZCOLL_CHECK(checkBuffer(a.primary, a.count, "primary", fn));
  ZCOLL_CHECK(checkBuffer(a.copy, copyElems, copyName, fn));
  ZCOLL_CHECK(checkBuffer(a.newPrimary, a.newCount, "newPrimary", fn));
  const void* bufs[] = {a.count ? a.primary : nullptr, copyElems ? a.copy : nullptr,
                        a.newCount ? a.newPrimary : nullptr};
  const char* names[] = {"primary", copyName, "newPrimary"};
  ZCOLL_CHECK(checkHostMemory(bufs, names, 3, stream, fn));
  if (a.newCount == 0) return zcollSuccess;
  ZCOLL_CHECK(checkOverlap(a.newPrimary, a.newCount * es, a.copy, copyElems * es, fn,
                           "newPrimary must not overlap the copy"));
  if (a.primary == nullptr) return zcollSuccess;
  return checkOverlap(a.newPrimary, a.newCount * es, a.primary, a.count * es, fn,
                      "newPrimary must not overlap primary");
}

zcollResult_t rebuild(const char* fn, const RebuildArgs& a, zcollComm* oldComm,
                      zcollComm* newComm, zcollStream_t stream) {
  return commCall(newComm, fn, [&]() -> Result {
    ZCOLL_CHECK(refuseInGroup(fn));
    OldMembers old;
    ZCOLL_CHECK(readOldMembers(fn, oldComm, newComm, &old));
    std::vector<int> newToOld;
    ZCOLL_CHECK(oldRanksOf(fn, old, newComm, &newToOld));
    ZCOLL_CHECK(checkRebuildArgs(fn, a, old, newComm, newToOld[newComm->rank], stream));
    RebuildShape shape;
    shape.count = a.count;
    shape.newCount = a.newCount;
    shape.total = a.total;
    shape.kind = a.kind;
    shape.primaries = a.kind == CopyKind::kBuddy || a.primary != nullptr;
    FlightEntry entry;
    entry.op = a.kind == CopyKind::kSecondary ? "rebuild_from_secondary" : "rebuild_from_buddy";
    entry.algorithm = "plan";
    entry.count = a.newCount;
    entry.dtype = a.dtype;
    RecordedOp record(newComm, entry);
    ZCOLL_CHECK(record.finish(rebuildShards(fn, old, newComm, newToOld, shape,
                                            {a.primary, a.copy, a.newPrimary, a.dtype})));
    newComm->stats.ops.fetch_add(1, std::memory_order_relaxed);
    return zcollSuccess;
  });
}

}  // namespace

extern "C" {

zcollResult_t zcollBuddyCopyCount(const zcollComm_t comm, size_t count, size_t* copyCount) {
  const char* fn = "zcollBuddyCopyCount";
  return commCall(comm, fn, [&]() -> Result {
    if (copyCount == nullptr) return fail(zcollInvalidArgument, "%s: copyCount is NULL", fn);
    ZCOLL_CHECK(needsTwoNodes(comm, fn));
    ZCOLL_CHECK(checkSize(count, comm->nranks, 1, fn));
    *copyCount = buddyCopyElements(comm, comm->rank, count);
    return zcollSuccess;
  });
}

zcollResult_t zcollBuddyCopy(const void* sendbuff, void* buddyCopy, size_t count,
                             zcollDataType_t datatype, zcollComm_t comm, zcollStream_t stream) {
  const char* fn = "zcollBuddyCopy";
  return commCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(refuseInGroup(fn));
    ZCOLL_CHECK(checkDtype(datatype, fn));
    ZCOLL_CHECK(needsTwoNodes(comm, fn));
    const size_t es = dtypeSize(datatype);
    ZCOLL_CHECK(checkSize(count, comm->nranks, es, fn));
    const size_t copyElems = buddyCopyElements(comm, comm->rank, count);
    ZCOLL_CHECK(checkBuffer(sendbuff, count, "sendbuff", fn));
    ZCOLL_CHECK(checkBuffer(buddyCopy, copyElems, "buddyCopy", fn));
    const void* bufs[] = {count ? sendbuff : nullptr, copyElems ? buddyCopy : nullptr};
    const char* names[] = {"sendbuff", "buddyCopy"};
    ZCOLL_CHECK(checkHostMemory(bufs, names, 2, stream, fn));
    ZCOLL_CHECK(checkOverlap(sendbuff, count * es, buddyCopy, copyElems * es, fn,
                             "buddyCopy must not overlap sendbuff"));
    if (count == 0) return zcollSuccess;
    FlightEntry entry;
    entry.op = "buddy_copy";
    entry.algorithm = "next_node";
    entry.count = count;
    entry.dtype = datatype;
    RecordedOp record(comm, entry);
    ZCOLL_CHECK(record.finish(zcoll::buddyCopy(comm, sendbuff, buddyCopy, count * es)));
    comm->stats.ops.fetch_add(1, std::memory_order_relaxed);
    return zcollSuccess;
  });
}

zcollResult_t zcollRebuildFromSecondary(const void* primary, const void* secondary, size_t count,
                                        void* newPrimary, size_t newCount, size_t totalCount,
                                        zcollDataType_t datatype, zcollComm_t oldComm,
                                        zcollComm_t newComm, zcollStream_t stream) {
  return rebuild("zcollRebuildFromSecondary",
                 {CopyKind::kSecondary, primary, secondary, count, newPrimary, newCount,
                  totalCount, datatype},
                 oldComm, newComm, stream);
}

zcollResult_t zcollRebuildFromBuddy(const void* primary, const void* buddyCopy, size_t count,
                                    void* newPrimary, size_t newCount, size_t totalCount,
                                    zcollDataType_t datatype, zcollComm_t oldComm,
                                    zcollComm_t newComm, zcollStream_t stream) {
  return rebuild("zcollRebuildFromBuddy",
                 {CopyKind::kBuddy, primary, buddyCopy, count, newPrimary, newCount, totalCount,
                  datatype},
                 oldComm, newComm, stream);
}

}  // extern "C"
