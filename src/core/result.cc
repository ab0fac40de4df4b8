#include "core/result.h"

#include <cstdarg>
#include <cstdio>

namespace zcoll {

namespace {
thread_local std::string tLastError;
}

Result fail(Result code, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  tLastError = std::string(resultName(code)) + ": " + msg;
  ZCOLL_WARN(LogSubsys::kCore, "%s", tLastError.c_str());
  return code;
}

const std::string& threadLastError() { return tLastError; }
void clearThreadLastError() { tLastError.clear(); }

const char* resultName(Result r) {
  switch (r) {
    case zcollSuccess: return "zcollSuccess";
    case zcollSystemError: return "zcollSystemError";
    case zcollInternalError: return "zcollInternalError";
    case zcollInvalidArgument: return "zcollInvalidArgument";
    case zcollInvalidUsage: return "zcollInvalidUsage";
    case zcollRemoteError: return "zcollRemoteError";
    case zcollInProgress: return "zcollInProgress";
    case zcollTimeout: return "zcollTimeout";
    case zcollUnsupported: return "zcollUnsupported";
    case zcollCudaError: return "zcollCudaError";
    default: return "zcollUnknownResult";
  }
}

}  // namespace zcoll
