/* A stand-in "real NCCL" for testing ZCOLL_NCCL_FALLBACK without a GPU: just enough of NCCL's
 * entry points for libzcoll_nccl.so to make communicators on it and forward an all-reduce, which
 * fills its output with 0x5a except bytes 1 and 2: the size and rank of the fallback
 * communicator it ran on, so the test sees the call arrived here, on which communicator. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>

struct StubComm {
  uint32_t magic;
  int nranks;
  int rank;
};
static const uint32_t kStubMagic = 0x5354u;

static struct StubComm* stubComm(ncclComm_t comm) {
  struct StubComm* c = (struct StubComm*)comm;
  return c != NULL && c->magic == kStubMagic ? c : NULL;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  memset(id, 0x42, sizeof(*id));
  return ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  if (id.internal[0] != 0x42 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  struct StubComm* c = (struct StubComm*)malloc(sizeof(*c));
  if (c == NULL) return ncclSystemError;
  c->magic = kStubMagic;
  c->nranks = nranks;
  c->rank = rank;
  *comm = (ncclComm_t)c;
  return ncclSuccess;
}
/* Destroy and abort share a static helper: under the sanitizers the stub is loaded without
 * RTLD_DEEPBIND (nccl/src/fallback.cc), so a call from here to the exported ncclCommDestroy would
 * bind to libzcoll_nccl.so's, which refuses the stub's handle and leaks it. */
static ncclResult_t freeComm(ncclComm_t comm) {
  struct StubComm* c = stubComm(comm);
  if (c == NULL) return ncclInvalidArgument;
  c->magic = 0;
  free(c);
  return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) { return freeComm(comm); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return freeComm(comm); }
ncclResult_t ncclAllReduce(const void* s, void* r, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  (void)s, (void)t, (void)op, (void)stream;
  struct StubComm* c = stubComm(comm);
  if (c == NULL || count < 3) return ncclInvalidArgument;
  memset(r, 0x5a, count);
  ((uint8_t*)r)[1] = (uint8_t)c->nranks;
  ((uint8_t*)r)[2] = (uint8_t)c->rank;
  return ncclSuccess;
}
const char* ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return "";
}
