#include "core/init.h"

#include "core/rank_blob.h"

#include <sched.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "base/hash.h"
#include "base/params.h"
#include "base/tags.h"
#include "coll/coll.h"
#include "core/live_comms.h"
#include "core/peer_notice.h"
#include "core/progress.h"
#include "transport/addresses.h"
#include "transport/select.h"
#ifdef ZCOLL_HAVE_UCX
#include "transport/ucx_transport.h"
#endif

namespace zcoll {

namespace {

constexpr size_t kMinConfigSize = offsetof(zcollConfig_t, timeoutSec) + sizeof(int);

// ---- Phase 1: local discovery -------------------------------------------------------------

// Hostname + boot id + PID namespace: processes with equal values can see each other's pids.
uint64_t machineHash() {
  std::string id;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  id += host;
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char boot[64] = {};
    if (std::fgets(boot, sizeof(boot), f) != nullptr) id += boot;
    std::fclose(f);
  }
  char ns[64] = {};
  if (readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1) > 0) id += ns;
  return fnv1a64(id);
}

// The device this rank works on, when the device memory component names one (CUDA: the
// current device once the process has initialized it, as NCCL binds a communicator to it).
// Without one, this rank has no device routes: its device calls fail with a message.
void describeDevice(DeviceIdentity* out) {
  std::memset(out, 0, sizeof(*out));
  const DeviceComponent* c = deviceComponent();
  if (c == nullptr || c->describeDevice == nullptr) return;
  if (c->describeDevice(out) != zcollSuccess) {
    ZCOLL_WARN(LogSubsys::kTopo, "the %s device of this rank could not be described (%s): calls "
               "on device buffers will fail on this rank", c->name, zcollGetLastError(nullptr));
    std::memset(out, 0, sizeof(*out));
  }
  out->kind[sizeof(out->kind) - 1] = '\0';
  out->busId[sizeof(out->busId) - 1] = '\0';
}

Result describeSelf(const InitSettings& s, int rank, PeerInfo* info) {
  std::memset(info, 0, sizeof(*info));
  info->rank = rank;
  info->pid = getpid();
  info->machineHash = machineHash();
  HostIdentity host{};
  ZCOLL_CHECK(getHostIdentity(s.hostId.empty() ? nullptr : s.hostId.c_str(), &host));
  info->hostHash = host.hash;
  std::memcpy(info->hostName, host.name, sizeof(info->hostName));
  info->hostName[sizeof(info->hostName) - 1] = '\0';
  if (discoverTopology(&info->topo) != zcollSuccess) {
    // Topology only refines path choices; a comm without it still works.
    ZCOLL_WARN(LogSubsys::kTopo, "topology discovery failed; continuing without it");
    std::memset(&info->topo, 0, sizeof(info->topo));
  }
  describeDevice(&info->device);
  return zcollSuccess;
}

// ZCOLL_DEVICE_TRANSPORT and ZCOLL_CUDA_IPC_LEVEL (transport/cuda_ipc_transport.h).
struct DeviceTransportSettings {
  std::string mode;  // "", "cuda_ipc" or "staged"
  int maxPath = static_cast<int>(GpuPath::kPHB);
  bool userBuffers = false;  // ZCOLL_CUDA_IPC_USER_BUFFERS
};

Result readDeviceTransportSettings(DeviceTransportSettings* out) {
  out->mode = paramString("ZCOLL_DEVICE_TRANSPORT");
  if (!out->mode.empty() && out->mode != "cuda_ipc" && out->mode != "staged")
    return fail(zcollInvalidArgument, "ZCOLL_DEVICE_TRANSPORT=%s: use cuda_ipc, staged, or leave "
                "it empty", out->mode.c_str());
  const int64_t user = paramInt("ZCOLL_CUDA_IPC_USER_BUFFERS");
  if (user != 0 && user != 1)
    return fail(zcollInvalidArgument, "ZCOLL_CUDA_IPC_USER_BUFFERS=%lld: use 0 or 1",
                static_cast<long long>(user));
  out->userBuffers = user == 1;
  const std::string level = paramString("ZCOLL_CUDA_IPC_LEVEL");
  for (GpuPath p : {GpuPath::kNVL, GpuPath::kPIX, GpuPath::kPXB, GpuPath::kPHB, GpuPath::kSYS})
    if (strcasecmp(level.c_str(), gpuPathName(p)) == 0) {
      out->maxPath = static_cast<int>(p);
      return zcollSuccess;
    }
  return fail(zcollInvalidArgument, "ZCOLL_CUDA_IPC_LEVEL=%s: use NVL, PIX, PXB, PHB or SYS",
              level.c_str());
}

