// Public C API: the ZeRO++ all-gathers, qwZ (zcollQuantizedAllGather) and hpZ
// (zcollSecondaryShardCount, zcollAllGatherHier, zcollAllGatherFromSecondary). Each entry point
// checks its arguments in the order a user would fix them, then runs its algorithm
// (coll/qwz_allgather.cc, coll/hpz_allgather.cc).
#include "api/call_check.h"
#include "api/guard.h"
#include "api/launch.h"
#include "api/validate.h"
#include "base/dtype.h"
#include "coll/zeropp_allgather.h"
#include "coll/zeropp_config.h"
#include "trigger/collectives.h"

using namespace zcoll;

namespace {

// Not in a group, dtype (one that can be quantized when `quantized`, else any), buffers (the
// input one named `sendName`, and hpZ's secondary shard when given), their memory kind and the
// stream (which give the call's executor).
Result checkArgs(const char* fn, bool quantized, const void* send, const char* sendName,
                 size_t sendElems, const void* recv, size_t recvElems, zcollDataType_t dtype,
                 zcollStream_t stream, CallExecutor* ce, const void* secondary = nullptr) {
  ZCOLL_CHECK(quantized ? checkQuantDtype(dtype, fn) : checkDtype(dtype, fn));
  ZCOLL_CHECK(checkBuffer(send, sendElems, sendName, fn));
  ZCOLL_CHECK(checkBuffer(recv, recvElems, "recvbuff", fn));
  const void* bufs[] = {sendElems ? send : nullptr, recvElems ? recv : nullptr, secondary};
  const char* names[] = {sendName, "recvbuff", "secondary"};
  return checkCallMemory(bufs, names, 3, stream, fn, ce);
}


Result checkUniform(const zcollComm* comm, const char* fn) {
  if (comm->layout.uniform()) return zcollSuccess;
  return fail(zcollInvalidUsage,
              "%s: hpZ needs the same number of ranks on every node (%d nodes, "
              "rank %d's node has %d); use zcollQuantizedAllGather or zcollAllGather instead",
              fn, comm->layout.nodes, comm->rank, comm->layout.localSize(comm->rank));
}

// Secondary shard: nodes*count elements, disjoint from send and recv.
Result checkSecondary(const zcollComm* comm, const void* secondary, const void* send,
                      const void* recv, size_t count, zcollDataType_t dtype, const char* fn) {
  const size_t es = dtypeSize(dtype);
  const size_t secBytes = comm->layout.nodes * count * es;
  if (secondary == nullptr) return zcollSuccess;
  ZCOLL_CHECK(checkOverlap(secondary, secBytes, recv, count * comm->nranks * es, fn,
                           "secondary must not overlap recvbuff"));
  return checkOverlap(secondary, secBytes, send, count * es, fn,
                      "secondary must not overlap sendbuff");
}

}  // namespace

extern "C" {

zcollResult_t zcollQuantizedAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                      zcollDataType_t datatype, const zcollQuantConfig_t* quant,
                                      zcollComm_t comm, zcollStream_t stream) {
  const char* fn = "zcollQuantizedAllGather";
  return collCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkSize(sendcount, comm->nranks, 4, fn));
    CallExecutor ce;
    ZCOLL_CHECK(checkArgs(fn, true, sendbuff, "sendbuff", sendcount, recvbuff,
                          sendcount * comm->nranks, datatype, stream, &ce));
    QuantSettings qs;
    ZCOLL_CHECK(readQuantConfig(quant, kDefaultAllGatherBits, kDefaultAllGatherBits,
                                datatype, fn, &qs));
    ZCOLL_CHECK(checkGatherInPlace(sendbuff, recvbuff, sendcount * dtypeSize(datatype), comm->rank,
                                   comm->nranks, fn));
    CallDescriptor d = describeCall(CollKind::kQuantizedAllGather, datatype, sendcount);
    addQuantSettings(&d, qs.inter, 0, 0);
    CollArgs a{sendbuff, recvbuff, sendcount, datatype, zcollSum, -1};
    a.quant = &qs;
    const size_t bytes = sendcount * dtypeSize(datatype);
    TriggeredWork onRing;  // owns a copy of the settings: a grouped call runs at zcollGroupEnd
    if (bytes > 0)
      onRing = [a, qs](TriggerRing& ring, Executor& ex) {
        CollArgs args = a;
        args.quant = &qs;
        return triggeredQuantizedAllGather(ring, ex, args);
      };
    return launchCall(comm, fn, ce, d, algorithmWork(comm, CollKind::kQuantizedAllGather, a, bytes),
                      onRing);
  });
}

