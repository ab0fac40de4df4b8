// The transport table, as data (the shape of NCCL's transport table and UCC's component
// tables): one row per transport with its name, its priority, the memory kinds it may carry and
// how to create it. core/init.cc creates every row's transport, publishes their addresses, and
// runs the lifecycle of transport/transport.h on all of them alike; it names none of them. A new
// transport is its own files plus one row here.
//
// Priority orders the route choice within each memory kind (lower first): host routes ask the
// host transports (self, shm, ucx), device routes the device ones (cuda_ipc, ucx where its UCX
// carries device memory, staged). A communicator keeps its transports in lifecycle order: the
// host-carrying ones first, by priority, then the device-only ones (they send over the host
// ones); it progresses them in that order and closes them in reverse.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "transport/device_ipc.h"
#include "transport/transport.h"

namespace zcoll {

// Everything a row's create may need, read once at init (splits read it again, as before).
struct TransportSettings {
  std::string commName;
  bool withPeers = false;  // the rank has peers (a rank alone gets self and staged only)
  std::string forced;      // ZCOLL_TRANSPORT: "", or the one host transport for every peer
  std::string deviceMode;  // ZCOLL_DEVICE_TRANSPORT: "", cuda_ipc or staged
  int cudaIpcMaxPath = 0;  // ZCOLL_CUDA_IPC_LEVEL, a topology.h GpuPath
  bool cudaIpcUserBuffers = false;  // ZCOLL_CUDA_IPC_USER_BUFFERS
  size_t deviceWindowBytes = 0;     // ZCOLL_DEVICE_WINDOW_BYTES: cuda_ipc's window (peer_memory.h)
  DeviceIdentity device{};          // this rank's device (present 0 without one)
  // The longest wait for a device copy of zcoll's own (a send's block, a staged chunk, the
  // probe): the communicator's timeout. A copy queued behind a busy device may take seconds;
  // only a device that stopped should fail it.
  int copyWaitMs = 300 * 1000;
  // Device calls are queued on streams (ZCOLL_DEVICE_CALLS=async, several hardware queues): a
  // call's transfers then run while its caller's stream waits for it (api/launch.h).
  bool deviceCallsQueued = true;
  // The device memory component's IPC and copy engine (exec/device_component.h), null when it
  // offers none.
  Result (*makeIpc)(std::unique_ptr<DeviceIpc>* out) = nullptr;
};

struct TransportRow {
  const char* name;
  int priority;       // lower is asked first, within each memory kind
  unsigned memKinds;  // the kinds it may carry (MemKindBits); an instance says what it does
  bool needsPeers;    // created only for a rank with peers
  // Creates the transport, or none (*out null) when it does not apply to this rank; fails only
  // when the settings demand it and it cannot start. `above`: the transports created so far
  // (lifecycle order).
  Result (*create)(const TransportSettings& settings, const std::vector<Transport*>& above,
                   std::unique_ptr<Transport>* out);
};

// Every row, by priority.
const std::vector<TransportRow>& transportTable();
// The row of `name`, null when none.
const TransportRow* transportRow(const std::string& name);

// Reads ZCOLL_DEVICE_TRANSPORT, ZCOLL_CUDA_IPC_*, and (with peers) ZCOLL_TRANSPORT, checked.
Result readTransportSettings(const std::string& commName, const DeviceIdentity& device,
                             bool withPeers,
                             Result (*makeIpc)(std::unique_ptr<DeviceIpc>* out),
                             TransportSettings* out);

// Creates every row's transport that applies, in lifecycle order (host-carrying by priority,
// then device-only by priority).
Result createTransports(const TransportSettings& settings,
                        std::vector<std::unique_ptr<Transport>>* out);

// What peers need, by transport name (transport/addresses.h).
std::string packedAddresses(const std::vector<std::unique_ptr<Transport>>& transports);

// Whether a transport carries this rank's device memory as well as host memory (UCX built with
// CUDA: GPUDirect RDMA where the NIC allows), told to the peers (DeviceIdentity::netDirect) so
// that both ranks of a pair choose it for device bytes.
bool hostRouteCarriesDevice(const std::vector<std::unique_ptr<Transport>>& transports);

}  // namespace zcoll