// cuda_ipc, when this rank's device can share its memory (the device component offers IPC) and
// ZCOLL_DEVICE_TRANSPORT allows it. Without it the rank still takes part in choosing device
// routes (chooseDeviceRoutes), and its peers stage.
Result createCudaIpcTransport(zcollComm* comm, const DeviceIdentity& me,
                              const DeviceTransportSettings& s, TransportAddresses* out) {
  if (s.mode == "staged" || !me.present) return zcollSuccess;
  const DeviceComponent* c = deviceComponent();
  Result r = zcollUnsupported;
  std::unique_ptr<DeviceIpc> ipc;
  if (me.ipc && c != nullptr && c->makeIpc != nullptr) {
    r = c->makeIpc(&ipc);
    if (r == zcollSuccess)
      r = CudaIpcTransport::create(std::move(ipc), s.maxPath, s.userBuffers, &comm->cudaIpc);
  } else {
    fail(zcollUnsupported, "the %s device cannot share its memory with other processes",
         me.kind);
  }
  if (r != zcollSuccess) {
    comm->cudaIpc.reset();
    if (s.mode == "cuda_ipc")
      return fail(r, "ZCOLL_DEVICE_TRANSPORT=cuda_ipc: %s", zcollGetLastError(nullptr));
    ZCOLL_WARN(LogSubsys::kNet, "cuda_ipc unavailable (%s): device bytes to the ranks of this "
               "node go through host memory", zcollGetLastError(nullptr));
    return zcollSuccess;
  }
  out->cudaIpc = comm->cudaIpc->address();
  return zcollSuccess;
}

// ZCOLL_TRANSPORT: "" (shm for local peers that can share memory, ucx for the rest), "shm"
// or "ucx" (that one for every non-self peer; init fails for a peer it cannot reach).
Result readForcedTransport(std::string* forced) {
  *forced = paramString("ZCOLL_TRANSPORT");
  if (!forced->empty() && *forced != "ucx" && *forced != "shm")
    return fail(zcollInvalidArgument, "ZCOLL_TRANSPORT=%s: use shm, ucx, or leave it empty",
                forced->c_str());
  return zcollSuccess;
}

Result createShmTransport(zcollComm* comm, const std::string& forced, TransportAddresses* out) {
  if (forced == "ucx") return zcollSuccess;
  ZCOLL_CHECK(ShmTransport::create(&comm->shm));
  if (forced == "shm" && !comm->shm->usable()) {
    std::string why;
    comm->shm->canConnect(PeerReach{}, &why);
    return fail(zcollSystemError, "ZCOLL_TRANSPORT=shm: %s", why.c_str());
  }
  out->shm = comm->shm->address();
  return zcollSuccess;
}

Result createNetTransport(zcollComm* comm, const std::string& forced, TransportAddresses* out) {
  if (forced == "shm") return zcollSuccess;
#ifdef ZCOLL_HAVE_UCX
  UcxTransport* ucx = nullptr;
  const bool carriesNodePeers = comm->shm == nullptr || !comm->shm->usable();
  ZCOLL_CHECK(UcxTransport::create(comm->name, carriesNodePeers, &ucx));
  comm->net.reset(ucx);
  out->ucx = ucx->address();
  return zcollSuccess;
#else
  (void)out;
  if (forced == "ucx")
    return fail(zcollUnsupported, "ZCOLL_TRANSPORT=ucx but zcoll was built without UCX");
  return zcollSuccess;  // local peers may still be reached by shm; selection says if not
#endif
}

// staged, whenever this rank has a device whose component offers a copy engine: every device
// route that is not cuda_ipc (a rank alone in its comm sends to itself through it too).
Result createStagedTransport(zcollComm* comm, const DeviceIdentity& me) {
  const DeviceComponent* c = deviceComponent();
  if (!me.present || c == nullptr || c->makeIpc == nullptr) return zcollSuccess;
  std::unique_ptr<DeviceIpc> engine;
  Result r = c->makeIpc(&engine);
  if (r == zcollSuccess) r = StagedTransport::create(std::move(engine), &comm->staged);
  if (r != zcollSuccess)
    ZCOLL_WARN(LogSubsys::kNet, "the %s device's copy engine did not start (%s): calls on device "
               "buffers will fail on this rank", me.kind, zcollGetLastError(nullptr));
  return zcollSuccess;
}

