// NCCL's collectives over zcoll's: AllGather, ReduceScatter, AllReduce (with zcoll's ZeRO++
// algorithms when the call's vendor options or ZCOLL_NCCL_QUANTIZE ask), Broadcast, Bcast,
// Reduce, AlltoAll, Gather, Scatter, and NCCL 2.31's nccl*Config forms of each.
#include <nccl.h>

#include <vector>

#include "comm.h"
#include "config_ext.h"
#include "errors.h"
#include "fallback.h"
#include "premulsum.h"
#include "quantize_policy.h"
#include "types.h"

using namespace zcoll_nccl;

namespace {

ncclResult_t done(ncclComm_t comm, zcollResult_t r) { return fromZcoll(r, comm->z); }

ncclResult_t checkType(ncclDataType_t t, const char* call) {
  if (t < 0 || t >= ncclNumTypes)
    return fail(ncclInvalidArgument, "%s: datatype %d is not an NCCL datatype", call,
                static_cast<int>(t));
  return ncclSuccess;
}

// Everything a call needs before it runs: a ready comm, a known datatype, its config read.
ncclResult_t prepare(ncclComm_t comm, ncclDataType_t t, const ncclCollConfig_t* config,
                     CollKind kind, const char* call, Choice* choice) {
  ncclResult_t r = readyComm(comm, call);
  if (r == ncclSuccess) r = checkType(t, call);
  if (r == ncclSuccess) r = readCollConfig(config, kind, call, choice);
  return r;
}

// The secondary an hpZ call fills or reads: the caller's (ZCOLL_NCCL_OPT_HPZ_SECONDARY), else
// the one zcoll keeps for (recvbuff, sendcount, datatype) on comm, made by a forward call.
ncclResult_t secondaryFor(ncclComm_t comm, const Choice& c, const void* recvbuff,
                          size_t sendcount, ncclDataType_t t, bool forward, void** out) {
  *out = c.secondary;
  if (*out != nullptr) return ncclSuccess;
  std::lock_guard<std::mutex> lock(comm->mutex);
  auto key = std::make_tuple(recvbuff, sendcount, static_cast<int>(t));
  auto it = comm->secondaries.find(key);
  if (!forward) {
    if (it == comm->secondaries.end())
      return fail(ncclInvalidUsage, "ncclAllGatherConfig (hpZ from secondary): no forward hpZ "
                  "call kept a secondary for this output buffer, count and datatype on this comm "
                  "(docs/NCCL.md, \"hpZ's secondary\")");
    *out = it->second.data();
    return ncclSuccess;
  }
  size_t count = 0;
  zcollResult_t zr = zcollSecondaryShardCount(comm->z, sendcount, &count);
  if (zr != zcollSuccess) return fromZcoll(zr, comm->z);
  std::vector<unsigned char>& kept = comm->secondaries[key];
  kept.resize(count * typeSize(t));
  *out = kept.data();
  return ncclSuccess;
}

// The reducing collectives' input: the op resolved (a PreMulSum op to its sum), and the send
// buffer pre-multiplied into scratch when the op asks (in() then points there; the scratch is
// given back when this goes, after the collective is issued).
struct ReducedInput {
  ReducedInput(ncclComm_t comm, cudaStream_t stream) : scaled(comm, stream) {}
  ResolvedOp op;
  PreMultiplied scaled;
  const void* in() const { return scaled.in(); }
};

ncclResult_t reducedInput(ncclComm_t comm, ncclRedOp_t op, ncclDataType_t t, const void* sendbuff,
                          size_t count, const char* call, ReducedInput* out) {
  ncclResult_t r = resolveOp(comm, op, t, call, &out->op);
  if (r != ncclSuccess) return r;
  return out->scaled.prepare(out->op, sendbuff, count, t, call);
}

ncclResult_t allGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t t,
                       ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config,
                       const char* call) {
  Choice c;
  ncclResult_t r = prepare(comm, t, config, CollKind::kAllGather, call, &c);
  if (r != ncclSuccess) return r;
  applyQuantizePolicy(CollKind::kAllGather, t, ncclSum, sendcount * typeSize(t), &c);
  const zcollDataType_t zt = movedType(t);
  const zcollQuantConfig_t* q = c.quant.bits != 0 ? &c.quant : nullptr;
  void* secondary = nullptr;
  switch (c.algo) {
    case Algo::kQwz:
      return done(comm, zcollQuantizedAllGather(sendbuff, recvbuff, sendcount, zt, &c.quant,
                                                comm->z, stream));
    case Algo::kHpz:
      if ((r = secondaryFor(comm, c, recvbuff, sendcount, t, true, &secondary)) != ncclSuccess)
        return r;
      return done(comm, zcollAllGatherHier(sendbuff, recvbuff, secondary, sendcount, zt, q,
                                           comm->z, stream));
    case Algo::kHpzFromSecondary:
      if ((r = secondaryFor(comm, c, recvbuff, sendcount, t, false, &secondary)) != ncclSuccess)
        return r;
      return done(comm, zcollAllGatherFromSecondary(secondary, recvbuff, sendcount, zt, comm->z,
                                                    stream));
    default:
      return done(comm, zcollAllGather(sendbuff, recvbuff, sendcount, zt, comm->z, stream));
  }
}

