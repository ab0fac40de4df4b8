// NCCL's device API (nccl_device.h) host calls and one-sided calls (2.29+): zcoll runs no NCCL device kernels, so
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
ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t, size_t, void**) {
  return deviceApi("ncclGetLsaMultimemDevicePointer");
}
ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t, size_t, int, void**) {
  return deviceApi("ncclGetPeerDevicePointer");
}

// NCCL 2.29's one-sided calls: zcoll has no one-sided transfers into a peer's window.
ncclResult_t ncclPutSignal(const void*, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int,
                           int, unsigned int, ncclComm_t, cudaStream_t) {
  return fail(ncclInvalidUsage, "ncclPutSignal (one-sided) is not served by zcoll (docs/NCCL.md)");
}
ncclResult_t ncclSignal(int, int, int, unsigned int, ncclComm_t, cudaStream_t) {
  return fail(ncclInvalidUsage, "ncclSignal (one-sided) is not served by zcoll (docs/NCCL.md)");
}
ncclResult_t ncclWaitSignal(int, void*, ncclComm_t, cudaStream_t) {
  return fail(ncclInvalidUsage, "ncclWaitSignal (one-sided) is not served by zcoll (docs/NCCL.md)");
}

ncclResult_t ncclLsaBarrierCreateRequirement(OpaqueTeam, int, void*, void*) {
  return deviceApi("ncclLsaBarrierCreateRequirement");
}

}  // extern "C"