// Every transport this rank offers (the host ones and cuda_ipc only with peers); `packed` is
// what its peers need (transport/addresses.h; empty for a rank alone).
Result createTransports(zcollComm* comm, const DeviceIdentity& device, bool withPeers,
                        std::string* packed) {
  DeviceTransportSettings settings;
  ZCOLL_CHECK(readDeviceTransportSettings(&settings));
  comm->deviceTransport = settings.mode;  // chooseDeviceRoutes decides by what was read here
  ZCOLL_CHECK(createStagedTransport(comm, device));
  if (!withPeers) return zcollSuccess;
  std::string forced;
  ZCOLL_CHECK(readForcedTransport(&forced));
  TransportAddresses addresses;
  ZCOLL_CHECK(createShmTransport(comm, forced, &addresses));
  ZCOLL_CHECK(createNetTransport(comm, forced, &addresses));
  ZCOLL_CHECK(createCudaIpcTransport(comm, device, settings, &addresses));
  *packed = packAddresses(addresses);
  return zcollSuccess;
}

// Whether this rank's network transport carries its device's memory (UCX built with CUDA:
// GPUDirect RDMA where the NIC allows, UCX's own staging otherwise), told to the peers so that
// both ranks of a pair choose it (chooseDeviceRoutes).
int32_t netCarriesDevice(const zcollComm* comm, const DeviceIdentity& device) {
#ifdef ZCOLL_HAVE_UCX
  return comm->net && device.present && std::strcmp(device.kind, "cuda") == 0 &&
                 static_cast<const UcxTransport*>(comm->net.get())->carriesCudaMemory()
             ? 1
             : 0;
#else
  (void)comm;
  (void)device;
  return 0;
#endif
}

// ---- Phase 2: exchange --------------------------------------------------------------------

// encodeRankBlob / decodeRankBlob: core/rank_blob.h.

// ---- Phase 3: wiring ----------------------------------------------------------------------

// Per peer, the first transport in priority order that can reach it (transport/select.h).
Result chooseRoutes(zcollComm* comm, const std::vector<TransportAddresses>& addresses) {
  std::vector<PeerReach> reach(comm->nranks);
  for (int r = 0; r < comm->nranks; ++r) {
    reach[r].rank = r;
    reach[r].self = r == comm->rank;
    reach[r].sameMachine = comm->sameMachine(r);
    reach[r].sameNode = comm->layout.nodeOf[r] == comm->layout.nodeOf[comm->rank];
    reach[r].hasNetAddress = !addresses[r].ucx.empty();
  }
  std::vector<Route> routes;
  ZCOLL_CHECK(selectRoutes(comm->hostTransports(), reach, &routes));
  comm->route.assign(comm->nranks, nullptr);
  comm->routeWhy.assign(comm->nranks, "");
  for (int r = 0; r < comm->nranks; ++r) {
    comm->route[r] = routes[r].transport;
    comm->routeWhy[r] = routes[r].why;
  }
  for (const std::string& line : summarizeRoutes(routes))
    ZCOLL_INFO(LogSubsys::kNet, "%s rank %d routes: %s", comm->name.c_str(), comm->rank,
               line.c_str());
  return zcollSuccess;
}

// Tells the shm transport its peers' addresses (canConnect needs them).
Result learnShmPeers(zcollComm* comm, const std::vector<TransportAddresses>& addresses) {
  if (!comm->shm) return zcollSuccess;
  std::vector<std::string> shmAddresses(comm->nranks);
  for (int r = 0; r < comm->nranks; ++r) shmAddresses[r] = addresses[r].shm;
  return comm->shm->learnPeers(shmAddresses);
}

// Maps the segments of the peers routed to shm, and only those.
Result connectShm(zcollComm* comm) {
  if (!comm->shm) return zcollSuccess;
  std::vector<int> routed, pids(comm->nranks);
  for (int r = 0; r < comm->nranks; ++r) {
    pids[r] = comm->peers[r].pid;
    if (comm->route[r] == comm->shm.get()) routed.push_back(r);
  }
  return comm->shm->connect(comm->layout, comm->rank, routed, pids);
}

