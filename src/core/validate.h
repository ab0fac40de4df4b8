// Argument checks shared by the collective entry points. Each returns zcollInvalidArgument
// (or zcollUnsupported for device buffers) with a message naming the argument.
#pragma once

#include <cstddef>

#include "core/comm.h"

namespace zcoll {

Result checkDtype(zcollDataType_t dtype, const char* fn);
Result checkOp(zcollRedOp_t op, const char* fn);
// NULL with elements to move; `elements` = what the buffer must hold.
Result checkBuffer(const void* buf, size_t elements, const char* what, const char* fn);
// Host buffers, NULL stream. Device buffers: zcollUnsupported until the device path lands.
Result checkHostCall(const void* send, const void* recv, zcollStream_t stream, const char* fn);
// total = a * b elements of `elemSize` bytes fits in size_t.
Result checkSize(size_t a, size_t b, size_t elemSize, const char* fn);
// [a, a+aBytes) and [b, b+bBytes) are disjoint, or a == b exactly (when allowed).
Result checkOverlap(const void* a, size_t aBytes, const void* b, size_t bBytes,
                    const char* fn, const char* rule);
// NCCL's in-place rules, for `bytes` per rank over `nranks`: an all-gather is in place exactly
// when send == recv + rank*bytes, a reduce-scatter when recv == send + rank*bytes; otherwise
// the buffers must be disjoint.
Result checkGatherInPlace(const void* send, const void* recv, size_t bytes, int rank, int nranks,
                          const char* fn);
Result checkScatterInPlace(const void* send, const void* recv, size_t bytes, int rank,
                           int nranks, const char* fn);
// Not inside zcollGroupStart/End (groups hold point-to-point operations only).
Result checkNotInGroup(const char* fn);

}  // namespace zcoll
