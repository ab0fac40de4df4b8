// NCCL's data types and reduction operators as zcoll's (the same numbering for the ones both
// have).
#pragma once

#include <nccl.h>

#include <cstddef>

#include "zcoll/zcoll.h"

namespace zcoll_nccl {

// Whether zcoll has the type (every NCCL type but the two FP8 ones).
bool servedType(ncclDataType_t t);
// The type for calls that only move bytes: FP8 moves as Uint8.
zcollDataType_t movedType(ncclDataType_t t);
zcollDataType_t reducedType(ncclDataType_t t);
size_t typeSize(ncclDataType_t t);
bool floatType(ncclDataType_t t);
bool builtinOp(ncclRedOp_t op);
const char* typeName(ncclDataType_t t);

}  // namespace zcoll_nccl
