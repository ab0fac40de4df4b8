// Public C API: the standard collectives. Each entry point validates its arguments (in the
// order a user would fix them), then runs the selected algorithm.
#include <algorithm>
#include <utility>
#include <vector>

#include "api/call_check.h"
#include "api/guard.h"
#include "api/launch.h"
#include "api/validate.h"
#include "base/dtype.h"
#include "coll/coll.h"
#include "trigger/collectives.h"

using namespace zcoll;

namespace {

// Common checks: dtype, buffers, their memory kind and the stream (which
// give the call's executor).
Result checkCommon(const char* fn, const void* send, size_t sendElems, const void* recv,
                   size_t recvElems, zcollDataType_t dtype, zcollStream_t stream,
                   CallExecutor* ce) {
  ZCOLL_CHECK(checkDtype(dtype, fn));
  ZCOLL_CHECK(checkBuffer(send, sendElems, "sendbuff", fn));
  ZCOLL_CHECK(checkBuffer(recv, recvElems, "recvbuff", fn));
  // A buffer this rank does not use (a broadcast's sendbuff off the root, ...) is not looked at.
  return checkCallMemory(sendElems ? send : nullptr, recvElems ? recv : nullptr, stream, fn, ce);
}

Result checkRoot(int root, int nranks, const char* fn) {
  if (root < 0 || root >= nranks)
    return fail(zcollInvalidArgument, "%s: root %d must be in [0, %d)", fn, root, nranks);
  return zcollSuccess;
}

// All-to-all-v arguments: the four arrays, no size_t overflow, blocks inside their buffers,
// receive blocks disjoint, the block to itself the same size both ways. Sets the spans the
// blocks cover (elements from the buffer's start).
Result checkAllToAllvLayout(const zcollComm* comm, const size_t* sc, const size_t* sd,
                            const size_t* rc, const size_t* rd, size_t es, size_t* sendSpan,
                            size_t* recvSpan, const char* fn) {
  const struct { const size_t* p; const char* name; } arrays[] = {
      {sc, "sendcounts"}, {sd, "sdispls"}, {rc, "recvcounts"}, {rd, "rdispls"}};
  for (const auto& a : arrays)
    if (a.p == nullptr) return fail(zcollInvalidArgument, "%s: %s is NULL", fn, a.name);
  const int w = comm->nranks;
  const size_t maxElems = es == 0 ? SIZE_MAX : SIZE_MAX / es;
  *sendSpan = *recvSpan = 0;
  std::vector<std::pair<size_t, size_t>> recvBlocks;  // [start, end) of non-empty blocks
  for (int p = 0; p < w; ++p) {
    if (sc[p] > maxElems || sd[p] > maxElems - sc[p] || rc[p] > maxElems || rd[p] > maxElems - rc[p])
      return fail(zcollInvalidArgument, "%s: the block for rank %d overflows the address space",
                  fn, p);
    if (sc[p] > 0) *sendSpan = std::max(*sendSpan, sd[p] + sc[p]);
    if (rc[p] > 0) {
      *recvSpan = std::max(*recvSpan, rd[p] + rc[p]);
      recvBlocks.emplace_back(rd[p], rd[p] + rc[p]);
    }
  }
  if (sc[comm->rank] != rc[comm->rank])
    return fail(zcollInvalidArgument,
                "%s: rank %d sends itself %zu elements (sendcounts[%d]) but expects %zu "
                "(recvcounts[%d])", fn, comm->rank, sc[comm->rank], comm->rank, rc[comm->rank],
                comm->rank);
  std::sort(recvBlocks.begin(), recvBlocks.end());
  for (size_t i = 1; i < recvBlocks.size(); ++i)
    if (recvBlocks[i].first < recvBlocks[i - 1].second)
      return fail(zcollInvalidArgument,
                  "%s: receive blocks overlap (elements %zu..%zu and %zu..%zu of recvbuff)", fn,
                  recvBlocks[i - 1].first, recvBlocks[i - 1].second, recvBlocks[i].first,
                  recvBlocks[i].second);
  return zcollSuccess;
}

// The call as a stream-triggered collective (api/launch.h), none for a call that moves nothing.
TriggeredWork onRing(Result (*collective)(TriggerRing&, Executor&, const CollArgs&), CollArgs a,
                     size_t bytes) {
  if (bytes == 0) return {};
  return [collective, a](TriggerRing& ring, Executor& ex) { return collective(ring, ex, a); };
}

// A reduction as a stream-triggered collective summing in the host path's order for the call
// (trigger/reduce_order.h): none where the host's algorithm is one it cannot reproduce.
TriggeredWork onRing(const zcollComm* comm, CollKind kind,
                     Result (*collective)(TriggerRing&, Executor&, const CollArgs&,
                                          const ReduceOrder&),
                     CollArgs a, size_t bytes) {
  ReduceOrder order;
  if (bytes == 0 || !comm->trigger || !hostReduceOrder(comm, kind, bytes, a.dtype, &order))
    return {};
  return [collective, a, order](TriggerRing& ring, Executor& ex) {
    return collective(ring, ex, a, order);
  };
}

}  // namespace