// Connects the network transport to the peers routed to it, and only those.
Result connectNet(zcollComm* comm, const std::vector<TransportAddresses>& addresses) {
#ifdef ZCOLL_HAVE_UCX
  if (!comm->net) return zcollSuccess;
  std::vector<std::string> routed(comm->nranks);
  std::vector<char> peerErrors(comm->nranks);
  for (int r = 0; r < comm->nranks; ++r) {
    if (comm->route[r] == comm->net.get()) routed[r] = addresses[r].ucx;
    peerErrors[r] = !comm->sameMachine(r);
  }
  return static_cast<UcxTransport*>(comm->net.get())->connect(routed, peerErrors, comm->rank);
#else
  (void)comm;
  (void)addresses;
  return zcollSuccess;
#endif
}

// ZCOLL_SPIN_COUNT -1: spin 2000 polls before sleeping, unless this machine runs more ranks of
// the comm than this rank has CPUs: then a spinning rank only delays the one it waits for.
void chooseSpinCount(zcollComm* comm) {
  constexpr int64_t kDefaultSpin = 2000;
  if (comm->spinSetting >= 0) {
    comm->spinCount = comm->spinSetting;
    return;
  }
  int ranksHere = 0;
  for (int r = 0; r < comm->nranks; ++r) ranksHere += comm->sameMachine(r) ? 1 : 0;
  cpu_set_t cpus;
  int usable = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 0;
  bool oversubscribed = usable > 0 && ranksHere > usable;
  comm->spinCount = oversubscribed ? 0 : kDefaultSpin;
  ZCOLL_INFO(LogSubsys::kInit, "%s rank %d: %d ranks on this machine, %d CPUs: spin %lld polls "
             "before sleeping", comm->name.c_str(), comm->rank, ranksHere, usable,
             static_cast<long long>(comm->spinCount));
}

// ---- Phase 4: device routes (once the host routes work) ------------------------------------

// Peers that choose a device route with this rank: node peers on this machine whose device and
// this rank's are of one kind and can share memory. Decided from what every rank exchanged, so
// both sides of a pair agree on it.
bool tradesDeviceVerdict(const zcollComm* comm, int peer) {
  const DeviceIdentity& me = comm->peers[comm->rank].device;
  const DeviceIdentity& them = comm->peers[peer].device;
  return peer != comm->rank && comm->sameMachine(peer) &&
         comm->layout.nodeOf[peer] == comm->node() && me.present && me.ipc && them.present &&
         them.ipc && std::strcmp(me.kind, them.kind) == 0;
}

PeerReach devicePeerReach(const zcollComm* comm, int peer, const TopoDetail& topo) {
  const DeviceIdentity& me = comm->peers[comm->rank].device;
  const DeviceIdentity& them = comm->peers[peer].device;
  static const uint8_t kNoUuid[16] = {};
  PeerReach reach;
  reach.rank = peer;
  reach.self = peer == comm->rank;
  reach.sameMachine = comm->sameMachine(peer);
  reach.sameNode = comm->layout.nodeOf[peer] == comm->node();
  reach.deviceIpc = tradesDeviceVerdict(comm, peer);
  reach.sameDevice = (std::memcmp(me.uuid, kNoUuid, 16) != 0 &&
                      std::memcmp(me.uuid, them.uuid, 16) == 0) ||
                     (me.busId[0] != '\0' && strcasecmp(me.busId, them.busId) == 0);
  reach.devicePath = gpuPathBetween(topo, me.busId, them.busId);
  return reach;
}

