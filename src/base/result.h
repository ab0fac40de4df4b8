// Error plumbing: a result code travels up, each level can add context to the log, and the
// outermost C entry point records a message that zcollGetLastError returns.
#pragma once

#include <string>

#include "zcoll/zcoll.h"

namespace zcoll {

using Result = zcollResult_t;

// Records `msg` as the calling thread's last error and logs it at WARN. Returns `code`, so a
// failure site reads: return fail(zcollInvalidArgument, "count %zu too large", n);
Result fail(Result code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Re-records the calling thread's last failure with `context` (e.g. the public function's name)
// in front of its message, keeping one code prefix: "zcollInvalidArgument: fn: what". Returns
// `code`, which becomes the message's code.
Result failWithContext(Result code, const char* context);

// The calling thread's last error message ("" if none), and a way to clear it.
const std::string& threadLastError();
void clearThreadLastError();

const char* resultName(Result r);

}  // namespace zcoll

// Propagates a non-success result, leaving a "file:line -> code" trail at TRACE level.
#define ZCOLL_CHECK(expr)                                                              \
  do {                                                                                 \
    ::zcoll::Result zcoll_res_ = (expr);                                               \
    if (zcoll_res_ != zcollSuccess) {                                                  \
      ZCOLL_TRACE_LOG(::zcoll::LogSubsys::kCore, "%s:%d -> %s", __FILE__, __LINE__,    \
                      ::zcoll::resultName(zcoll_res_));                                \
      return zcoll_res_;                                                               \
    }                                                                                  \
  } while (0)

#include "base/log.h"
