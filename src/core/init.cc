#include "core/init.h"

#include "core/rank_blob.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>

#include "base/hash.h"
#include "base/params.h"
#include "base/process.h"
#include "base/tags.h"
#include "coll/coll.h"
#include "trigger/ring.h"
#include "core/live_comms.h"
#include "core/peer_notice.h"
#include "core/progress.h"
#include "exec/device_component.h"
#include "transport/addresses.h"
#include "transport/registry.h"
#include "transport/select.h"

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

uint64_t randomMemberId() {
  std::random_device rd;
  return (uint64_t{rd()} << 32) ^ rd();
}

Result describeSelf(const InitSettings& s, int rank, PeerInfo* info) {
  std::memset(info, 0, sizeof(*info));
  info->rank = rank;
  info->pid = getpid();
  info->memberId = randomMemberId();
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

// Every transport of the table that applies to this rank (transport/registry.h; the host ones
// and cuda_ipc only with peers); `packed` is what its peers need (transport/addresses.h; empty
// for a rank alone).
Result createTransports(zcollComm* comm, const DeviceIdentity& device, bool withPeers,
                        std::string* packed) {
  const DeviceComponent* c = deviceComponent();
  TransportSettings settings;
  ZCOLL_CHECK(readTransportSettings(comm->name, device, withPeers,
                                    c != nullptr ? c->makeIpc : nullptr, &settings));
  settings.copyWaitMs = static_cast<int>(std::min<int64_t>(int64_t{comm->timeoutSec} * 1000,
                                                           INT32_MAX));
  settings.deviceCallsQueued = comm->deviceCallsAsync;
  ZCOLL_CHECK(createTransports(settings, &comm->transportList));
  *packed = packedAddresses(comm->transportList);
  return zcollSuccess;
}

// ---- Phase 2: exchange --------------------------------------------------------------------

// encodeRankBlob / decodeRankBlob: core/rank_blob.h.

// ---- Phase 3: wiring ----------------------------------------------------------------------

// The transports that carry memory of `kind` (MemKindBits), in priority order (route choice).
std::vector<Transport*> carrying(const zcollComm* comm, unsigned kind) {
  std::vector<Transport*> out;
  for (const auto& t : comm->transportList)
    if (t->memKinds() & kind) out.push_back(t.get());
  std::stable_sort(out.begin(), out.end(), [](const Transport* a, const Transport* b) {
    return transportRow(a->name())->priority < transportRow(b->name())->priority;
  });
  return out;
}

// Each peer's address for transport `t` ("" when it published none).
std::vector<std::string> addressesFor(const Transport* t,
                                      const std::vector<TransportAddresses>& addresses) {
  std::vector<std::string> out(addresses.size());
  for (size_t r = 0; r < addresses.size(); ++r) out[r] = addresses[r].of(t->name());
  return out;
}

PeerReach hostReach(const zcollComm* comm, int r) {
  PeerReach reach;
  reach.rank = r;
  reach.self = r == comm->rank;
  reach.sameMachine = comm->sameMachine(r);
  reach.sameNode = comm->layout.nodeOf[r] == comm->layout.nodeOf[comm->rank];
  return reach;
}

// Tells every transport its peers' addresses (canConnect may need them).
Result learnPeers(zcollComm* comm, const std::vector<TransportAddresses>& addresses) {
  for (const auto& t : comm->transportList) ZCOLL_CHECK(t->learn(addressesFor(t.get(), addresses)));
  return zcollSuccess;
}

// Per peer, the first host transport in priority order that can reach it (transport/select.h).
Result chooseRoutes(zcollComm* comm) {
  std::vector<PeerReach> reach(comm->nranks);
  for (int r = 0; r < comm->nranks; ++r) reach[r] = hostReach(comm, r);
  std::vector<Route> routes;
  ZCOLL_CHECK(selectRoutes(carrying(comm, kHostMemory), reach, &routes));
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

// What every transport's connect is told besides its routed peers.
ConnectArgs connectArgs(const zcollComm* comm, unsigned kind, const Transport* t,
                        const std::vector<TransportAddresses>& addresses) {
  ConnectArgs a;
  a.kind = kind;
  a.commName = comm->name.c_str();
  a.rank = comm->rank;
  a.addresses = addressesFor(t, addresses);
  a.layout = &comm->layout;
  a.pids.resize(comm->nranks);
  a.sameMachine.resize(comm->nranks);
  a.devices.resize(comm->nranks);
  for (int r = 0; r < comm->nranks; ++r) {
    a.pids[r] = comm->peers[r].pid;
    a.sameMachine[r] = comm->sameMachine(r);
    a.devices[r] = comm->peers[r].device;
  }
  return a;
}

// Connects every host-carrying transport to the peers routed to it, and only those.
Result connectHost(zcollComm* comm, const std::vector<TransportAddresses>& addresses) {
  for (Transport* t : carrying(comm, kHostMemory)) {
    ConnectArgs a = connectArgs(comm, kHostMemory, t, addresses);
    for (int r = 0; r < comm->nranks; ++r)
      if (comm->route[r] == t) a.peers.push_back(r);
    ZCOLL_CHECK(t->connect(a));
  }
  return zcollSuccess;
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

// Each pair with[r] sends its own `bytes` and receives the peer's, over the host routes.
Result exchangeWith(zcollComm* comm, const std::vector<char>& with, size_t bytes,
                    const std::vector<std::string>& mine, std::vector<std::string>* theirs) {
  RequestList reqs(2 * comm->nranks);
  theirs->assign(comm->nranks, std::string());
  for (int r = 0; r < comm->nranks; ++r) {
    if (!with[r]) continue;
    if (mine[r].size() != bytes)
      return fail(zcollInternalError, "exchange at init: %zu bytes for rank %d, not %zu",
                  mine[r].size(), r, bytes);
    (*theirs)[r].assign(bytes, '\0');
    ZCOLL_CHECK(postRecv(comm, r, &(*theirs)[r][0], bytes, makeConnectExchangeTag(r),
                         reqs.next()));
    ZCOLL_CHECK(postSend(comm, r, mine[r].data(), bytes, makeConnectExchangeTag(comm->rank),
                         reqs.next()));
  }
  return waitAll(comm, reqs.data(), reqs.size());
}

// The device route to every peer: connects every transport that carries device memory (they
// may trade verdicts with their peers: cuda_ipc), then asks them in priority order (cuda_ipc
// where both ranks of a pair agreed, ucx where both ranks' UCX carries device memory, staged
// otherwise). A device-only transport no route takes is closed. Logged at INFO (subsystem NET)
// and shown by zcoll_info --routes.
Result chooseDeviceRoutes(zcollComm* comm, const std::vector<TransportAddresses>& addresses) {
  const int n = comm->nranks;
  const std::vector<Transport*> byPriority = carrying(comm, kDeviceMemory);
  for (Transport* t : byPriority) {
    ConnectArgs a = connectArgs(comm, kDeviceMemory, t, addresses);
    a.peers.resize(n);
    std::iota(a.peers.begin(), a.peers.end(), 0);
    a.hostRoutes = comm->route;
    a.aborting = &comm->aborting;
    a.exchange = [comm](const std::vector<char>& with, size_t bytes,
                        const std::vector<std::string>& mine, std::vector<std::string>* theirs) {
      return exchangeWith(comm, with, bytes, mine, theirs);
    };
    ZCOLL_CHECK(t->connect(a));
  }
  const DeviceIdentity& me = comm->peers[comm->rank].device;
  std::vector<PeerReach> reach(n);
  for (int r = 0; r < n; ++r) {
    reach[r] = hostReach(comm, r);
    reach[r].device = true;
    reach[r].hostRoute = comm->route[r];
    reach[r].mine = &me;
    reach[r].theirs = &comm->peers[r].device;
  }
  std::vector<Route> routes;
  ZCOLL_CHECK(selectRoutes(byPriority, reach, &routes,
                           me.present ? "this rank's device copy engine did not start"
                                      : "no initialized device when the communicator was "
                                        "created"));
  comm->deviceRoute.assign(n, nullptr);
  comm->deviceRouteWhy.assign(n, "");
  for (int r = 0; r < n; ++r) {
    comm->deviceRoute[r] = routes[r].transport;
    comm->deviceRouteWhy[r] = routes[r].why;
  }
  // A device-only transport that carries no route goes (cuda_ipc: every peer has read this
  // rank's probe by now).
  for (size_t i = comm->transportList.size(); i-- > 0;) {
    Transport* t = comm->transportList[i].get();
    const bool used = std::find(comm->deviceRoute.begin(), comm->deviceRoute.end(), t) !=
                      comm->deviceRoute.end();
    if (used || (t->memKinds() & kHostMemory)) continue;
    t->close(0);
    comm->transportList.erase(comm->transportList.begin() + static_cast<long>(i));
  }
  if (me.present)
    for (const std::string& line : summarizeRoutes(routes))
      ZCOLL_INFO(LogSubsys::kNet, "%s rank %d device routes: %s", comm->name.c_str(),
                 comm->rank, line.c_str());
  return zcollSuccess;
}

// The words its queued device calls will hold their streams on (exec/wait_words.h): made now,
// while no call of this comm holds a stream, for a rank with a device whose calls are queued.
Result makeWaitWords(zcollComm* comm) {
  const DeviceComponent* device = deviceComponent();
  if (!comm->deviceCallsAsync || device == nullptr || !comm->peers[comm->rank].device.present ||
      device->allocWaitWords == nullptr)
    return zcollSuccess;
  return WaitWords::make(*device, comm->timeoutSec * 1000, &comm->waitWords);
}

// The ring of stream-triggered calls (trigger/ring.h), with ZCOLL_DEVICE_CALLS=stream: made
// alike on every rank, or none (logged at INFO with the reason; calls then run synchronously).
Result makeTriggerRing(zcollComm* comm) {
  if (!comm->deviceCallsTriggered) return zcollSuccess;
  ZCOLL_CHECK(TriggerRing::make(comm, &comm->trigger, &comm->triggerWhy));
  if (comm->trigger)
    ZCOLL_INFO(LogSubsys::kInit, "%s rank %d: stream-triggered device calls on (window slots "
               "of %zu bytes)", comm->name.c_str(), comm->rank, comm->trigger->slotBytes());
  else
    ZCOLL_INFO(LogSubsys::kInit, "%s rank %d: stream-triggered device calls off (%s): device "
               "calls run synchronously", comm->name.c_str(), comm->rank,
               comm->triggerWhy.c_str());
  return zcollSuccess;
}

// Connects the transports and meets every peer (init's barrier), then the device routes.
Result connectAndMeet(zcollComm* comm, const std::vector<TransportAddresses>& addresses) {
  ZCOLL_CHECK(learnPeers(comm, addresses));
  ZCOLL_CHECK(chooseRoutes(comm));
  chooseSpinCount(comm);
  ZCOLL_CHECK(connectHost(comm, addresses));
  comm->sendSeq.assign(comm->nranks, 0);
  comm->recvSeq.assign(comm->nranks, 0);
  comm->magic = kCommMagic;
  // No rank may leave init (and possibly destroy its endpoints) before every peer has
  // connected to it; the barrier also completes transport wire-up.
  ZCOLL_CHECK(barrierDissemination(comm));
  ZCOLL_CHECK(chooseDeviceRoutes(comm, addresses));
  ZCOLL_CHECK(makeWaitWords(comm));
  ZCOLL_CHECK(makeTriggerRing(comm));
  // Device memory is allocated and mapped above only while no stream of the process is held
  // (base/stream_holds.h). Ranks of one process (threads) must not start their calls, which
  // hold streams, before every rank is past that: a rank still allocating would wait for a
  // call that waits for it.
  bool anyDevice = false;
  for (const PeerInfo& p : comm->peers) anyDevice = anyDevice || p.device.present;
  if (anyDevice) ZCOLL_CHECK(barrierDissemination(comm));
  return zcollSuccess;
}

// A wiring step failed: when peers' processes on this machine have ended (one killed during
// init, others that failed because of it and left), that is the news, whatever the step saw (a
// segment it could not open, a barrier cut short). Names them all: which one died first is not
// known here.
Result explainWireFailure(const zcollComm* comm, Result r) {
  std::string gone;
  int count = 0;
  for (int p = 0; p < comm->nranks; ++p) {
    if (p == comm->rank || !comm->sameMachine(p) || !processGone(comm->peers[p].pid)) continue;
    gone += std::string(count++ ? " and " : "") + "rank " + std::to_string(p) + " (pid " +
            std::to_string(comm->peers[p].pid) + " on " + comm->peers[p].hostName + ")";
  }
  if (count == 0) return r;
  const std::string why = threadLastError();
  return fail(zcollRemoteError, "rank %d: %s exited while the communicator was being made (this "
              "rank saw: %s)", comm->rank, gone.c_str(), why.c_str());
}

Result wire(zcollComm* comm, const std::vector<std::string>& packed) {
  std::vector<TransportAddresses> addresses(comm->nranks);
  for (int r = 0; r < comm->nranks; ++r)
    ZCOLL_CHECK(unpackAddresses(packed[r], r, &addresses[r]));
  std::vector<uint64_t> hosts(comm->nranks);
  for (int r = 0; r < comm->nranks; ++r) hosts[r] = comm->peers[r].hostHash;
  comm->layout = buildNodeLayout(hosts);
  if (Result r = connectAndMeet(comm, addresses); r != zcollSuccess)
    return explainWireFailure(comm, r);
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
  comm->deviceCallsAsync = deviceCallsQueued(s.deviceCalls);
  comm->deviceCallsTriggered = s.deviceCalls == "stream";
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

InitSettings inheritedSettings(const zcollComm* parent, const char* suffix) {
  InitSettings s;
  s.timeoutSec = parent->timeoutSec;
  s.reducePartials = parent->partialsInDtype ? "dtype" : "fp32";
  s.checkCalls = parent->checkCalls ? "on" : "off";
  s.deviceCalls = parent->deviceCallsTriggered ? "stream" : parent->deviceCallsAsync ? "async" : "sync";
  s.spinCount = parent->spinSetting;
  s.forcedAlgorithm = parent->forcedAlgorithm;
  s.name = parent->name + suffix;
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
  if (out->deviceCalls != "auto" && out->deviceCalls != "async" && out->deviceCalls != "sync" &&
      out->deviceCalls != "stream")
    return fail(zcollInvalidArgument, "ZCOLL_DEVICE_CALLS=%s: use auto, sync, stream or async",
                out->deviceCalls.c_str());
  return zcollSuccess;
}

uint64_t commIdOf(uint64_t derivation, const std::vector<PeerInfo>& peers) {
  std::string bytes(reinterpret_cast<const char*>(&derivation), sizeof(derivation));
  for (const PeerInfo& p : peers)
    bytes.append(reinterpret_cast<const char*>(&p.memberId), sizeof(p.memberId));
  return fnv1a64(bytes);
}

uint64_t childDerivation(const zcollComm* parent, const char* kind, uint64_t attempt,
                         uint64_t detail) {
  std::string bytes(reinterpret_cast<const char*>(&parent->id), sizeof(parent->id));
  bytes += kind;
  bytes.append(reinterpret_cast<const char*>(&attempt), sizeof(attempt));
  bytes.append(reinterpret_cast<const char*>(&detail), sizeof(detail));
  return fnv1a64(bytes);
}

Result startComm(const InitSettings& s, int nranks, int rank, std::unique_ptr<zcollComm>* comm,
                 PeerInfo* me, std::string* packed) {
  *comm = newComm(s, nranks, rank);
  ZCOLL_CHECK(describeSelf(s, rank, me));
  ZCOLL_CHECK(createTransports(comm->get(), me->device, nranks > 1, packed));
  me->device.netDirect = hostRouteCarriesDevice((*comm)->transportList) ? 1 : 0;
  return zcollSuccess;
}

Result finishComm(std::vector<PeerInfo> peers, const std::vector<std::string>& addresses,
                  int rank, std::unique_ptr<zcollComm> comm, zcollComm** out) {
  comm->nranks = static_cast<int>(peers.size());
  comm->rank = rank;
  for (size_t i = 0; i < peers.size(); ++i) peers[i].rank = static_cast<int32_t>(i);
  comm->peers = std::move(peers);
  comm->id = commIdOf(comm->id, comm->peers);  // comm->id held the derivation until here
  if (comm->nranks == 1) {  // alone after all: only the transports a lone rank has
    auto& list = comm->transportList;
    list.erase(std::remove_if(list.begin(), list.end(),
                              [](const std::unique_ptr<Transport>& t) {
                                return transportRow(t->name())->needsPeers;
                              }),
               list.end());
  }
  ZCOLL_CHECK(wire(comm.get(), addresses));
  registerComm(comm.get());
  *out = comm.release();
  return zcollSuccess;
}

Result createComm(const InitSettings& s, int nranks, int rank, const RendezvousId* id,
                  zcollComm** out) {
  if (id == nullptr && nranks != 1)
    return fail(zcollInternalError, "createComm: %d ranks without a rendezvous", nranks);
  std::unique_ptr<zcollComm> comm;
  PeerInfo me{};
  std::string address;
  ZCOLL_CHECK(startComm(s, nranks, rank, &comm, &me, &address));
  std::vector<std::string> blobs;
  if (id != nullptr) {  // a lone rank with an id meets its root service too, so the service ends
    ZCOLL_CHECK(rendezvousAllGather(*id, rank, nranks, encodeRankBlob(me, address),
                                    s.timeoutSec, &blobs));
  } else {
    blobs.push_back(encodeRankBlob(me, address));
  }
  std::vector<PeerInfo> peers(nranks);
  std::vector<std::string> addresses(nranks);
  for (int r = 0; r < nranks; ++r)
    ZCOLL_CHECK(decodeRankBlob(blobs[r], r, &peers[r], &addresses[r]));
  return finishComm(std::move(peers), addresses, rank, std::move(comm), out);
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
  const uint32_t attempt = ++parent->splitCount;  // every rank of the parent calls, alike
  std::unique_ptr<zcollComm> comm;
  std::string address;
  Result mineError = argError;
  if (color >= 0 && mineError == zcollSuccess)
    mineError = startChildComm(parent, s, pn > 1, &comm, &address);
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
  std::vector<std::string> addresses(pn);
  for (int pr : members) addresses[pr] = addrs.substr(pr * maxAddr, recs[pr].addressBytes);
  comm->id = childDerivation(parent, "split", attempt, static_cast<uint32_t>(color));
  return finishChildComm(parent, members, addresses, std::move(comm), out);
}

Result startChildComm(const zcollComm* parent, const InitSettings& s, bool withPeers,
                      std::unique_ptr<zcollComm>* comm, std::string* packed) {
  *comm = newComm(s, 1, 0);
  (*comm)->hostIdOverride = parent->hostIdOverride;
  return createTransports(comm->get(), parent->peers[parent->rank].device, withPeers, packed);
}

Result finishChildComm(const zcollComm* parent, const std::vector<int>& members,
                       const std::vector<std::string>& addresses, std::unique_ptr<zcollComm> comm,
                       zcollComm** out) {
  std::vector<PeerInfo> peers(members.size());
  std::vector<std::string> mine(members.size());
  int rank = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    const int pr = members[i];
    if (pr == parent->rank) rank = static_cast<int>(i);
    peers[i] = parent->peers[pr];
    mine[i] = addresses[pr];
  }
  return finishComm(std::move(peers), mine, rank, std::move(comm), out);
}

void destroyComm(zcollComm* comm, int flushMs) {
  // Unregistered: nothing new can be queued or pinned. What is still queued fails, untouched.
  comm->engine.stop(comm->aborting.load() ? zcollRemoteError : zcollInvalidUsage);
  bool healthy = comm->asyncError.load() == zcollSuccess;
  sendPeerNotices(comm, healthy ? Notice::kClosed : Notice::kFailed, kNoticeWaitMs);
  sendGoneNotices(comm, kNoticeWaitMs);  // after a failure: a shrinking peer stops waiting
  retirePeerNotices(comm);
  // In reverse lifecycle order: the device transports (they cancel what they still have on
  // the host ones) before the host ones.
  comm->trigger.reset();  // waits for its steps (bounded): its window is cuda_ipc's
  auto& list = comm->transportList;
  for (size_t i = list.size(); i-- > 0;) list[i]->close(std::max(flushMs, kNoticeWaitMs));
  while (!list.empty()) list.pop_back();
  comm->scratch.release();
  if (comm->deviceWorkAbandoned.load()) {
    // A call gave up on its stream with work still queued there (an abort, a timeout): that
    // work may still use the device scratch, so it stays allocated.
    ZCOLL_WARN(LogSubsys::kInit, "%s: device work abandoned by an abort or timeout may still "
               "run: its scratch stays allocated", comm->name.c_str());
    comm->deviceScratch.abandon();
  } else {
    comm->deviceScratch.release();
  }
  comm->magic = kCommDeadMagic;
  delete comm;
}

}  // namespace zcoll
