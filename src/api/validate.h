// Argument checks shared by the collective entry points. Each returns zcollInvalidArgument
// (or zcollUnsupported where this build or machine cannot serve the call) with a message naming
// the argument.
#pragma once

#include <cstddef>
#include <memory>

#include "core/comm.h"
#include "exec/executor.h"

namespace zcoll {

Result checkDtype(zcollDataType_t dtype, const char* fn);
Result checkOp(zcollRedOp_t op, const char* fn);
// NULL with elements to move; `elements` = what the buffer must hold.
Result checkBuffer(const void* buf, size_t elements, const char* what, const char* fn);
// The executor of a collective, from its buffers' memory kind.
struct CallExecutor {
  std::unique_ptr<Executor> owned;
  Executor* exec = &hostExecutor();
};
// Host buffers with a NULL stream: the host executor. Device (CUDA) buffers: a CUDA executor on
// `stream` (NULL: the default stream). The buffers given (NULL ones are skipped) must all be of
// one kind. `names` name them in messages ("sendbuff", "recvbuff", ...).
Result checkCallMemory(const void* const* bufs, const char* const* names, int n,
                       zcollStream_t stream, const char* fn, CallExecutor* out);
Result checkCallMemory(const void* send, const void* recv, zcollStream_t stream, const char* fn,
                       CallExecutor* out);
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
// Refuses a call that blocks the calling thread (zcollBarrier) inside zcollGroupStart/End; a
// group holds collectives (launchCall keeps them for zcollGroupEnd) and sends and receives.
Result refuseInGroup(const char* fn);

}  // namespace zcoll
