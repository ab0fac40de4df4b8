// Public C API: zcollQuantizedAllReduce, with and without error feedback, and the size of the
// residual buffer (coll/quantized_allreduce.h). Validates the arguments in the order a user
// would fix them, resolves the quantization settings (defaults: INT8 on every step) and qgZ's
// pipeline depth for one chunk, then runs the default algorithm for the size (exact below the
// threshold, collectives.cc).
#include <cstddef>
#include <string>

#include "api/call_check.h"
#include "api/guard.h"
#include "api/launch.h"
#include "api/validate.h"
#include "base/dtype.h"
#include "coll/qgz.h"
#include "coll/quantized_allreduce.h"
#include "trigger/collectives.h"

using namespace zcoll;

namespace {

// Defaults (docs/ZEROPP.md "Quantized all-reduce"): INT8 on both of qgZ's hops and the gather.
constexpr int kDefaultAllReduceBits = 8;

Result checkQarOp(zcollRedOp_t op, const char* fn) {
  if (op == zcollSum || op == zcollAvg) return zcollSuccess;
  return fail(zcollInvalidArgument, "%s: reduction op %s (%d) is not supported: zcollSum or "
              "zcollAvg only (other ops have no error bound under quantization)", fn,
              opName(op), static_cast<int>(op));
}

struct Residual {
  void* buf = nullptr;
  size_t bytes = 0;
  bool asked = false;
};

Result checkResidual(const zcollComm* comm, const Residual& r, size_t count, const void* send,
                     const void* recv, size_t bytes, const char* fn) {
  if (!r.asked) return zcollSuccess;
  const size_t want = qarSplit(comm, count).residualBytes();
  if (r.buf == nullptr && want > 0)
    return fail(zcollInvalidArgument, "%s: residual is NULL, but error feedback needs a buffer "
                "of %zu bytes (zcollQuantizedAllReduceResidualSize)", fn, want);
  if (r.bytes != want)
    return fail(zcollInvalidArgument, "%s: residualBytes is %zu, but the residual buffer for "
                "count %zu on this communicator is %zu bytes "
                "(zcollQuantizedAllReduceResidualSize)", fn, r.bytes, count, want);
  if (want == 0) return zcollSuccess;
  ZCOLL_CHECK(checkOverlap(r.buf, want, send, bytes, fn, "residual must not overlap sendbuff"));
  return checkOverlap(r.buf, want, recv, bytes, fn, "residual must not overlap recvbuff");
}

Result checkArgs(const char* fn, const void* send, void* recv, size_t count,
                 zcollDataType_t dtype, zcollRedOp_t op, const zcollComm* comm,
                 const Residual& res, zcollStream_t stream, CallExecutor* ce) {
  ZCOLL_CHECK(checkQuantDtype(dtype, fn));
  ZCOLL_CHECK(checkQarOp(op, fn));
  ZCOLL_CHECK(checkSize(count, 1, dtypeSize(dtype), fn));
  ZCOLL_CHECK(checkBuffer(send, count, "sendbuff", fn));
  ZCOLL_CHECK(checkBuffer(recv, count, "recvbuff", fn));
  const size_t bytes = count * dtypeSize(dtype);
  ZCOLL_CHECK(checkResidual(comm, res, count, send, recv, bytes, fn));
  const void* bufs[] = {count ? send : nullptr, count ? recv : nullptr,
                        count && res.asked ? res.buf : nullptr};
  const char* names[] = {"sendbuff", "recvbuff", "residual"};
  ZCOLL_CHECK(checkCallMemory(bufs, names, 3, stream, fn, ce));
  if (send == recv) return zcollSuccess;
  return checkOverlap(send, bytes, recv, bytes, fn, "in place only when sendbuff == recvbuff");
}

// The call as a stream-triggered collective (api/launch.h) when the comm has a ring: the exact
// algorithm as zcollAllReduce's (across nodes too), qgz_then_qwz on one node when qgZ picks a
// two-hop algorithm for the chunks (a forced flat one quantizes at other bits; across nodes the
// second hop's requantization has no triggered form). It owns a copy of the settings (a grouped
// call runs at zcollGroupEnd).
TriggeredWork onRing(const zcollComm* comm, const CollArgs& args, const QuantSettings& qs,
                     size_t bytes, const Executor& exec) {
  const Algorithm* algo = nullptr;
  if (!comm->trigger || bytes == 0 ||
      selectAlgorithm(comm, CollKind::kQuantizedAllReduce, bytes, exec.memKind(), &algo) !=
          zcollSuccess)
    return {};
  ReduceOrder order;  // the exact all-reduce's (all, or the tail), as zcollAllReduce's
  if (std::string(algo->name) == "exact") {
    if (!hostReduceOrder(comm, CollKind::kAllReduce, bytes, args.dtype, &order)) return {};
    return [args, order](TriggerRing& ring, Executor& ex) {
      return triggeredAllReduce(ring, ex, args, order);
    };
  }
  if (ringSpansNodes(comm)) return {};
  const QarSplit split = qarSplit(comm, args.count);
  const size_t chunkBytes = split.chunk * dtypeSize(args.dtype);
  if (chunkBytes > 0 && !qgzPicksTwoHop(comm, chunkBytes, exec.memKind())) return {};
  if (split.tail > 0 &&
      !hostReduceOrder(comm, CollKind::kAllReduce, split.tail * dtypeSize(args.dtype),
                       args.dtype, &order))
    return {};
  return [args, qs, order](TriggerRing& ring, Executor& ex) {
    CollArgs a = args;
    a.quant = &qs;
    return triggeredQuantizedAllReduce(ring, ex, a, order);
  };
}

zcollResult_t quantizedAllReduce(const char* fn, const void* send, void* recv, size_t count,
                                 zcollDataType_t dtype, zcollRedOp_t op,
                                 const zcollQuantConfig_t* quant, const Residual& res,
                                 zcollComm_t comm, zcollStream_t stream) {
  return collCall(comm, fn, [&]() -> Result {
    CallExecutor ce;
    ZCOLL_CHECK(checkArgs(fn, send, recv, count, dtype, op, comm, res, stream, &ce));
    QuantSettings qs;
    ZCOLL_CHECK(readQuantConfig(quant, kDefaultAllReduceBits, kDefaultAllReduceBits,
                                dtype, fn, &qs));
    const QarSplit split = qarSplit(comm, count);
    const int depth = qs.pipelineDepth != 0 ? qs.pipelineDepth : qgzDefaultDepth(split.chunk);
    CallDescriptor d = describeCall(CollKind::kQuantizedAllReduce, dtype, count, op);
    addQuantSettings(&d, qs.inter, qs.intra.bits, depth);
    CollArgs args{send, recv, count, dtype, op, -1};
    args.quant = &qs;
    args.pipelineDepth = depth;
    if (res.asked && split.residualBytes() > 0) {
      float* r = static_cast<float*>(res.buf);
      args.firstResidual = r;
      args.partialResidual = split.partialElems ? r + split.firstElems : nullptr;
      args.ownerResidual = r + split.firstElems + split.partialElems;
    }
    const size_t bytes = count * dtypeSize(dtype);
    return launchCall(comm, fn, ce, d,
                      algorithmWork(comm, CollKind::kQuantizedAllReduce, args, bytes),
                      onRing(comm, args, qs, bytes, *ce.exec));
  });
}

}  // namespace