extern "C" {

zcollResult_t zcollAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                             zcollDataType_t datatype, zcollComm_t comm, zcollStream_t stream) {
  const char* fn = "zcollAllGather";
  return collCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkSize(sendcount, comm->nranks, dtypeSize(datatype), fn));
    CallExecutor ce;
    ZCOLL_CHECK(checkCommon(fn, sendbuff, sendcount, recvbuff, sendcount * comm->nranks, datatype,
                            stream, &ce));
    const size_t bytes = sendcount * dtypeSize(datatype);
    ZCOLL_CHECK(checkGatherInPlace(sendbuff, recvbuff, bytes, comm->rank, comm->nranks, fn));
    const CallDescriptor d = describeCall(CollKind::kAllGather, datatype, sendcount);
    return launchCall(comm, fn, ce, d,
                      algorithmWork(comm, CollKind::kAllGather,
                                    {sendbuff, recvbuff, sendcount, datatype, zcollSum, 0}, bytes),
                      onRing(triggeredAllGather, {sendbuff, recvbuff, sendcount, datatype, zcollSum, 0}, bytes));
  });
}

zcollResult_t zcollReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                 zcollDataType_t datatype, zcollRedOp_t op, zcollComm_t comm,
                                 zcollStream_t stream) {
  const char* fn = "zcollReduceScatter";
  return collCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkSize(recvcount, comm->nranks, dtypeSize(datatype), fn));
    CallExecutor ce;
    ZCOLL_CHECK(checkCommon(fn, sendbuff, recvcount * comm->nranks, recvbuff, recvcount, datatype,
                            stream, &ce));
    ZCOLL_CHECK(checkOp(op, fn));
    const size_t bytes = recvcount * dtypeSize(datatype);
    ZCOLL_CHECK(checkScatterInPlace(sendbuff, recvbuff, bytes, comm->rank, comm->nranks, fn));
    const CallDescriptor d = describeCall(CollKind::kReduceScatter, datatype, recvcount, op);
    return launchCall(comm, fn, ce, d,
                      algorithmWork(comm, CollKind::kReduceScatter,
                                    {sendbuff, recvbuff, recvcount, datatype, op, 0}, bytes),
                      onRing(comm, CollKind::kReduceScatter, triggeredReduceScatter, {sendbuff, recvbuff, recvcount, datatype, op, 0}, bytes));
  });
}

zcollResult_t zcollAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                             zcollDataType_t datatype, zcollRedOp_t op, zcollComm_t comm,
                             zcollStream_t stream) {
  const char* fn = "zcollAllReduce";
  return collCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkSize(count, 1, dtypeSize(datatype), fn));
    CallExecutor ce;
    ZCOLL_CHECK(checkCommon(fn, sendbuff, count, recvbuff, count, datatype, stream, &ce));
    ZCOLL_CHECK(checkOp(op, fn));
    const size_t bytes = count * dtypeSize(datatype);
    if (sendbuff != recvbuff)
      ZCOLL_CHECK(checkOverlap(sendbuff, bytes, recvbuff, bytes, fn,
                               "in place only when sendbuff == recvbuff"));
    const CallDescriptor d = describeCall(CollKind::kAllReduce, datatype, count, op);
    return launchCall(comm, fn, ce, d,
                      algorithmWork(comm, CollKind::kAllReduce,
                                    {sendbuff, recvbuff, count, datatype, op, 0}, bytes),
                      onRing(comm, CollKind::kAllReduce, triggeredAllReduce, {sendbuff, recvbuff, count, datatype, op, 0}, bytes));
  });
}

