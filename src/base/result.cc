#include "base/result.h"

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

Result failWithContext(Result code, const char* context) {
  std::string msg = tLastError;
  for (int r = 0; r < zcollNumResults; ++r) {  // drop the previous code prefix
    std::string prefix = std::string(resultName(static_cast<Result>(r))) + ": ";
    if (msg.rfind(prefix, 0) == 0) {
      msg.erase(0, prefix.size());
      break;
    }
  }
  return fail(code, "%s: %s", context, msg.c_str());
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