extern "C" {

zcollResult_t zcollQuantizedAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                      zcollDataType_t datatype, zcollRedOp_t op,
                                      const zcollQuantConfig_t* quant, zcollComm_t comm,
                                      zcollStream_t stream) {
  return quantizedAllReduce("zcollQuantizedAllReduce", sendbuff, recvbuff, count, datatype, op,
                            quant, Residual{}, comm, stream);
}

zcollResult_t zcollQuantizedAllReduceWithResidual(const void* sendbuff, void* recvbuff,
                                                  size_t count, zcollDataType_t datatype,
                                                  zcollRedOp_t op,
                                                  const zcollQuantConfig_t* quant,
                                                  void* residual, size_t residualBytes,
                                                  zcollComm_t comm, zcollStream_t stream) {
  return quantizedAllReduce("zcollQuantizedAllReduceWithResidual", sendbuff, recvbuff, count,
                            datatype, op, quant, Residual{residual, residualBytes, true}, comm,
                            stream);
}

zcollResult_t zcollQuantizedAllReduceResidualSize(size_t count, zcollDataType_t datatype,
                                                  const zcollQuantConfig_t* quant,
                                                  zcollComm_t comm, size_t* bytes) {
  const char* fn = "zcollQuantizedAllReduceResidualSize";
  // A local query of the comm's layout: pinned, but not in the comm's order, so it returns at
  // once while calls are queued (a DDP hook asks it from a completion callback's thread).
  return pinnedCall(comm, fn, [&]() -> Result {
    if (bytes == nullptr) return fail(zcollInvalidArgument, "%s: bytes is NULL", fn);
    ZCOLL_CHECK(checkQuantDtype(datatype, fn));
    ZCOLL_CHECK(checkSize(count, sizeof(float), 2, fn));
    QuantSettings qs;
    ZCOLL_CHECK(readQuantConfig(quant, kDefaultAllReduceBits, kDefaultAllReduceBits,
                                datatype, fn, &qs));
    *bytes = qarSplit(comm, count).residualBytes();
    return zcollSuccess;
  });
}

}  // extern "C"
