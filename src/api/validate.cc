#include "api/validate.h"

#include <cstdint>
#include <cstring>

#include "base/dtype.h"
#include "exec/device_component.h"

namespace zcoll {

bool inGroup();  // api/p2p.cc

Result checkDtype(zcollDataType_t dtype, const char* fn) {
  if (!dtypeValid(dtype))
    return fail(zcollInvalidArgument, "%s: invalid datatype %d", fn, static_cast<int>(dtype));
  return zcollSuccess;
}

Result checkOp(zcollRedOp_t op, const char* fn) {
  if (!opValid(op))
    return fail(zcollInvalidArgument, "%s: invalid reduction op %d", fn, static_cast<int>(op));
  return zcollSuccess;
}

Result checkBuffer(const void* buf, size_t elements, const char* what, const char* fn) {
  if (buf == nullptr && elements > 0)
    return fail(zcollInvalidArgument, "%s: %s is NULL with %zu elements", fn, what, elements);
  return zcollSuccess;
}

namespace {
const char* kindName(MemKind k) { return k == MemKind::kHost ? "host" : "device (CUDA)"; }
}  // namespace

Result checkCallMemory(const void* const* bufs, const char* const* names, int n,
                       zcollStream_t stream, const char* fn, CallExecutor* out) {
  int first = -1;
  MemKind kind = MemKind::kHost;
  int device = -1;
  for (int i = 0; i < n; ++i) {
    if (bufs[i] == nullptr) continue;
    int holder = -1;
    const MemKind k = memoryKind(bufs[i], &holder);
    if (first < 0) {
      first = i;
      kind = k;
      device = holder;
    } else if (k != kind) {
      return fail(zcollInvalidArgument, "%s: %s is %s memory but %s is %s memory; pass every "
                  "buffer of a call on one side", fn, names[first], kindName(kind), names[i],
                  kindName(k));
    } else if (k == MemKind::kDevice && holder != device) {
      return fail(zcollInvalidArgument, "%s: %s is memory of device %d but %s of device %d; "
                  "every buffer of a call must be on the communicator's device", fn,
                  names[first], device, names[i], holder);
    }
  }
  if (first < 0) return zcollSuccess;  // no buffer to move: nothing runs (host executor)
  if (kind == MemKind::kHost && stream != nullptr)
    return fail(zcollInvalidArgument, "%s: stream must be NULL for host buffers", fn);
  return makeExecutor(kind, stream, device, &out->owned, &out->exec);
}

Result checkCallMemory(const void* send, const void* recv, zcollStream_t stream, const char* fn,
                       CallExecutor* out) {
  const void* bufs[] = {send, recv};
  const char* names[] = {"sendbuff", "recvbuff"};
  return checkCallMemory(bufs, names, 2, stream, fn, out);
}

Result checkSize(size_t a, size_t b, size_t elemSize, const char* fn) {
  if (elemSize != 0 && b != 0 && a > SIZE_MAX / b / elemSize)
    return fail(zcollInvalidArgument, "%s: %zu x %zu elements overflow the address space", fn,
                a, b);
  return zcollSuccess;
}

Result checkOverlap(const void* a, size_t aBytes, const void* b, size_t bBytes, const char* fn,
                    const char* rule) {
  auto pa = reinterpret_cast<uintptr_t>(a);
  auto pb = reinterpret_cast<uintptr_t>(b);
  if (aBytes == 0 || bBytes == 0 || pa + aBytes <= pb || pb + bBytes <= pa) return zcollSuccess;
  return fail(zcollInvalidArgument, "%s: send and receive buffers overlap (%s)", fn, rule);
}

Result checkGatherInPlace(const void* send, const void* recv, size_t bytes, int rank, int nranks,
                          const char* fn) {
  if (send == static_cast<const char*>(recv) + rank * bytes) return zcollSuccess;
  return checkOverlap(send, bytes, recv, bytes * nranks, fn,
                      "in place only when sendbuff == recvbuff + rank*sendcount");
}

Result checkScatterInPlace(const void* send, const void* recv, size_t bytes, int rank,
                           int nranks, const char* fn) {
  if (recv == static_cast<const char*>(send) + rank * bytes) return zcollSuccess;
  return checkOverlap(send, bytes * nranks, recv, bytes, fn,
                      "in place only when recvbuff == sendbuff + rank*recvcount");
}

Result refuseInGroup(const char* fn) {
  if (inGroup())
    return fail(zcollInvalidUsage, "%s: cannot be called between zcollGroupStart and "
                "zcollGroupEnd (it blocks the calling thread; groups hold collectives and "
                "zcollSend/zcollRecv)", fn);
  return zcollSuccess;
}

}  // namespace zcoll
