// ZCOLL_NCCL_QUANTIZE=allgather:int8,reducescatter:int4[,allreduce:int8][,min=BYTES]: unmodified
// NCCL calls quantized (opt-in). Plain ncclAllGather of a floating type (Float32, Float16,
// Bfloat16) runs qwZ at the given bits, ncclReduceScatter with Sum or Avg runs qgZ (both hops
// at the given bits), ncclAllReduce with Sum or Avg runs zcoll's quantized all-reduce; never
// integer or Float64 data, other ops or PreMulSum, nor calls below min bytes per rank (the
// send buffer). Read once per process, logged once at INFO; a value it cannot parse fails every
// init with ncclInvalidArgument naming it.
#pragma once

#include <nccl.h>

#include <cstddef>

#include "choice.h"

namespace zcoll_nccl {

ncclResult_t checkQuantizePolicy();

// Sets `choice` from the policy for a call without explicit options (left plain otherwise).
void applyQuantizePolicy(CollKind kind, ncclDataType_t type, ncclRedOp_t op, size_t sendBytes,
                         Choice* choice);

}  // namespace zcoll_nccl
