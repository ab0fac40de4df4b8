// Topology discovery: who shares a node with whom (host identity) and what this machine looks
// like (hwloc), summarized in a fixed-size record that ranks exchange at bootstrap.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

// One line for logs, e.g. "1 package, 1 NUMA node, 2 cores, 2 PUs, 0 GPUs, 1 NIC".
std::string describeTopology(const TopoSummary& t);

// ---- Detail: for the info tool and for path selection (which NIC is near which GPU) --------

// A package or a NUMA node.
struct TopoCpuSet {
  int osIndex;
  int cores;
  int pus;
  uint64_t memoryBytes;  // NUMA nodes: local memory; packages: 0
  std::string cpuset;    // hwloc bitmap text, e.g. "0x0000ffff"
};

// One GPU or NIC. A PCI device with several OS devices (ib0 + mlx5_0) is one entry.
struct TopoDevice {
  std::string busId;  // "0000:12:00.0"; "" when not on PCI
  uint16_t vendorId;  // 0 when not on PCI
  uint16_t deviceId;
  std::string names;  // OS device names, comma-separated ("ib0,mlx5_0"); may be ""
  int numa;           // logical index of the nearest NUMA node, -1 if none or several
  int package;        // logical index of the enclosing package, -1 if none
};

struct TopoDetail {
  std::string source;  // "this machine" or "file <path>"
  TopoSummary summary;
  std::vector<TopoCpuSet> packages;
  std::vector<TopoCpuSet> numaNodes;
  std::vector<TopoDevice> gpus;
  std::vector<TopoDevice> nics;
};

// Same source as discoverTopology (ZCOLL_TOPO_FILE or this machine), with every object listed.
Result discoverTopologyDetail(TopoDetail* out);
// Multi-line text of the above, for zcoll_info --topology.
std::string formatTopologyDetail(const TopoDetail& d);
Result describeTopologyDetail(std::string* text);
// Writes the discovered (or loaded) topology as hwloc XML, e.g. to make a test fixture.
Result exportTopologyXml(const char* path);

}  // namespace zcoll