ncclResult_t reduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                           ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                           const ncclCollConfig_t* config, const char* call) {
  Choice c;
  ncclResult_t r = prepare(comm, t, config, CollKind::kReduceScatter, call, &c);
  if (r != ncclSuccess) return r;
  if (!servedType(t))
    return refuseOrForward(comm, "ncclReduceScatter on an FP8 datatype", [&](const FallbackApi& f,
                                                                           ncclComm_t fc) {
      return f.reduceScatter ? f.reduceScatter(sendbuff, recvbuff, recvcount, t, op, fc, stream)
                             : refuse(comm, "ncclReduceScatter on an FP8 datatype");
    });
  const size_t sendcount = recvcount * comm->nranks;
  ReducedInput x(comm, stream);
  if ((r = reducedInput(comm, op, t, sendbuff, sendcount, call, &x)) != ncclSuccess) return r;
  applyQuantizePolicy(CollKind::kReduceScatter, t, op, sendcount * typeSize(t), &c);
  if (c.algo == Algo::kQgz)
    return done(comm, zcollQuantizedReduceScatter(x.in(), recvbuff, recvcount, reducedType(t),
                                                  x.op.op, &c.quant, comm->z, stream));
  return done(comm, zcollReduceScatter(x.in(), recvbuff, recvcount, reducedType(t), x.op.op,
                                       comm->z, stream));
}

ncclResult_t allReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t t,
                       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                       const ncclCollConfig_t* config, const char* call) {
  Choice c;
  ncclResult_t r = prepare(comm, t, config, CollKind::kAllReduce, call, &c);
  if (r != ncclSuccess) return r;
  if (!servedType(t))
    return refuseOrForward(comm, "ncclAllReduce on an FP8 datatype", [&](const FallbackApi& f,
                                                                       ncclComm_t fc) {
      return f.allReduce ? f.allReduce(sendbuff, recvbuff, count, t, op, fc, stream)
                         : refuse(comm, "ncclAllReduce on an FP8 datatype");
    });
  ReducedInput x(comm, stream);
  if ((r = reducedInput(comm, op, t, sendbuff, count, call, &x)) != ncclSuccess) return r;
  applyQuantizePolicy(CollKind::kAllReduce, t, op, count * typeSize(t), &c);
  if (c.algo == Algo::kQuantizedAllReduce)
    return done(comm, zcollQuantizedAllReduce(x.in(), recvbuff, count, reducedType(t), x.op.op,
                                              &c.quant, comm->z, stream));
  return done(comm, zcollAllReduce(x.in(), recvbuff, count, reducedType(t), x.op.op, comm->z,
                                   stream));
}

ncclResult_t reduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t t,
                    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
                    const ncclCollConfig_t* config, const char* call) {
  Choice c;
  ncclResult_t r = prepare(comm, t, config, CollKind::kOther, call, &c);
  if (r != ncclSuccess) return r;
  if (!servedType(t))
    return refuseOrForward(comm, "ncclReduce on an FP8 datatype", [&](const FallbackApi& f,
                                                                    ncclComm_t fc) {
      return f.reduce ? f.reduce(sendbuff, recvbuff, count, t, op, root, fc, stream)
                      : refuse(comm, "ncclReduce on an FP8 datatype");
    });
  ReducedInput x(comm, stream);
  if ((r = reducedInput(comm, op, t, sendbuff, count, call, &x)) != ncclSuccess) return r;
  return done(comm, zcollReduce(x.in(), recvbuff, count, reducedType(t), x.op.op, root, comm->z,
                                stream));
}

