// NCCL's result codes for zcoll's, and the thread's last-error text (ncclGetLastError).
#pragma once

#include <nccl.h>

#include "zcoll/zcoll.h"

namespace zcoll_nccl {

ncclResult_t toNccl(zcollResult_t r);

// Records zcoll's last error (of `z`, or the thread's) as this thread's text; returns the code.
ncclResult_t fromZcoll(zcollResult_t r, zcollComm_t z);

// Records a text of libzcoll_nccl.so's own ("zcoll (NCCL API): ...") and returns `code`.
ncclResult_t fail(ncclResult_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

const char* lastError();

}  // namespace zcoll_nccl