// This rank's verdict on each peer that trades one (tradesDeviceVerdict): cuda_ipc can connect
// and a read of the peer's probe block gave the bytes the peer wrote there. *why says why.
void judgeDevicePeers(zcollComm* comm, const std::vector<TransportAddresses>& addresses,
                      std::vector<uint64_t>* verdict, std::vector<std::string>* why) {
  TopoDetail topo;
  const DeviceIdentity& me = comm->peers[comm->rank].device;
  if (comm->cudaIpc && discoverTopologyDetail(&topo) != zcollSuccess)
    ZCOLL_WARN(LogSubsys::kTopo, "topology discovery failed: the paths between GPUs are unknown");
  if (comm->cudaIpc)
    ZCOLL_INFO(LogSubsys::kTopo, "%s rank %d device %s:%d, PCI %s: %s", comm->name.c_str(),
               comm->rank, me.kind, me.ordinal, me.busId, describeGpuPlace(topo, me.busId).c_str());
  for (int r = 0; r < comm->nranks; ++r) {
    if (!tradesDeviceVerdict(comm, r)) continue;
    if (!comm->cudaIpc) {
      (*why)[r] = "cuda_ipc is off on this rank (ZCOLL_DEVICE_TRANSPORT, or see the warning)";
      continue;
    }
    (*verdict)[r] = comm->cudaIpc->canConnect(devicePeerReach(comm, r, topo), &(*why)[r]) &&
                    comm->cudaIpc->probe(addresses[r].cudaIpc, &(*why)[r]);
  }
}

// Each pair that trades verdicts sends its own and receives the peer's (over the host routes).
Result tradeDeviceVerdicts(zcollComm* comm, const std::vector<uint64_t>& mine,
                           std::vector<uint64_t>* theirs) {
  RequestList reqs(2 * comm->nranks);
  for (int r = 0; r < comm->nranks; ++r) {
    if (!tradesDeviceVerdict(comm, r)) continue;
    ZCOLL_CHECK(postRecv(comm, r, &(*theirs)[r], sizeof(uint64_t), makeIpcProbeTag(r),
                         reqs.next()));
    ZCOLL_CHECK(postSend(comm, r, &mine[r], sizeof(uint64_t), makeIpcProbeTag(comm->rank),
                         reqs.next()));
  }
  return waitAll(comm, reqs.data(), reqs.size());
}

// The device route to every peer: cuda_ipc where both ranks of a pair judged it works, else
// staged. Logged at INFO (subsystem NET) and shown by zcoll_info --routes.
Result chooseDeviceRoutes(zcollComm* comm, const std::vector<TransportAddresses>& addresses) {
  const int n = comm->nranks;
  std::vector<uint64_t> mine(n, 0), theirs(n, 0);
  std::vector<std::string> why(n);
  judgeDevicePeers(comm, addresses, &mine, &why);
  ZCOLL_CHECK(tradeDeviceVerdicts(comm, mine, &theirs));
  std::vector<Route> routes(n);
  for (int r = 0; r < n; ++r) {
    if (mine[r] && theirs[r]) {
      routes[r] = Route{comm->cudaIpc.get(), "cuda_ipc (" + why[r] + ")"};
      continue;
    }
    if (comm->deviceTransport != "staged" && r != comm->rank &&
        comm->route[r] == comm->net.get() && comm->peers[comm->rank].device.netDirect &&
        comm->peers[r].device.netDirect) {
      routes[r] = Route{comm->net.get(), "ucx (GPUDirect: UCX carries CUDA memory on both ranks)"};
      continue;
    }
    if (r == comm->rank) why[r] = "this rank";
    else if (!tradesDeviceVerdict(comm, r)) why[r] = "not a node peer with a shareable device";
    else if (mine[r]) why[r] = "rank " + std::to_string(r) + " cannot reach this rank's memory";
    routes[r] = comm->staged ? Route{comm->staged.get(), "staged (" + why[r] + ")"}
                : comm->peers[comm->rank].device.present
                    ? Route{nullptr, "none (this rank's device copy engine did not start)"}
                    : Route{nullptr, "none (no initialized device when the communicator was "
                                     "created)"};
    if (comm->deviceTransport == "cuda_ipc" && r != comm->rank && comm->sameMachine(r) &&
        comm->layout.nodeOf[r] == comm->node())
      return fail(zcollSystemError, "ZCOLL_DEVICE_TRANSPORT=cuda_ipc: no cuda_ipc to rank %d: %s",
                  r, why[r].c_str());
  }
  comm->deviceRoute.assign(n, nullptr);
  comm->deviceRouteWhy.assign(n, "");
  for (int r = 0; r < n; ++r) {
    comm->deviceRoute[r] = routes[r].transport;
    comm->deviceRouteWhy[r] = routes[r].why;
  }
  auto onCudaIpc = [&](const Route& x) {
    return x.transport != nullptr && x.transport == comm->cudaIpc.get();
  };
  if (std::none_of(routes.begin(), routes.end(), onCudaIpc)) {
    comm->cudaIpc.reset();  // every peer has read this rank's probe by now
  } else {
    comm->cudaIpc->setControlRoutes(comm->route, comm->rank);
  }
  if (comm->staged) comm->staged->setHostRoutes(comm->route);
  if (comm->peers[comm->rank].device.present)
    for (const std::string& line : summarizeRoutes(routes))
      ZCOLL_INFO(LogSubsys::kNet, "%s rank %d device routes: %s", comm->name.c_str(),
                 comm->rank, line.c_str());
  return zcollSuccess;
}

