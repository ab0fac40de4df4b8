// The queries only libzcoll_nccl.so has (zcoll/zcoll_nccl.h): the zcoll communicator under an
// NCCL one, and its byte counters.
#include <nccl.h>

#include "comm.h"
#include "errors.h"
#include "zcoll/zcoll_nccl.h"

using namespace zcoll_nccl;

extern "C" {

ncclResult_t ncclZcollCommGetZcoll(ncclComm_t comm, zcollComm_t* zcomm) {
  ncclResult_t r = readyComm(comm, "ncclZcollCommGetZcoll");
  if (r != ncclSuccess) return r;
  if (zcomm == nullptr) return fail(ncclInvalidArgument, "ncclZcollCommGetZcoll: zcomm is NULL");
  *zcomm = comm->z;
  return ncclSuccess;
}

ncclResult_t ncclZcollCommGetStats(ncclComm_t comm, zcollStats_t* stats) {
  ncclResult_t r = readyComm(comm, "ncclZcollCommGetStats");
  if (r != ncclSuccess) return r;
  return fromZcoll(zcollCommGetStats(comm->z, stats), comm->z);
}

ncclResult_t ncclZcollCommResetStats(ncclComm_t comm) {
  ncclResult_t r = readyComm(comm, "ncclZcollCommResetStats");
  if (r != ncclSuccess) return r;
  return fromZcoll(zcollCommResetStats(comm->z), comm->z);
}

}  // extern "C"
