// ncclRedOpCreatePreMulSum / ncclRedOpDestroy: an operator that multiplies each rank's input by
// that rank's scalar, then sums. zcoll serves it by scaling the input into a scratch copy (in the
// data type, the product rounded once) and running the collective with Sum on it: host buffers
// only (docs/NCCL.md says why not device buffers yet).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <vector>

#include "zcoll/zcoll.h"

namespace zcoll_nccl {

// A call's reduction, resolved: zcoll's op, and for PreMulSum the scaled copy of the input.
struct ResolvedOp {
  zcollRedOp_t op = zcollSum;
  bool preMul = false;
  double scalar = 1.0;
};

// Resolves `op` for a call on `comm` with `type` (ncclInvalidArgument naming `call` for an op
// that is neither built in nor a live PreMulSum of this comm and type).
ncclResult_t resolveOp(ncclComm_t comm, ncclRedOp_t op, ncclDataType_t type, const char* call,
                       ResolvedOp* out);

// For a PreMulSum: copies `count` elements of `src` scaled by op.scalar into *scratch and
// returns it; otherwise returns src unchanged. ncclInvalidUsage when the process has device
// support (the buffers may be device memory zcoll cannot scale from the host).
ncclResult_t preMultiply(const ResolvedOp& op, const void* src, size_t count, ncclDataType_t type,
                         const char* call, std::vector<unsigned char>* scratch, const void** out);

}  // namespace zcoll_nccl