Result wire(zcollComm* comm, const std::vector<std::string>& packed) {
  std::vector<TransportAddresses> addresses(comm->nranks);
  for (int r = 0; r < comm->nranks; ++r)
    ZCOLL_CHECK(unpackAddresses(packed[r], r, &addresses[r]));
  std::vector<uint64_t> hosts(comm->nranks);
  for (int r = 0; r < comm->nranks; ++r) hosts[r] = comm->peers[r].hostHash;
  comm->layout = buildNodeLayout(hosts);
  ZCOLL_CHECK(learnShmPeers(comm, addresses));
  ZCOLL_CHECK(chooseRoutes(comm, addresses));
  chooseSpinCount(comm);
  ZCOLL_CHECK(connectShm(comm));
  ZCOLL_CHECK(connectNet(comm, addresses));
  comm->sendSeq.assign(comm->nranks, 0);
  comm->recvSeq.assign(comm->nranks, 0);
  comm->magic = kCommMagic;
  // No rank may leave init (and possibly destroy its endpoints) before every peer has
  // connected to it; the barrier also completes transport wire-up.
  ZCOLL_CHECK(barrierDissemination(comm));
  ZCOLL_CHECK(chooseDeviceRoutes(comm, addresses));
  ZCOLL_CHECK(armPeerNotices(comm));
  ZCOLL_INFO(LogSubsys::kInit,
             "%s rank %d/%d pid %d on %s: node %d/%d, local rank %d/%d, topology: %s",
             comm->name.c_str(), comm->rank, comm->nranks, comm->peers[comm->rank].pid,
             comm->peers[comm->rank].hostName, comm->node(), comm->layout.nodes,
             comm->layout.localOf[comm->rank], comm->layout.localSize(comm->rank),
             describeTopology(comm->peers[comm->rank].topo).c_str());
  return zcollSuccess;
}

std::unique_ptr<zcollComm> newComm(const InitSettings& s, int nranks, int rank) {
  auto comm = std::make_unique<zcollComm>();
  comm->rank = rank;
  comm->nranks = nranks;
  comm->timeoutSec = s.timeoutSec;
  comm->partialsInDtype = s.reducePartials == "dtype";
  comm->checkCalls = s.checkCalls == "on";
  comm->deviceCallsAsync = s.deviceCalls == "async";
  comm->spinSetting = s.spinCount;
  comm->forcedAlgorithm = s.forcedAlgorithm;
  comm->hostIdOverride = s.hostId;
  comm->name = s.name;
  comm->stats.reset();
  return comm;
}

}  // namespace

InitSettings defaultSettings() {
  InitSettings s;
  s.timeoutSec = static_cast<int>(paramInt("ZCOLL_TIMEOUT"));
  s.reducePartials = paramString("ZCOLL_REDUCE_PARTIALS");
  s.checkCalls = paramString("ZCOLL_CHECK_CALLS");
  s.deviceCalls = paramString("ZCOLL_DEVICE_CALLS");
  s.spinCount = paramInt("ZCOLL_SPIN_COUNT");
  s.forcedAlgorithm = readAlgorithmOverrides();
  s.name = "comm";
  return s;
}

