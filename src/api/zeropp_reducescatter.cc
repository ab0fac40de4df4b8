// Public C API: zcollQuantizedReduceScatter (qgZ). Validates the arguments (in the order a user
// would fix them), resolves the quantization settings and the pipeline depth, then runs the
// hierarchical algorithm, or the flat one when nodes hold unequal rank counts.
#include <cstddef>

#include "api/call_check.h"
#include "api/guard.h"
#include "api/launch.h"
#include "api/validate.h"
#include "base/dtype.h"
#include "base/log.h"
#include "coll/qgz.h"
#include "coll/zeropp_config.h"
#include "trigger/collectives.h"

using namespace zcoll;

namespace {

Result checkQgzOp(zcollRedOp_t op, const char* fn) {
  if (op != zcollSum && op != zcollAvg)
    return fail(zcollInvalidArgument, "%s: reduction op %d is not supported (zcollSum or "
                "zcollAvg only)", fn, static_cast<int>(op));
  return zcollSuccess;
}

Result checkArgs(const char* fn, const void* send, void* recv, size_t count,
                 zcollDataType_t dtype, zcollRedOp_t op, zcollComm* comm, zcollStream_t stream,
                 CallExecutor* ce) {
  ZCOLL_CHECK(checkQuantDtype(dtype, fn));
  ZCOLL_CHECK(checkQgzOp(op, fn));
  ZCOLL_CHECK(checkSize(count, comm->nranks, dtypeSize(dtype), fn));
  ZCOLL_CHECK(checkBuffer(send, count * comm->nranks, "sendbuff", fn));
  ZCOLL_CHECK(checkBuffer(recv, count, "recvbuff", fn));
  ZCOLL_CHECK(checkCallMemory(count ? send : nullptr, count ? recv : nullptr, stream, fn, ce));
  const size_t bytes = count * dtypeSize(dtype);
  return checkScatterInPlace(send, recv, bytes, comm->rank, comm->nranks, fn);
}

// The call as a stream-triggered collective (api/launch.h) when the comm has a ring and the
// algorithm selected is a two-hop one (a forced flat one quantizes at other bits); it owns a
// copy of the settings (a grouped call runs at zcollGroupEnd).
TriggeredWork onRing(const zcollComm* comm, const CollArgs& args, size_t bytes,
                     const Executor& exec) {
  if (!comm->trigger || ringSpansNodes(comm) || bytes == 0 ||
      !qgzPicksTwoHop(comm, bytes, exec.memKind()))
    return {};
  return [args, quant = *args.quant](TriggerRing& ring, Executor& ex) {
    CollArgs a = args;
    a.quant = &quant;
    return triggeredQuantizedReduceScatter(ring, ex, a);
  };
}

}  // namespace

extern "C" {

zcollResult_t zcollQuantizedReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                          zcollDataType_t datatype, zcollRedOp_t op,
                                          const zcollQuantConfig_t* quant, zcollComm_t comm,
                                          zcollStream_t stream) {
  const char* fn = "zcollQuantizedReduceScatter";
  return collCall(comm, fn, [&]() -> Result {
    CallExecutor ce;
    ZCOLL_CHECK(checkArgs(fn, sendbuff, recvbuff, recvcount, datatype, op, comm, stream, &ce));
    QgzArgs a{sendbuff, recvbuff, recvcount, datatype, op, {}, 1, &hostExecutor()};
    ZCOLL_CHECK(readQuantConfig(quant, kDefaultGradBits, kDefaultGradBits, datatype, fn, &a.quant));
    a.pipelineDepth = a.quant.pipelineDepth != 0 ? a.quant.pipelineDepth : qgzDefaultDepth(recvcount);
    CallDescriptor d = describeCall(CollKind::kQuantizedReduceScatter, datatype, recvcount, op);
    addQuantSettings(&d, a.quant.inter, a.quant.intra.bits, a.pipelineDepth);
    if (recvcount != 0 && !comm->layout.uniform())
      ZCOLL_INFO(LogSubsys::kColl, "%s rank %d: qgZ: nodes hold unequal rank counts, so the "
                 "two-hop algorithm cannot run; the default is flat", comm->name.c_str(),
                 comm->rank);
    CollArgs args{sendbuff, recvbuff, recvcount, datatype, op, -1};
    args.quant = &a.quant;
    args.pipelineDepth = a.pipelineDepth;
    const size_t bytes = recvcount * dtypeSize(datatype);
    return launchCall(comm, fn, ce, d,
                      algorithmWork(comm, CollKind::kQuantizedReduceScatter, args, bytes),
                      onRing(comm, args, bytes, *ce.exec));
  });
}

}  // extern "C"
