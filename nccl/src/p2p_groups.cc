// ncclSend/ncclRecv and the group calls (ncclGroupStart/End, ncclGroupSimulateEnd) over zcoll's:
// a group may mix collectives and send/recv (zcoll runs the collectives in call order, then the
// point-to-point operations together), and may hold inits (groups.h).
#include <nccl.h>

#include <functional>
#include <utility>
#include <vector>

#include "comm.h"
#include "errors.h"
#include "fallback.h"
#include "groups.h"
#include "types.h"

using namespace zcoll_nccl;

namespace {

thread_local int tDepth = 0;
thread_local std::vector<ncclComm_t> tDeferredInits;
thread_local std::vector<ncclComm_t> tDeferredFallbacks;
thread_local std::vector<std::function<void()>> tReleases;

ncclResult_t p2pChecks(ncclComm_t comm, ncclDataType_t t, const char* call) {
  ncclResult_t r = readyComm(comm, call);
  if (r != ncclSuccess) return r;
  if (t < 0 || t >= ncclNumTypes)
    return fail(ncclInvalidArgument, "%s: datatype %d is not an NCCL datatype", call,
                static_cast<int>(t));
  return ncclSuccess;
}

// Waits for the inits started inside the group that ends; the first failure is the result.
ncclResult_t finishDeferredInits() {
  ncclResult_t first = ncclSuccess;
  std::vector<ncclComm_t> inits;
  inits.swap(tDeferredInits);
  for (ncclComm_t c : inits) {
    ncclResult_t r = readyComm(c, "ncclGroupEnd (a grouped ncclCommInitRank)");
    if (r != ncclSuccess && first == ncclSuccess) first = r;
  }
  return first;
}

// What the group's calls needed until zcollGroupEnd issued them (releaseAtGroupEnd).
void runReleases() {
  std::vector<std::function<void()>> releases;
  releases.swap(tReleases);
  for (auto& release : releases) release();
}

// The fallback communicators of the children split inside the group that ended (fallback.h),
// each rank in the order it made them, as every rank of a child made it in the same order.
void finishDeferredFallbacks() {
  std::vector<ncclComm_t> children;
  children.swap(tDeferredFallbacks);
  for (ncclComm_t c : children)
    if (liveComm(c)) makeFallbackComm(c);
}

}  // namespace

namespace zcoll_nccl {
int groupDepth() { return tDepth; }
void deferToGroupEnd(ncclComm_t comm) { tDeferredInits.push_back(comm); }
void deferFallbackToGroupEnd(ncclComm_t child) { tDeferredFallbacks.push_back(child); }
void releaseAtGroupEnd(std::function<void()> release) { tReleases.push_back(std::move(release)); }
}  // namespace zcoll_nccl

extern "C" {

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t r = p2pChecks(comm, datatype, "ncclSend");
  if (r != ncclSuccess) return r;
  return fromZcoll(zcollSend(sendbuff, count, movedType(datatype), peer, comm->z, stream), comm->z);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t r = p2pChecks(comm, datatype, "ncclRecv");
  if (r != ncclSuccess) return r;
  return fromZcoll(zcollRecv(recvbuff, count, movedType(datatype), peer, comm->z, stream), comm->z);
}

ncclResult_t ncclGroupStart() {
  zcollResult_t r = zcollGroupStart();
  if (r != zcollSuccess) return fromZcoll(r, nullptr);
  ++tDepth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (tDepth == 0)
    return fail(ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart to end on this thread");
  --tDepth;
  ncclResult_t inits = tDepth == 0 ? finishDeferredInits() : ncclSuccess;
  zcollResult_t r = zcollGroupEnd();
  if (tDepth == 0) {
    runReleases();
    finishDeferredFallbacks();
  }
  if (r != zcollSuccess) return fromZcoll(r, nullptr);
  return inits;
}

// zcoll has no cost model to simulate a group with: refused, as docs/NCCL.md lists.
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  (void)simInfo;
  return fail(ncclInvalidUsage, "ncclGroupSimulateEnd is not served by zcoll (it has no cost "
              "model to estimate a group's time); end the group with ncclGroupEnd");
}

}  // extern "C"