Result readConfig(const zcollConfig_t* config, InitSettings* out) {
  if (config != nullptr) {
    if (config->magic != ZCOLL_CONFIG_MAGIC || config->size < kMinConfigSize)
      return fail(zcollInvalidArgument,
                  "config was not initialized with ZCOLL_CONFIG_INITIALIZER (magic %#x, size %zu)",
                  config->magic, config->size);
    auto has = [&](size_t offset, size_t bytes) { return config->size >= offset + bytes; };
    if (config->size > sizeof(zcollConfig_t) || config->version > ZCOLL_VERSION_CODE)
      ZCOLL_WARN(LogSubsys::kInit, "config from a newer zcoll (size %zu, version %u; this is %zu, "
                 "%d): fields this version does not know are ignored", config->size,
                 config->version, sizeof(zcollConfig_t), ZCOLL_VERSION_CODE);
    if (config->timeoutSec != ZCOLL_CONFIG_UNDEF_INT) {
      if (config->timeoutSec <= 0)
        return fail(zcollInvalidArgument, "config timeoutSec %d must be positive",
                    config->timeoutSec);
      out->timeoutSec = config->timeoutSec;
    }
    if (has(offsetof(zcollConfig_t, hostId), sizeof(char*)) && config->hostId != nullptr)
      out->hostId = config->hostId;
    if (has(offsetof(zcollConfig_t, commName), sizeof(char*)) && config->commName != nullptr)
      out->name = config->commName;
  }
  if (out->timeoutSec <= 0)
    return fail(zcollInvalidArgument, "ZCOLL_TIMEOUT must be a positive number of seconds");
  if (out->spinCount < -1)
    return fail(zcollInvalidArgument, "ZCOLL_SPIN_COUNT=%lld: use -1 (chosen at init) or a "
                "number of polls >= 0", static_cast<long long>(out->spinCount));
  if (out->reducePartials != "fp32" && out->reducePartials != "dtype")
    return fail(zcollInvalidArgument, "ZCOLL_REDUCE_PARTIALS=%s: use fp32 or dtype",
                out->reducePartials.c_str());
  if (out->checkCalls != "off" && out->checkCalls != "on")
    return fail(zcollInvalidArgument, "ZCOLL_CHECK_CALLS=%s: use off or on",
                out->checkCalls.c_str());
  if (out->deviceCalls != "async" && out->deviceCalls != "sync")
    return fail(zcollInvalidArgument, "ZCOLL_DEVICE_CALLS=%s: use async or sync",
                out->deviceCalls.c_str());
  return zcollSuccess;
}

Result createComm(const InitSettings& s, int nranks, int rank, const RendezvousId* id,
                  zcollComm** out) {
  if (id == nullptr && nranks != 1)
    return fail(zcollInternalError, "createComm: %d ranks without a rendezvous", nranks);
  std::unique_ptr<zcollComm> comm = newComm(s, nranks, rank);
  PeerInfo me{};
  ZCOLL_CHECK(describeSelf(s, rank, &me));
  std::string address;
  ZCOLL_CHECK(createTransports(comm.get(), me.device, nranks > 1, &address));
  me.device.netDirect = netCarriesDevice(comm.get(), me.device);

  std::vector<std::string> blobs;
  if (id != nullptr) {  // a lone rank with an id meets its root service too, so the service ends
    ZCOLL_CHECK(rendezvousAllGather(*id, rank, nranks, encodeRankBlob(me, address),
                                    s.timeoutSec, &blobs));
  } else {
    blobs.push_back(encodeRankBlob(me, address));
  }
  comm->peers.resize(nranks);
  std::vector<std::string> addresses(nranks);
  for (int r = 0; r < nranks; ++r)
    ZCOLL_CHECK(decodeRankBlob(blobs[r], r, &comm->peers[r], &addresses[r]));
  ZCOLL_CHECK(wire(comm.get(), addresses));
  registerComm(comm.get());
  *out = comm.release();
  return zcollSuccess;
}

namespace {

struct SplitRecord {
  int32_t color;
  int32_t key;
  uint64_t addressBytes;
  int32_t error;  // the rank's own failure before the exchange (zcollSuccess: none)
  int32_t pad;
};

// All-gather over the parent with its own algorithms (a collective on the parent).
Result parentAllGather(zcollComm* parent, const void* mine, void* all, size_t bytes) {
  CollArgs a{mine, all, bytes, zcollUint8, zcollSum, 0};
  return allGatherRing(parent, a);
}

}  // namespace

