// NCCL 2.28's device API (nccl_device.h) host calls: zcoll runs no NCCL device kernels, so
// these are refused with ncclInvalidUsage and a ncclGetLastError text naming the call. (The
// ones returning a value rather than a result, ncclTeam* and ncclLLA2ACalcSlots, are not
// exported: nothing could say they failed.) Argument types are opaque here: none is read.
#include <nccl.h>

#include "errors.h"

using namespace zcoll_nccl;

namespace {
ncclResult_t deviceApi(const char* call) {
  return fail(ncclInvalidUsage, "%s (NCCL's device API) is not served by zcoll: it runs no NCCL "
              "device kernels (docs/NCCL.md)", call);
}
struct OpaqueTeam {
  int nRanks, rank, stride;
};
}  // namespace

extern "C" {

ncclResult_t ncclDevCommCreate(ncclComm_t, const void*, void*) {
  return deviceApi("ncclDevCommCreate");
}
ncclResult_t ncclDevCommDestroy(ncclComm_t, const void*) { return deviceApi("ncclDevCommDestroy"); }
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t, OpaqueTeam, int, void*, void*) {
  return deviceApi("ncclGinBarrierCreateRequirement");
}
ncclResult_t ncclLLA2ACreateRequirement(int, int, void*, void*) {
  return deviceApi("ncclLLA2ACreateRequirement");
}
ncclResult_t ncclLsaBarrierCreateRequirement(OpaqueTeam, int, void*, void*) {
  return deviceApi("ncclLsaBarrierCreateRequirement");
}

}  // extern "C"