// The collectives that only move bytes (FP8 moves as bytes).
ncclResult_t broadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t t,
                       int root, ncclComm_t comm, cudaStream_t stream,
                       const ncclCollConfig_t* config, const char* call) {
  Choice c;
  ncclResult_t r = prepare(comm, t, config, CollKind::kOther, call, &c);
  if (r != ncclSuccess) return r;
  return done(comm, zcollBroadcast(sendbuff, recvbuff, count, movedType(t), root, comm->z, stream));
}

ncclResult_t alltoall(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t t,
                      ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config,
                      const char* call) {
  Choice c;
  ncclResult_t r = prepare(comm, t, config, CollKind::kOther, call, &c);
  if (r != ncclSuccess) return r;
  return done(comm, zcollAllToAll(sendbuff, recvbuff, count, movedType(t), comm->z, stream));
}

ncclResult_t gather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t t,
                    int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config,
                    const char* call) {
  Choice c;
  ncclResult_t r = prepare(comm, t, config, CollKind::kOther, call, &c);
  if (r != ncclSuccess) return r;
  return done(comm, zcollGather(sendbuff, recvbuff, count, movedType(t), root, comm->z, stream));
}

ncclResult_t scatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t t,
                     int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config,
                     const char* call) {
  Choice c;
  ncclResult_t r = prepare(comm, t, config, CollKind::kOther, call, &c);
  if (r != ncclSuccess) return r;
  return done(comm, zcollScatter(sendbuff, recvbuff, count, movedType(t), root, comm->z, stream));
}

}  // namespace

extern "C" {

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return allGather(sendbuff, recvbuff, sendcount, datatype, comm, stream, nullptr, "ncclAllGather");
}
ncclResult_t ncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount,
                                 ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                 const ncclCollConfig_t* config) {
  return allGather(sendbuff, recvbuff, sendcount, datatype, comm, stream, config,
                   "ncclAllGatherConfig");
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return reduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream, nullptr,
                       "ncclReduceScatter");
}
ncclResult_t ncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                     cudaStream_t stream, const ncclCollConfig_t* config) {
  return reduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream, config,
                       "ncclReduceScatterConfig");
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return allReduce(sendbuff, recvbuff, count, datatype, op, comm, stream, nullptr, "ncclAllReduce");
}
ncclResult_t ncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                                 ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                 cudaStream_t stream, const ncclCollConfig_t* config) {
  return allReduce(sendbuff, recvbuff, count, datatype, op, comm, stream, config,
                   "ncclAllReduceConfig");
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream, nullptr, "ncclReduce");
}
ncclResult_t ncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                              ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                              cudaStream_t stream, const ncclCollConfig_t* config) {
  return reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream, config,
                "ncclReduceConfig");
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream, nullptr, "ncclBroadcast");
}
ncclResult_t ncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count,
                                 ncclDataType_t datatype, int root, ncclComm_t comm,
                                 cudaStream_t stream, const ncclCollConfig_t* config) {
  return broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream, config,
                   "ncclBroadcastConfig");
}
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream) {
  return broadcast(buff, buff, count, datatype, root, comm, stream, nullptr, "ncclBcast");
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return alltoall(sendbuff, recvbuff, count, datatype, comm, stream, nullptr, "ncclAlltoAll");
}
ncclResult_t ncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count,
                                ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                const ncclCollConfig_t* config) {
  return alltoall(sendbuff, recvbuff, count, datatype, comm, stream, config, "ncclAlltoAllConfig");
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return gather(sendbuff, recvbuff, count, datatype, root, comm, stream, nullptr, "ncclGather");
}
ncclResult_t ncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count,
                              ncclDataType_t datatype, int root, ncclComm_t comm,
                              cudaStream_t stream, const ncclCollConfig_t* config) {
  return gather(sendbuff, recvbuff, count, datatype, root, comm, stream, config, "ncclGatherConfig");
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return scatter(sendbuff, recvbuff, count, datatype, root, comm, stream, nullptr, "ncclScatter");
}
ncclResult_t ncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count,
                               ncclDataType_t datatype, int root, ncclComm_t comm,
                               cudaStream_t stream, const ncclCollConfig_t* config) {
  return scatter(sendbuff, recvbuff, count, datatype, root, comm, stream, config,
                 "ncclScatterConfig");
}

}  // extern "C"
