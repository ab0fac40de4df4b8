/* A stand-in "real NCCL" for testing ZCOLL_NCCL_FALLBACK without a GPU: just enough of NCCL's
 * entry points for libzcoll_nccl.so to make a communicator on it and forward an all-reduce,
 * which fills its output with 0x5a so the test sees the call arrived here. */
#include <stdint.h>
#include <string.h>

#include <nccl.h>

static int gComm;

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  memset(id, 0x42, sizeof(*id));
  return ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  (void)nranks, (void)id, (void)rank;
  *comm = (ncclComm_t)&gComm;
  return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) { return comm == (ncclComm_t)&gComm ? ncclSuccess : ncclInvalidArgument; }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }
ncclResult_t ncclAllReduce(const void* s, void* r, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  (void)s, (void)t, (void)op, (void)stream;
  if (comm != (ncclComm_t)&gComm) return ncclInvalidArgument;
  memset(r, 0x5a, count);
  return ncclSuccess;
}
const char* ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return "";
}