Result splitComm(zcollComm* parent, int color, int key, const InitSettings& s, zcollComm** out,
                  Result argError) {
  *out = nullptr;
  const int pn = parent->nranks;
  std::unique_ptr<zcollComm> comm;
  std::string address;
  Result mineError = argError;
  if (color >= 0 && mineError == zcollSuccess) {
    comm = newComm(s, 1, 0);
    comm->hostIdOverride = parent->hostIdOverride;
    mineError = createTransports(comm.get(), parent->peers[parent->rank].device, pn > 1,
                                 &address);
  }
  // A rank that failed already still tells the others (nobody waits for it until the timeout),
  // then every rank fails alike, before anything is connected: the parent stays usable.
  const std::string why = mineError != zcollSuccess ? threadLastError() : std::string();
  if (mineError != zcollSuccess) address.clear();
  SplitRecord mine{mineError != zcollSuccess ? -1 : color, key, address.size(), mineError, 0};
  std::vector<SplitRecord> recs(pn);
  ZCOLL_CHECK(parentAllGather(parent, &mine, recs.data(), sizeof(SplitRecord)));
  if (mineError != zcollSuccess) {
    std::string msg = why;
    const std::string prefix = std::string(resultName(mineError)) + ": ";
    if (msg.rfind(prefix, 0) == 0) msg.erase(0, prefix.size());
    return fail(mineError, "%s (no communicator was created on any rank)", msg.c_str());
  }
  for (int r = 0; r < pn; ++r)
    if (recs[r].error != zcollSuccess)
      return fail(zcollInvalidUsage, "zcollCommSplit: parent rank %d failed the split with %s "
                  "(see its zcollGetLastError); no communicator was created on any rank", r,
                  resultName(static_cast<Result>(recs[r].error)));
  // Peers' address lengths size the next exchange: bound them before trusting them.
  constexpr uint64_t kMaxAddressBytes = 64 << 10;
  size_t maxAddr = 0;
  for (int r = 0; r < pn; ++r) {
    if (recs[r].addressBytes > kMaxAddressBytes)
      return fail(zcollRemoteError, "zcollCommSplit: rank %d sent a %llu-byte transport address "
                  "(limit %llu): corrupt or foreign peer", r,
                  static_cast<unsigned long long>(recs[r].addressBytes),
                  static_cast<unsigned long long>(kMaxAddressBytes));
    maxAddr = std::max<size_t>(maxAddr, recs[r].addressBytes);
  }
  std::string padded(maxAddr, '\0');
  std::memcpy(padded.data(), address.data(), address.size());
  std::string addrs(maxAddr * pn, '\0');
  ZCOLL_CHECK(parentAllGather(parent, padded.data(), addrs.data(), maxAddr));
  if (color < 0) return zcollSuccess;

  std::vector<int> members;  // parent ranks, ordered by (key, parent rank)
  for (int r = 0; r < pn; ++r)
    if (recs[r].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return recs[a].key < recs[b].key; });
  comm->nranks = static_cast<int>(members.size());
  comm->peers.resize(members.size());
  std::vector<std::string> addresses(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    int pr = members[i];
    if (pr == parent->rank) comm->rank = static_cast<int>(i);
    comm->peers[i] = parent->peers[pr];
    comm->peers[i].rank = static_cast<int32_t>(i);
    addresses[i] = addrs.substr(pr * maxAddr, recs[pr].addressBytes);
  }
  if (comm->nranks == 1) {
    comm->cudaIpc.reset();
    comm->shm.reset();
    comm->net.reset();
  }
  ZCOLL_CHECK(wire(comm.get(), addresses));
  registerComm(comm.get());
  *out = comm.release();
  return zcollSuccess;
}

void destroyComm(zcollComm* comm, int flushMs) {
  // Unregistered: nothing new can be queued or pinned. What is still queued fails, untouched.
  comm->engine.stop(comm->aborting.load() ? zcollRemoteError : zcollInvalidUsage);
  bool healthy = comm->asyncError.load() == zcollSuccess;
  sendPeerNotices(comm, healthy ? Notice::kClosed : Notice::kFailed, kNoticeWaitMs);
  retirePeerNotices(comm);
#ifdef ZCOLL_HAVE_UCX
  if (comm->net) static_cast<UcxTransport*>(comm->net.get())->closeEndpoints(std::max(flushMs, kNoticeWaitMs));
#endif
  if (comm->shm) comm->shm->flushQueued(std::max(flushMs, kNoticeWaitMs));
  comm->cudaIpc.reset();  // first: they cancel what they still have on shm and net
  comm->staged.reset();
  comm->net.reset();
  comm->shm.reset();
  comm->scratch.release();
  comm->deviceScratch.release();
  comm->magic = kCommDeadMagic;
  delete comm;
}

}  // namespace zcoll
