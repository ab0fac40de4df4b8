// ncclGetVersion (the NCCL version whose header this library implements), ncclGetErrorString,
// ncclGetLastError, ncclResetDebugInit.
#include <nccl.h>

#include "errors.h"

using namespace zcoll_nccl;

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with ZCOLL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with ZCOLL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the zcoll developers";
    case ncclInvalidArgument: return "invalid argument (run with ZCOLL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with ZCOLL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

// The calling thread's last failure (as NCCL, whatever the comm).
const char* ncclGetLastError(ncclComm_t) { return lastError(); }

void ncclResetDebugInit() {}

}  // extern "C"
