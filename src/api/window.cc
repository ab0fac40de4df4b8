// Entry points for windows: device buffers registered with a communicator, which its node peers
// read and write in place (zcoll.h, "Windows"; coll/windows.h).
#include <algorithm>

#include "api/guard.h"
#include "api/validate.h"
#include "coll/windows.h"
#include "exec/device_component.h"

using namespace zcoll;

namespace {

// buff is device memory of the comm's device, in a comm that moves device bytes.
Result checkWindowMemory(zcollComm* comm, const void* buff, const char* fn) {
  const DeviceComponent* dc = deviceComponent();
  if (dc == nullptr)
    return fail(zcollUnsupported, "%s: this process has no device support (zcollGetDeviceSupport"
                "): only device buffers are registered", fn);
  int device = -1;
  if ((dc->inUse != nullptr && !dc->inUse()) || !dc->owns(buff, &device))
    return fail(zcollInvalidArgument, "%s: buff is host memory; host buffers need no window "
                "(memory from zcollMemAllocHost is read in place on every communicator)", fn);
  if (!comm->deviceRouted(comm->rank))
    return fail(zcollUnsupported, "%s: this communicator moves no device bytes: %s", fn,
                comm->deviceRouteWhy.empty() ? "" : comm->deviceRouteWhy[comm->rank].c_str());
  const int mine = comm->peers[comm->rank].device.ordinal;
  if (device != mine)
    return fail(zcollInvalidUsage, "%s: buff is on device %d, but this communicator works on "
                "device %d", fn, device, mine);
  return zcollSuccess;
}

}  // namespace

extern "C" {

zcollResult_t zcollCommWindowRegister(zcollComm_t comm, void* buff, size_t size,
                                      zcollWindow_t* win, int winFlags) {
  const char* fn = "zcollCommWindowRegister";
  if (win != nullptr) *win = nullptr;
  return commCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(refuseInGroup(fn));
    if (win == nullptr) return fail(zcollInvalidArgument, "%s: win is NULL", fn);
    if (buff == nullptr) return fail(zcollInvalidArgument, "%s: buff is NULL", fn);
    if (size == 0) return fail(zcollInvalidArgument, "%s: size is 0", fn);
    if (winFlags != ZCOLL_WIN_DEFAULT)
      return fail(zcollInvalidArgument, "%s: winFlags %d (only ZCOLL_WIN_DEFAULT, 0)", fn,
                  winFlags);
    ZCOLL_CHECK(checkWindowMemory(comm, buff, fn));
    auto w = std::make_unique<zcollWindow>();
    w->comm = comm;
    w->id = comm->nextWindowId++;
    w->buff = buff;
    w->size = size;
    ZCOLL_CHECK(registerWindow(comm, w->id, buff, size));
    *win = w.get();
    comm->windows.push_back(std::move(w));
    return zcollSuccess;
  });
}

zcollResult_t zcollCommWindowDeregister(zcollComm_t comm, zcollWindow_t win) {
  const char* fn = "zcollCommWindowDeregister";
  return commCall(comm, fn, [&]() -> Result {
    ZCOLL_CHECK(refuseInGroup(fn));
    auto it = std::find_if(comm->windows.begin(), comm->windows.end(),
                           [win](const auto& w) { return w.get() == win; });
    if (win == nullptr || it == comm->windows.end())
      return fail(zcollInvalidArgument, "%s: win is %s", fn,
                  win == nullptr ? "NULL"
                                 : "not a window of this communicator (deregistered already?)");
    const uint32_t id = win->id;
    comm->windows.erase(it);
    return deregisterWindow(comm, id);
  });
}

}  // extern "C"