zcollResult_t zcollSecondaryShardCount(const zcollComm_t comm, size_t sendcount, size_t* count) {
  const char* fn = "zcollSecondaryShardCount";
  return commCall(comm, fn, [&]() -> Result {
    if (count == nullptr) return fail(zcollInvalidArgument, "%s: count is NULL", fn);
    ZCOLL_CHECK(checkSize(sendcount, comm->layout.nodes, 4, fn));
    *count = sendcount * comm->layout.nodes;
    return zcollSuccess;
  });
}

zcollResult_t zcollAllGatherHier(const void* sendbuff, void* recvbuff, void* secondary,
                                 size_t sendcount, zcollDataType_t datatype,
                                 const zcollQuantConfig_t* quant, zcollComm_t comm,
                                 zcollStream_t stream) {
  const char* fn = "zcollAllGatherHier";
  return collCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkSize(sendcount, comm->nranks, 4, fn));
    CallExecutor ce;
    ZCOLL_CHECK(checkArgs(fn, quant != nullptr, sendbuff, "sendbuff", sendcount, recvbuff,
                          sendcount * comm->nranks, datatype, stream, &ce, secondary));
    QuantSettings qs;
    if (quant != nullptr)
      ZCOLL_CHECK(readQuantConfig(quant, kDefaultAllGatherBits, kDefaultAllGatherBits,
                                  datatype, fn, &qs));
    ZCOLL_CHECK(checkUniform(comm, fn));
    ZCOLL_CHECK(checkGatherInPlace(sendbuff, recvbuff, sendcount * dtypeSize(datatype), comm->rank,
                                   comm->nranks, fn));
    ZCOLL_CHECK(checkSecondary(comm, secondary, sendbuff, recvbuff, sendcount, datatype, fn));
    CallDescriptor d = describeCall(CollKind::kAllGatherHier, datatype, sendcount);
    if (quant != nullptr) addQuantSettings(&d, qs.inter, 0, 0);
    CollArgs a{sendbuff, recvbuff, sendcount, datatype, zcollSum, -1};
    a.quant = quant != nullptr ? &qs : nullptr;
    a.secondary = secondary;
    const size_t bytes = sendcount * dtypeSize(datatype);
    TriggeredWork onRing;  // owns a copy of the settings: a grouped call runs at zcollGroupEnd
    if (bytes > 0)
      onRing = [a, qs, quantized = quant != nullptr](TriggerRing& ring, Executor& ex) {
        CollArgs args = a;
        args.quant = quantized ? &qs : nullptr;
        return triggeredAllGatherHier(ring, ex, args);
      };
    return launchCall(comm, fn, ce, d, algorithmWork(comm, CollKind::kAllGatherHier, a, bytes),
                      onRing);
  });
}

zcollResult_t zcollAllGatherFromSecondary(const void* secondary, void* recvbuff, size_t sendcount,
                                          zcollDataType_t datatype, zcollComm_t comm,
                                          zcollStream_t stream) {
  const char* fn = "zcollAllGatherFromSecondary";
  return collCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkSize(sendcount, comm->nranks, 4, fn));
    const size_t secElems = sendcount * comm->layout.nodes;
    CallExecutor ce;
    ZCOLL_CHECK(checkArgs(fn, false, secondary, "secondary", secElems, recvbuff,
                          sendcount * comm->nranks, datatype, stream, &ce));
    ZCOLL_CHECK(checkUniform(comm, fn));
    const size_t es = dtypeSize(datatype);
    ZCOLL_CHECK(checkOverlap(secondary, secElems * es, recvbuff, sendcount * comm->nranks * es, fn,
                             "secondary must not overlap recvbuff"));
    const CallDescriptor d = describeCall(CollKind::kAllGatherFromSecondary, datatype, sendcount);
    const CollArgs a{secondary, recvbuff, sendcount, datatype, zcollSum, -1};
    TriggeredWork onRing;
    if (sendcount > 0)
      onRing = [a](TriggerRing& ring, Executor& ex) {
        return triggeredAllGatherFromSecondary(ring, ex, a);
      };
    return launchCall(comm, fn, ce, d,
                      algorithmWork(comm, CollKind::kAllGatherFromSecondary, a, sendcount * es),
                      onRing);
  });
}

}  // extern "C"
