// Buffer registration, windows and NCCL's allocator:
//  - ncclCommRegister/Deregister: zcoll needs no registration to move a buffer; the handle only
//    records the range (checked at deregistration).
//  - ncclCommWindowRegister/Deregister: zcollCommWindowRegister/Deregister (device buffers that
//    node peers read in place; collective, as NCCL's). NCCL_WIN_COLL_SYMMETRIC is taken as a
//    plain window (zcoll's windows need no symmetric layout).
//  - ncclWinGetUserPtr (2.30): the buffer a window was registered with.
//  - ncclMemAlloc/MemFree: in a process without device support, zcollMemAllocHost's memory (the
//    node's ranks read it in place); with device support refused (zcoll allocates no device
//    memory for the caller; use cudaMalloc).
#include <nccl.h>

#include <mutex>
#include <set>

#include "comm.h"
#include "errors.h"

using namespace zcoll_nccl;

namespace {

struct Registration {
  ncclComm_t comm;
  void* buff;
  size_t size;
};

std::mutex gRegMutex;
std::set<Registration*>& registrations() {
  static auto* s = new std::set<Registration*>();  // never destroyed: usable at exit
  return *s;
}

bool deviceProcess() {
  int device = 0;
  zcollGetDeviceSupport(&device);
  return device != 0;
}

}  // namespace

extern "C" {

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  ncclResult_t r = readyComm(comm, "ncclCommRegister");
  if (r != ncclSuccess) return r;
  if (buff == nullptr || handle == nullptr || size == 0)
    return fail(ncclInvalidArgument, "ncclCommRegister: buff %p, size %zu, handle %p: give a "
                "buffer, a size and a handle", buff, size, static_cast<void*>(handle));
  Registration* reg = new Registration{comm, buff, size};
  std::lock_guard<std::mutex> lock(gRegMutex);
  registrations().insert(reg);
  *handle = reg;
  return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  ncclResult_t r = readyComm(comm, "ncclCommDeregister");
  if (r != ncclSuccess) return r;
  std::lock_guard<std::mutex> lock(gRegMutex);
  Registration* reg = static_cast<Registration*>(handle);
  if (registrations().count(reg) == 0 || reg->comm != comm)
    return fail(ncclInvalidArgument, "ncclCommDeregister: handle %p is not a registration of this "
                "comm", handle);
  registrations().erase(reg);
  delete reg;
  return ncclSuccess;
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags) {
  ncclResult_t r = readyComm(comm, "ncclCommWindowRegister");
  if (r != ncclSuccess) return r;
  if (winFlags != NCCL_WIN_DEFAULT && winFlags != NCCL_WIN_COLL_SYMMETRIC)
    return fail(ncclInvalidArgument, "ncclCommWindowRegister: winFlags 0x%x: it takes "
                "NCCL_WIN_DEFAULT or NCCL_WIN_COLL_SYMMETRIC", winFlags);
  if (win == nullptr) return fail(ncclInvalidArgument, "ncclCommWindowRegister: win is NULL");
  zcollWindow_t zw = nullptr;
  zcollResult_t zr = zcollCommWindowRegister(comm->z, buff, size, &zw, ZCOLL_WIN_DEFAULT);
  if (zr != zcollSuccess) return fromZcoll(zr, comm->z);
  *win = reinterpret_cast<ncclWindow_t>(zw);
  std::lock_guard<std::mutex> lock(comm->mutex);
  comm->windowBuffers[zw] = buff;
  return ncclSuccess;
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  ncclResult_t r = readyComm(comm, "ncclCommWindowDeregister");
  if (r != ncclSuccess) return r;
  zcollResult_t zr = zcollCommWindowDeregister(comm->z, reinterpret_cast<zcollWindow_t>(win));
  if (zr != zcollSuccess) return fromZcoll(zr, comm->z);
  std::lock_guard<std::mutex> lock(comm->mutex);
  comm->windowBuffers.erase(win);
  return ncclSuccess;
}

// NCCL 2.30: the buffer a window was registered with.
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  ncclResult_t r = readyComm(comm, "ncclWinGetUserPtr");
  if (r != ncclSuccess) return r;
  if (outUserPtr == nullptr) return fail(ncclInvalidArgument, "ncclWinGetUserPtr: outUserPtr is NULL");
  std::lock_guard<std::mutex> lock(comm->mutex);
  auto it = comm->windowBuffers.find(win);
  if (it == comm->windowBuffers.end())
    return fail(ncclInvalidArgument, "ncclWinGetUserPtr: win %p is not a window of this comm",
                static_cast<void*>(win));
  *outUserPtr = it->second;
  return ncclSuccess;
}

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (deviceProcess())
    return fail(ncclInvalidUsage, "ncclMemAlloc is not served by zcoll in a process with device "
                "support (zcoll allocates no device memory for the caller; use cudaMalloc)");
  return fromZcoll(zcollMemAllocHost(ptr, size), nullptr);
}

ncclResult_t ncclMemFree(void* ptr) {
  if (deviceProcess())
    return fail(ncclInvalidUsage, "ncclMemFree is not served by zcoll in a process with device "
                "support (as ncclMemAlloc)");
  return fromZcoll(zcollMemFreeHost(ptr), nullptr);
}

}  // extern "C"
