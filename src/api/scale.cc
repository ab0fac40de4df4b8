// Local, stream-ordered operations on a communicator's memory, for NCCL's PreMulSum over zcoll
// (libzcoll_nccl.so scales each rank's input, then sums): zcollPointerGetDevice, zcollScale,
// zcollMemAllocAsync, zcollMemFreeAsync. They move no bytes between ranks, so they are not
// ordered with the comm's calls by the engine, only on the caller's stream.
#include "api/guard.h"
#include "api/launch.h"
#include "api/validate.h"
#include "base/dtype.h"
#include "exec/device_component.h"
#include "exec/executor.h"

using namespace zcoll;

namespace {

// The executor of `comm`'s device on `stream` (zcollUnsupported when the rank has none).
Result deviceExecutor(zcollComm* comm, zcollStream_t stream, const char* fn, CallExecutor* out) {
  const DeviceIdentity& mine = comm->peers[comm->rank].device;
  if (!mine.present)
    return fail(zcollUnsupported, "%s: this communicator's rank has no device (initialize the "
                "device before creating the communicator, as NCCL binds one to it)", fn);
  ZCOLL_CHECK(makeExecutor(MemKind::kDevice, stream, mine.ordinal, &out->owned, &out->exec));
  return checkDeviceCall(comm, *out->exec, fn);
}

}  // namespace

zcollResult_t zcollPointerGetDevice(const void* ptr, int* device) {
  return guarded(nullptr, [&]() -> Result {
    if (device == nullptr) return fail(zcollInvalidArgument, "zcollPointerGetDevice: device is NULL");
    int holder = -1;
    *device = (ptr != nullptr && memoryKind(ptr, &holder) == MemKind::kDevice) ? holder : -1;
    return zcollSuccess;
  });
}

zcollResult_t zcollScale(void* dst, const void* src, size_t count, zcollDataType_t datatype,
                         const void* scalar, int scalarOnDevice, zcollComm_t comm,
                         zcollStream_t stream) {
  const char* fn = "zcollScale";
  return pinnedCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(checkDtype(datatype, fn));
    if (scalar == nullptr) return fail(zcollInvalidArgument, "%s: scalar is NULL", fn);
    if (count == 0) return zcollSuccess;
    ZCOLL_CHECK(checkBuffer(src, count, "src", fn));
    ZCOLL_CHECK(checkBuffer(dst, count, "dst", fn));
    ZCOLL_CHECK(checkSize(count, 1, dtypeSize(datatype), fn));
    const size_t bytes = count * dtypeSize(datatype);
    if (dst != src) ZCOLL_CHECK(checkOverlap(src, bytes, dst, bytes, fn, "in place only when dst == src"));
    CallExecutor ce;
    ZCOLL_CHECK(checkCallMemory(src, dst, stream, fn, &ce));
    const bool onDevice = ce.exec->memKind() == MemKind::kDevice;
    if (onDevice) ZCOLL_CHECK(checkDeviceCall(comm, *ce.exec, fn));
    if (scalarOnDevice && !onDevice)
      return fail(zcollInvalidArgument, "%s: a scalar in device memory with host buffers", fn);
    return ce.exec->scale(dst, src, datatype, count, scalar, scalarOnDevice != 0);
  });
}

zcollResult_t zcollMemAllocAsync(void** ptr, size_t size, zcollComm_t comm, zcollStream_t stream) {
  const char* fn = "zcollMemAllocAsync";
  return pinnedCall(comm, fn, [&]() -> Result {
    if (ptr == nullptr) return fail(zcollInvalidArgument, "%s: ptr is NULL", fn);
    *ptr = nullptr;
    CallExecutor ce;
    ZCOLL_CHECK(deviceExecutor(comm, stream, fn, &ce));
    return ce.exec->allocOnStream(size, ptr);
  });
}

zcollResult_t zcollMemFreeAsync(void* ptr, zcollComm_t comm, zcollStream_t stream) {
  const char* fn = "zcollMemFreeAsync";
  return pinnedCall(comm, fn, [&]() -> Result {
    if (ptr == nullptr) return zcollSuccess;
    CallExecutor ce;
    ZCOLL_CHECK(deviceExecutor(comm, stream, fn, &ce));
    return ce.exec->freeOnStream(ptr);
  });
}
