// Public C API: the standard collectives. Each entry point validates its arguments (in the
// order a user would fix them), then runs the selected algorithm.
#include "coll/coll.h"
#include "core/api_guard.h"
#include "core/call_check.h"
#include "core/dtype.h"
#include "core/validate.h"

using namespace zcoll;

namespace {

Result runAlgorithm(zcollComm* comm, CollKind kind, const CollArgs& args, size_t bytesPerRank) {
  const Algorithm* algo = nullptr;
  ZCOLL_CHECK(selectAlgorithm(kind, bytesPerRank, comm->nranks, &algo));
  ZCOLL_TRACE_LOG(LogSubsys::kColl, "%s rank %d: %s/%s count %zu %s", comm->name.c_str(),
                  comm->rank, collKindName(kind), algo->name, args.count, dtypeName(args.dtype));
  ZCOLL_CHECK(algo->run(comm, args));
  comm->stats.ops.fetch_add(1, std::memory_order_relaxed);
  return zcollSuccess;
}

// Common checks: dtype, op (if any), buffers, host call, not in a group, sizes.
Result checkCommon(const char* fn, const void* send, size_t sendElems, const void* recv,
                   size_t recvElems, zcollDataType_t dtype, zcollStream_t stream) {
  ZCOLL_CHECK(checkNotInGroup(fn));
  ZCOLL_CHECK(checkDtype(dtype, fn));
  ZCOLL_CHECK(checkBuffer(send, sendElems, "sendbuff", fn));
  ZCOLL_CHECK(checkBuffer(recv, recvElems, "recvbuff", fn));
  return checkHostCall(send, recv, stream, fn);
}

}  // namespace

extern "C" {

zcollResult_t zcollAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                             zcollDataType_t datatype, zcollComm_t comm, zcollStream_t stream) {
  const char* fn = "zcollAllGather";
  return commCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkSize(sendcount, comm->nranks, dtypeSize(datatype), fn));
    ZCOLL_CHECK(checkCommon(fn, sendbuff, sendcount, recvbuff, sendcount * comm->nranks, datatype,
                            stream));
    const size_t bytes = sendcount * dtypeSize(datatype);
    ZCOLL_CHECK(checkGatherInPlace(sendbuff, recvbuff, bytes, comm->rank, comm->nranks, fn));
    ZCOLL_CHECK(checkCallMatches(comm, describeCall(CallKind::kAllGather, datatype, sendcount), fn));
    if (sendcount == 0) return zcollSuccess;
    return runAlgorithm(comm, CollKind::kAllGather,
                        {sendbuff, recvbuff, sendcount, datatype, zcollSum, 0}, bytes);
  });
}

zcollResult_t zcollReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                 zcollDataType_t datatype, zcollRedOp_t op, zcollComm_t comm,
                                 zcollStream_t stream) {
  const char* fn = "zcollReduceScatter";
  return commCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkSize(recvcount, comm->nranks, dtypeSize(datatype), fn));
    ZCOLL_CHECK(checkCommon(fn, sendbuff, recvcount * comm->nranks, recvbuff, recvcount, datatype,
                            stream));
    ZCOLL_CHECK(checkOp(op, fn));
    const size_t bytes = recvcount * dtypeSize(datatype);
    ZCOLL_CHECK(checkScatterInPlace(sendbuff, recvbuff, bytes, comm->rank, comm->nranks, fn));
    ZCOLL_CHECK(checkCallMatches(
        comm, describeCall(CallKind::kReduceScatter, datatype, recvcount, op), fn));
    if (recvcount == 0) return zcollSuccess;
    return runAlgorithm(comm, CollKind::kReduceScatter,
                        {sendbuff, recvbuff, recvcount, datatype, op, 0}, bytes);
  });
}

zcollResult_t zcollAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                             zcollDataType_t datatype, zcollRedOp_t op, zcollComm_t comm,
                             zcollStream_t stream) {
  const char* fn = "zcollAllReduce";
  return commCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkSize(count, 1, dtypeSize(datatype), fn));
    ZCOLL_CHECK(checkCommon(fn, sendbuff, count, recvbuff, count, datatype, stream));
    ZCOLL_CHECK(checkOp(op, fn));
    const size_t bytes = count * dtypeSize(datatype);
    if (sendbuff != recvbuff)
      ZCOLL_CHECK(checkOverlap(sendbuff, bytes, recvbuff, bytes, fn,
                               "in place only when sendbuff == recvbuff"));
    ZCOLL_CHECK(checkCallMatches(comm, describeCall(CallKind::kAllReduce, datatype, count, op), fn));
    if (count == 0) return zcollSuccess;
    return runAlgorithm(comm, CollKind::kAllReduce, {sendbuff, recvbuff, count, datatype, op, 0},
                        bytes);
  });
}

zcollResult_t zcollAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                            zcollDataType_t datatype, zcollComm_t comm, zcollStream_t stream) {
  const char* fn = "zcollAllToAll";
  return commCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkSize(count, comm->nranks, dtypeSize(datatype), fn));
    const size_t total = count * comm->nranks;
    ZCOLL_CHECK(checkCommon(fn, sendbuff, total, recvbuff, total, datatype, stream));
    const size_t bytes = total * dtypeSize(datatype);
    ZCOLL_CHECK(checkOverlap(sendbuff, bytes, recvbuff, bytes, fn, "all-to-all is never in place"));
    ZCOLL_CHECK(checkCallMatches(comm, describeCall(CallKind::kAllToAll, datatype, count), fn));
    if (count == 0) return zcollSuccess;
    return runAlgorithm(comm, CollKind::kAllToAll, {sendbuff, recvbuff, count, datatype, zcollSum, 0},
                        count * dtypeSize(datatype));
  });
}

zcollResult_t zcollBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                             zcollDataType_t datatype, int root, zcollComm_t comm,
                             zcollStream_t stream) {
  const char* fn = "zcollBroadcast";
  return commCall(comm, fn, [&]() -> Result {
    if (root < 0 || root >= comm->nranks)
      return fail(zcollInvalidArgument, "%s: root %d must be in [0, %d)", fn, root, comm->nranks);
    ZCOLL_CHECK(checkSize(count, 1, dtypeSize(datatype), fn));
    const size_t sendElems = comm->rank == root ? count : 0;  // sendbuff is read on root only
    ZCOLL_CHECK(checkCommon(fn, sendbuff, sendElems, recvbuff, count, datatype, stream));
    const size_t bytes = count * dtypeSize(datatype);
    if (comm->rank == root && sendbuff != recvbuff)
      ZCOLL_CHECK(checkOverlap(sendbuff, bytes, recvbuff, bytes, fn,
                               "in place only when sendbuff == recvbuff"));
    ZCOLL_CHECK(checkCallMatches(
        comm, describeCall(CallKind::kBroadcast, datatype, count, -1, root), fn));
    if (count == 0) return zcollSuccess;
    return runAlgorithm(comm, CollKind::kBroadcast, {sendbuff, recvbuff, count, datatype, zcollSum, root},
                        bytes);
  });
}

zcollResult_t zcollBarrier(zcollComm_t comm, zcollStream_t stream) {
  const char* fn = "zcollBarrier";
  return commCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkNotInGroup(fn));
    ZCOLL_CHECK(checkHostCall(nullptr, nullptr, stream, fn));
    ZCOLL_CHECK(checkCallMatches(comm, describeCall(CallKind::kBarrier, zcollUint8, 0), fn));
    ZCOLL_CHECK(barrierDissemination(comm));
    comm->stats.ops.fetch_add(1, std::memory_order_relaxed);
    return zcollSuccess;
  });
}

}  // extern "C"
