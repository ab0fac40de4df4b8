// CUDA's side of transport/device_ipc.h: the device a thread works on (DeviceIdentity) and device
// memory shared between the processes of one machine by legacy CUDA IPC (cudaIpcGetMemHandle /
// cudaIpcOpenMemHandle), with copies on a stream of the object's own. Offered by the CUDA device
// component (exec/device_component.cc: DeviceComponent::describeDevice and ::makeIpc).
//
// Driver functions (cuMemGetAddressRange, cuPointerGetAttribute, cuDevicePrimaryCtxGetState,
// cuCtxGetCurrent) are looked up at run time with
// cudaGetDriverEntryPointByVersion: nothing links libcuda.
#pragma once

#include <memory>

#include "base/result.h"
#include "transport/device_ipc.h"

namespace zcoll {

// The calling thread's current device: ordinal, "cuda", lower-case PCI bus id, UUID, and ipc = 1
// when it has unified addressing (which CUDA IPC needs on Linux). Only once this process has
// initialized that device (its primary context is active); before, present = 0 and nothing is
// created on the GPU. *out is zeroed first and stays zero (present = 0) on failure; a CUDA error
// is zcollCudaError with the runtime's message.
Result describeCudaDevice(DeviceIdentity* out);

// Whether this process has begun using CUDA, without creating anything: a context is current on
// the calling thread (cuCtxGetCurrent), or some device's primary context is active
// (cuDevicePrimaryCtxGetState), both asked through driver entry points. Once true, it is
// remembered. A job that never touched CUDA (host buffers only) gets false, so zcoll asks no
// pointer attributes, which would create a context on device 0 (DeviceComponent::inUse).
bool cudaInUse();

// A DeviceIpc over CUDA IPC (name "cuda"). zcollUnsupported when the driver lacks the functions it
// needs.
Result makeCudaIpc(std::unique_ptr<DeviceIpc>* out);

}  // namespace zcoll
