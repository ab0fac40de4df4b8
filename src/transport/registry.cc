#include "transport/registry.h"

#include <strings.h>

#include <algorithm>
#include <cctype>

#include "base/params.h"
#include "topology/topology.h"
#include "transport/addresses.h"
#include "transport/cuda_ipc_transport.h"
#include "transport/self_transport.h"
#include "transport/shm_transport.h"
#include "transport/staged_transport.h"
#ifdef ZCOLL_HAVE_UCX
#include "transport/ucx_transport.h"
#endif

namespace zcoll {

namespace {

Result createSelf(const TransportSettings&, const std::vector<Transport*>&,
                  std::unique_ptr<Transport>* out) {
  out->reset(new SelfTransport());
  return zcollSuccess;
}

#ifndef ZCOLL_HAVE_UCX
// A build without UCX: local peers may still be reached by shm; selection says if not.
Result createNoUcx(const TransportSettings& s, const std::vector<Transport*>&,
                   std::unique_ptr<Transport>* out) {
  out->reset();
  if (s.forced == "ucx")
    return fail(zcollUnsupported, "ZCOLL_TRANSPORT=ucx but zcoll was built without UCX");
  return zcollSuccess;
}
#endif

const std::vector<TransportRow> kTable = {
    {"self", 0, kHostMemory, false, &createSelf},
    {"shm", 10, kHostMemory, true, &ShmTransport::createFor},
    {"cuda_ipc", 20, kDeviceMemory, true, &CudaIpcTransport::createFor},
#ifdef ZCOLL_HAVE_UCX
    {"ucx", 30, kHostMemory | kDeviceMemory, true, &UcxTransport::createFor},
#else
    {"ucx", 30, kHostMemory | kDeviceMemory, true, &createNoUcx},
#endif
    {"staged", 40, kDeviceMemory, false, &StagedTransport::createFor},
};

// "a, b, or leave it empty": the rows that carry `kinds` only or also, and need peers.
std::string choices(bool hostCarrying) {
  std::string out;
  for (const TransportRow& row : kTable) {
    const bool host = (row.memKinds & kHostMemory) != 0;
    if (host != hostCarrying || (hostCarrying && !row.needsPeers)) continue;
    out += std::string(row.name) + ", ";
  }
  return out + "or leave it empty";
}

bool isChoice(const std::string& value, bool hostCarrying) {
  for (const TransportRow& row : kTable)
    if (value == row.name && ((row.memKinds & kHostMemory) != 0) == hostCarrying &&
        (!hostCarrying || row.needsPeers))
      return true;
  return false;
}

}  // namespace

const std::vector<TransportRow>& transportTable() { return kTable; }

const TransportRow* transportRow(const std::string& name) {
  for (const TransportRow& row : kTable)
    if (name == row.name) return &row;
  return nullptr;
}

Result readTransportSettings(const std::string& commName, const DeviceIdentity& device,
                             bool withPeers,
                             Result (*makeIpc)(std::unique_ptr<DeviceIpc>* out),
                             TransportSettings* out) {
  *out = TransportSettings{};
  out->commName = commName;
  out->withPeers = withPeers;
  out->device = device;
  out->makeIpc = makeIpc;
  // ZCOLL_DEVICE_TRANSPORT: a device-only transport (the device route of every peer it can
  // reach: transport/cuda_ipc_transport.h).
  out->deviceMode = paramString("ZCOLL_DEVICE_TRANSPORT");
  if (!out->deviceMode.empty() && !isChoice(out->deviceMode, false))
    return fail(zcollInvalidArgument, "ZCOLL_DEVICE_TRANSPORT=%s: use %s",
                out->deviceMode.c_str(), choices(false).c_str());
  const int64_t user = paramInt("ZCOLL_CUDA_IPC_USER_BUFFERS");
  if (user != 0 && user != 1)
    return fail(zcollInvalidArgument, "ZCOLL_CUDA_IPC_USER_BUFFERS=%lld: use 0 or 1",
                static_cast<long long>(user));
  out->cudaIpcUserBuffers = user == 1;
  const int64_t window = paramInt("ZCOLL_DEVICE_WINDOW_BYTES");
  if (window < 0 || window > (int64_t(1) << 40))
    return fail(zcollInvalidArgument, "ZCOLL_DEVICE_WINDOW_BYTES=%lld: use 0 (none) to 2^40",
                static_cast<long long>(window));
  out->deviceWindowBytes = static_cast<size_t>(window);
  const std::string level = paramString("ZCOLL_CUDA_IPC_LEVEL");
  bool levelKnown = false;
  for (GpuPath p : {GpuPath::kNVL, GpuPath::kPIX, GpuPath::kPXB, GpuPath::kPHB, GpuPath::kSYS})
    if (strcasecmp(level.c_str(), gpuPathName(p)) == 0) {
      out->cudaIpcMaxPath = static_cast<int>(p);
      levelKnown = true;
    }
  if (!levelKnown)
    return fail(zcollInvalidArgument, "ZCOLL_CUDA_IPC_LEVEL=%s: use NVL, PIX, PXB, PHB or SYS",
                level.c_str());
  if (!withPeers) return zcollSuccess;
  // ZCOLL_TRANSPORT: "" (shm for local peers that can share memory, ucx for the rest), or one
  // host transport for every non-self peer (init fails for a peer it cannot reach).
  out->forced = paramString("ZCOLL_TRANSPORT");
  if (!out->forced.empty() && !isChoice(out->forced, true))
    return fail(zcollInvalidArgument, "ZCOLL_TRANSPORT=%s: use %s", out->forced.c_str(),
                choices(true).c_str());
  return zcollSuccess;
}

Result createTransports(const TransportSettings& settings,
                        std::vector<std::unique_ptr<Transport>>* out) {
  out->clear();
  std::vector<const TransportRow*> order;
  for (const TransportRow& row : kTable)
    if (row.memKinds & kHostMemory) order.push_back(&row);
  for (const TransportRow& row : kTable)
    if (!(row.memKinds & kHostMemory)) order.push_back(&row);
  std::vector<Transport*> above;
  for (const TransportRow* row : order) {
    if (row->needsPeers && !settings.withPeers) continue;
    std::unique_ptr<Transport> t;
    ZCOLL_CHECK(row->create(settings, above, &t));
    if (t == nullptr) continue;
    above.push_back(t.get());
    out->push_back(std::move(t));
  }
  return zcollSuccess;
}

std::string packedAddresses(const std::vector<std::unique_ptr<Transport>>& transports) {
  TransportAddresses a;
  for (const auto& t : transports) {
    std::string address = t->address();
    if (!address.empty()) a.rows.emplace_back(t->name(), std::move(address));
  }
  return packAddresses(a);
}

bool hostRouteCarriesDevice(const std::vector<std::unique_ptr<Transport>>& transports) {
  return std::any_of(transports.begin(), transports.end(), [](const auto& t) {
    return (t->memKinds() & kHostMemory) && (t->memKinds() & kDeviceMemory);
  });
}

}  // namespace zcoll
