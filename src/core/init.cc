#include "core/init.h"

#include "core/rank_blob.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "coll/coll.h"
#include "core/api_guard.h"
#include "core/params.h"
#include "core/peer_notice.h"
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
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : id) h = (h ^ c) * 0x100000001b3ULL;
  return h;
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
  ZCOLL_CHECK(UcxTransport::create(comm->name, &ucx));
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

// Every transport this rank offers; `packed` is what its peers need (transport/addresses.h).
Result createTransports(zcollComm* comm, std::string* packed) {
  std::string forced;
  ZCOLL_CHECK(readForcedTransport(&forced));
  TransportAddresses addresses;
  ZCOLL_CHECK(createShmTransport(comm, forced, &addresses));
  ZCOLL_CHECK(createNetTransport(comm, forced, &addresses));
  *packed = packAddresses(addresses);
  return zcollSuccess;
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
  ZCOLL_CHECK(selectRoutes(comm->transports(), reach, &routes));
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
  if (nranks > 1) ZCOLL_CHECK(createTransports(comm.get(), &address));

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
};

// All-gather over the parent with its own algorithms (a collective on the parent).
Result parentAllGather(zcollComm* parent, const void* mine, void* all, size_t bytes) {
  CollArgs a{mine, all, bytes, zcollUint8, zcollSum, 0};
  return allGatherRing(parent, a);
}

}  // namespace

Result splitComm(zcollComm* parent, int color, int key, const InitSettings& s, zcollComm** out) {
  *out = nullptr;
  const int pn = parent->nranks;
  std::unique_ptr<zcollComm> comm;
  std::string address;
  if (color >= 0) {
    comm = newComm(s, 1, 0);
    comm->hostIdOverride = parent->hostIdOverride;
    if (pn > 1) ZCOLL_CHECK(createTransports(comm.get(), &address));
  }
  SplitRecord mine{color, key, address.size()};
  std::vector<SplitRecord> recs(pn);
  ZCOLL_CHECK(parentAllGather(parent, &mine, recs.data(), sizeof(SplitRecord)));
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
  comm->net.reset();
  comm->shm.reset();
  comm->scratch.release();
  comm->deviceScratch.release();
  comm->staging.release();
  comm->magic = kCommDeadMagic;
  delete comm;
}

}  // namespace zcoll