zcollResult_t zcollAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                            zcollDataType_t datatype, zcollComm_t comm, zcollStream_t stream) {
  const char* fn = "zcollAllToAll";
  return collCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkSize(count, comm->nranks, dtypeSize(datatype), fn));
    const size_t total = count * comm->nranks;
    CallExecutor ce;
    ZCOLL_CHECK(checkCommon(fn, sendbuff, total, recvbuff, total, datatype, stream, &ce));
    const size_t bytes = total * dtypeSize(datatype);
    ZCOLL_CHECK(checkOverlap(sendbuff, bytes, recvbuff, bytes, fn, "all-to-all is never in place"));
    const CallDescriptor d = describeCall(CollKind::kAllToAll, datatype, count);
    return launchCall(
        comm, fn, ce, d,
        algorithmWork(comm, CollKind::kAllToAll, {sendbuff, recvbuff, count, datatype, zcollSum, 0},
                      count * dtypeSize(datatype)));
  });
}

zcollResult_t zcollBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                             zcollDataType_t datatype, int root, zcollComm_t comm,
                             zcollStream_t stream) {
  const char* fn = "zcollBroadcast";
  return collCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkRoot(root, comm->nranks, fn));
    ZCOLL_CHECK(checkSize(count, 1, dtypeSize(datatype), fn));
    const size_t sendElems = comm->rank == root ? count : 0;  // sendbuff is read on root only
    CallExecutor ce;
    ZCOLL_CHECK(checkCommon(fn, sendbuff, sendElems, recvbuff, count, datatype, stream, &ce));
    const size_t bytes = count * dtypeSize(datatype);
    if (comm->rank == root && sendbuff != recvbuff)
      ZCOLL_CHECK(checkOverlap(sendbuff, bytes, recvbuff, bytes, fn,
                               "in place only when sendbuff == recvbuff"));
    const CallDescriptor d = describeCall(CollKind::kBroadcast, datatype, count, -1, root);
    return launchCall(comm, fn, ce, d,
                      algorithmWork(comm, CollKind::kBroadcast,
                                    {sendbuff, recvbuff, count, datatype, zcollSum, root}, bytes));
  });
}

zcollResult_t zcollReduce(const void* sendbuff, void* recvbuff, size_t count,
                          zcollDataType_t datatype, zcollRedOp_t op, int root, zcollComm_t comm,
                          zcollStream_t stream) {
  const char* fn = "zcollReduce";
  return collCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkRoot(root, comm->nranks, fn));
    ZCOLL_CHECK(checkSize(count, 1, dtypeSize(datatype), fn));
    const bool isRoot = comm->rank == root;
    CallExecutor ce;
    ZCOLL_CHECK(
        checkCommon(fn, sendbuff, count, recvbuff, isRoot ? count : 0, datatype, stream, &ce));
    ZCOLL_CHECK(checkOp(op, fn));
    const size_t bytes = count * dtypeSize(datatype);
    if (isRoot && sendbuff != recvbuff)
      ZCOLL_CHECK(checkOverlap(sendbuff, bytes, recvbuff, bytes, fn,
                               "in place only when sendbuff == recvbuff"));
    const CallDescriptor d = describeCall(CollKind::kReduce, datatype, count, op, root);
    return launchCall(comm, fn, ce, d,
                      algorithmWork(comm, CollKind::kReduce,
                                    {sendbuff, recvbuff, count, datatype, op, root}, bytes));
  });
}

