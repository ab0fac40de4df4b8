// ZCOLL_NCCL_FALLBACK=<path to a real libnccl.so.2>: calls zcoll cannot serve go to that NCCL.
// It is loaded once per process (dlopen RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND, so its own names
// resolve inside it, never to ours), and every communicator gets one of its own on it at init,
// made from a unique id the fallback makes on rank 0 and zcoll broadcasts over its own comm.
#pragma once

#include <nccl.h>

#include <string>

namespace zcoll_nccl {

// The fallback library's entry points (NULL when not loaded).
struct FallbackApi {
  ncclResult_t (*getUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*commInitRank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*commDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*commAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*allReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*reduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int,
                         ncclComm_t, cudaStream_t) = nullptr;
  const char* (*getLastError)(ncclComm_t) = nullptr;
};

// The loaded fallback (loaded at the first call), or NULL when ZCOLL_NCCL_FALLBACK is unset or
// failed to load (*why says why: the dlopen error).
const FallbackApi* fallback(std::string* why);

// Makes comm's fallback communicator (collective over comm's zcoll ranks: every rank calls it
// when the variable is set). A failure leaves comm->fallbackComm NULL and the reason in
// comm->fallbackError (logged as a warning); the zcoll communicator is unaffected.
void makeFallbackComm(ncclComm_t comm);
void destroyFallbackComm(ncclComm_t comm, bool abort);

// The fallback communicator of a child of ncclCommSplit, ncclCommShrink or ncclCommGrow: made as
// an init's is, from a fresh id over the child's zcoll comm, whose ranks all take part in the
// call that made it. (Not the fallback's own split or shrink of the parent's fallback comm: that
// needs the parent's fallback comm on every parent rank and healthy, which a shrink after a
// failure cannot count on, and ncclCommShrink exists only from NCCL 2.27.) Inside a group (a
// grouped ncclCommSplit) zcoll's broadcast would be grouped too, so it is made at the outermost
// ncclGroupEnd, after the group's calls (groups.h).
void makeChildFallbackComm(ncclComm_t child);

// A call zcoll does not serve: forwarded to comm's fallback communicator when there is one,
// else ncclInvalidUsage with a ncclGetLastError text naming `what` (and why no fallback).
template <typename Call>
ncclResult_t refuseOrForward(ncclComm_t comm, const char* what, Call call);

ncclResult_t refuse(ncclComm_t comm, const char* what);

}  // namespace zcoll_nccl

#include "comm.h"

template <typename Call>
ncclResult_t zcoll_nccl::refuseOrForward(ncclComm_t comm, const char* what, Call call) {
  std::string why;
  const FallbackApi* api = fallback(&why);
  if (api == nullptr || comm == nullptr || comm->fallbackComm == nullptr) return refuse(comm, what);
  return call(*api, static_cast<ncclComm_t>(comm->fallbackComm));
}
