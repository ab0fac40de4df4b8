// Topology discovery: who shares a node with whom (host identity) and what this machine looks
// like (hwloc), summarized in a fixed-size record that ranks exchange at bootstrap.
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"

namespace zcoll {

// Ranks with equal `hash` are on one node. Precedence: overrideId (zcollConfig_t.hostId),
// ZCOLL_HOSTID, else hostname + boot id + IPC namespace (two containers on one host that
// cannot share memory are different nodes).
struct HostIdentity {
  uint64_t hash;
  char name[64];  // printable: the override string or the hostname (truncated)
};
Result getHostIdentity(const char* overrideId, HostIdentity* out);

// Plain old data: sent over the wire as bytes between ranks of one build.
struct TopoSummary {
  int32_t packages;
  int32_t numaNodes;
  int32_t cores;
  int32_t pus;
  int32_t myPackage;  // package / NUMA node of the calling thread's CPU binding, -1 if unbound
  int32_t myNuma;
  int32_t gpus;       // GPU-like PCI devices (NVIDIA vendor id or CUDA/NVML OS devices)
  int32_t nics;       // network OS devices (not loopback)
};

// Discovers this machine (or loads ZCOLL_TOPO_FILE, an hwloc XML file) and summarizes it.
Result discoverTopology(TopoSummary* out);

// One line for logs, e.g. "1 package, 1 NUMA, 2 cores, 2 PUs, 0 GPUs, 1 NIC".
std::string describeTopology(const TopoSummary& t);

}  // namespace zcoll