zcollResult_t zcollGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                          zcollDataType_t datatype, int root, zcollComm_t comm,
                          zcollStream_t stream) {
  const char* fn = "zcollGather";
  return collCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkRoot(root, comm->nranks, fn));
    ZCOLL_CHECK(checkSize(sendcount, comm->nranks, dtypeSize(datatype), fn));
    const bool isRoot = comm->rank == root;
    CallExecutor ce;
    ZCOLL_CHECK(checkCommon(fn, sendbuff, sendcount, recvbuff,
                            isRoot ? sendcount * comm->nranks : 0, datatype, stream, &ce));
    const size_t bytes = sendcount * dtypeSize(datatype);
    if (isRoot)
      ZCOLL_CHECK(checkGatherInPlace(sendbuff, recvbuff, bytes, comm->rank, comm->nranks, fn));
    const CallDescriptor d = describeCall(CollKind::kGather, datatype, sendcount, -1, root);
    return launchCall(
        comm, fn, ce, d,
        algorithmWork(comm, CollKind::kGather,
                      {sendbuff, recvbuff, sendcount, datatype, zcollSum, root}, bytes));
  });
}

zcollResult_t zcollScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                           zcollDataType_t datatype, int root, zcollComm_t comm,
                           zcollStream_t stream) {
  const char* fn = "zcollScatter";
  return collCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkRoot(root, comm->nranks, fn));
    ZCOLL_CHECK(checkSize(recvcount, comm->nranks, dtypeSize(datatype), fn));
    const bool isRoot = comm->rank == root;
    CallExecutor ce;
    ZCOLL_CHECK(checkCommon(fn, sendbuff, isRoot ? recvcount * comm->nranks : 0, recvbuff,
                            recvcount, datatype, stream, &ce));
    const size_t bytes = recvcount * dtypeSize(datatype);
    if (isRoot)
      ZCOLL_CHECK(checkScatterInPlace(sendbuff, recvbuff, bytes, comm->rank, comm->nranks, fn));
    const CallDescriptor d = describeCall(CollKind::kScatter, datatype, recvcount, -1, root);
    return launchCall(
        comm, fn, ce, d,
        algorithmWork(comm, CollKind::kScatter,
                      {sendbuff, recvbuff, recvcount, datatype, zcollSum, root}, bytes));
  });
}

zcollResult_t zcollAllToAllv(const void* sendbuff, const size_t sendcounts[],
                             const size_t sdispls[], void* recvbuff, const size_t recvcounts[],
                             const size_t rdispls[], zcollDataType_t datatype, zcollComm_t comm,
                             zcollStream_t stream) {
  const char* fn = "zcollAllToAllv";
  return collCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkDtype(datatype, fn));
    const size_t es = dtypeSize(datatype);
    size_t sendSpan = 0, recvSpan = 0;
    ZCOLL_CHECK(checkAllToAllvLayout(comm, sendcounts, sdispls, recvcounts, rdispls, es, &sendSpan,
                                     &recvSpan, fn));
    CallExecutor ce;
    ZCOLL_CHECK(checkCommon(fn, sendbuff, sendSpan, recvbuff, recvSpan, datatype, stream, &ce));
    ZCOLL_CHECK(checkOverlap(sendbuff, sendSpan * es, recvbuff, recvSpan * es, fn,
                             "all-to-all-v is never in place"));
    // Every rank runs the exchange, even with nothing to send or receive: ranks whose counts
    // are all zero still take part in the stage sequence, and mismatches show up.
    CollArgs args{sendbuff, recvbuff, 0, datatype, zcollSum, 0};
    args.sendCounts = sendcounts;
    args.sendDispls = sdispls;
    args.recvCounts = recvcounts;
    args.recvDispls = rdispls;
    return launchCall(comm, fn, ce, describeCall(CollKind::kAllToAllv, datatype, 0),
                      algorithmWork(comm, CollKind::kAllToAllv, args, 0));
  });
}

zcollResult_t zcollBarrier(zcollComm_t comm, zcollStream_t stream) {
  const char* fn = "zcollBarrier";
  return commCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(refuseInGroup(fn));
    if (stream != nullptr)
      return fail(zcollInvalidArgument, "%s: stream must be NULL (the barrier blocks the calling "
                  "thread; it orders no stream)", fn);
    ZCOLL_CHECK(checkCallMatches(comm, describeBarrier(),
                                 hostExecutor(), fn));
    FlightEntry entry;
    entry.op = "barrier";
    entry.algorithm = "dissemination";
    RecordedOp record(comm, entry);
    ZCOLL_CHECK(record.finish(barrierDissemination(comm)));
    comm->stats.ops.fetch_add(1, std::memory_order_relaxed);
    return zcollSuccess;
  });
}

}  // extern "C"
