#include "errors.h"

#include <cstdarg>
#include <cstdio>
#include <string>

namespace zcoll_nccl {
namespace {
thread_local std::string tLastError;
}  // namespace

ncclResult_t toNccl(zcollResult_t r) {
  switch (r) {
    case zcollSuccess: return ncclSuccess;
    case zcollSystemError: return ncclSystemError;
    case zcollInternalError: return ncclInternalError;
    case zcollInvalidArgument: return ncclInvalidArgument;
    case zcollInvalidUsage: return ncclInvalidUsage;
    case zcollRemoteError: return ncclRemoteError;
    case zcollInProgress: return ncclInProgress;
    case zcollTimeout: return ncclRemoteError;   // a peer that does not answer
    case zcollUnsupported: return ncclInvalidUsage;
    case zcollCudaError: return ncclUnhandledCudaError;
    default: return ncclInternalError;
  }
}

ncclResult_t fromZcoll(zcollResult_t r, zcollComm_t z) {
  if (r == zcollSuccess) return ncclSuccess;
  const char* text = zcollGetLastError(z);
  if (text == nullptr || *text == '\0') text = zcollGetLastError(nullptr);
  tLastError = std::string(zcollGetErrorString(r)) + ": " + (text ? text : "");
  return toNccl(r);
}

ncclResult_t fail(ncclResult_t code, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  tLastError = std::string("zcoll (NCCL API): ") + buf;
  return code;
}

const char* lastError() { return tLastError.c_str(); }

}  // namespace zcoll_nccl
