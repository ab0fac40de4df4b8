// Topology discovery: who shares a node with whom (host identity) and what this machine looks
// like (hwloc), summarized in a fixed-size record that ranks exchange at bootstrap.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

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

// The path between two devices of one machine, named like NCCL's, best first. NVL: an NVLink
// (direct, or both GPUs on an NVSwitch fabric). PIX: through at most one PCIe switch. PXB:
// through several PCIe switches, not through a host bridge. PHB: through a host bridge (the
// CPU), inside one package. SYS: across packages (the SMP interconnect). A PCIe switch is an
// upstream port with its downstream ports: hwloc shows it as a bridge whose children are
// bridges, and it counts once.
enum class GpuPath { kNVL, kPIX, kPXB, kPHB, kSYS };
const char* gpuPathName(GpuPath p);

struct TopoDetail {
  std::string source;  // "this machine" or "file <path>"
  TopoSummary summary;
  std::vector<TopoCpuSet> packages;
  std::vector<TopoCpuSet> numaNodes;
  std::vector<TopoDevice> gpus;
  std::vector<TopoDevice> nics;
  // gpuPaths[i][j]: GPU i to GPU j (the diagonal is unused); gpuNicPaths[i][k]: GPU i to NIC k.
  // Devices off PCI are placed by where they attach (PHB inside a package, else SYS).
  std::vector<std::vector<GpuPath>> gpuPaths;
  std::vector<std::vector<GpuPath>> gpuNicPaths;
  // Where the NVLinks came from: "ZCOLL_NVLINK_FILE <path>", "NVML", or "none (<why>)".
  std::string nvlinkSource;
};

// NVLinks between the GPUs of `d` (by PCI bus id), applied to d->gpuPaths: from the file named
// by ZCOLL_NVLINK_FILE (lines "<busid> <busid>": a direct link; "nvswitch <busid> <busid> ...":
// GPUs on one NVSwitch fabric; '#' starts a comment), else from NVML (libnvidia-ml.so.1,
// loaded at run time) when the topology is this machine's, else none.
Result applyNvlinks(TopoDetail* d);

// The index of the NIC nearest GPU `gpu`, or -1 without NICs. Ties (two NICs on the GPU's
// switch) are spread by GPU index: tied[gpu % tied.size()].
int nearestNic(const TopoDetail& d, int gpu);

// The index in d.gpus of the GPU with PCI bus id `busId` (case-insensitive), or -1.
int gpuIndexByBusId(const TopoDetail& d, const char* busId);
// The path class (GpuPath as int) between the GPUs with these bus ids, or -1 when either is not
// in `d` or both are one device.
int gpuPathBetween(const TopoDetail& d, const char* busA, const char* busB);
// "NUMA node 0, nearest NIC mlx5_0 (PIX)" for the GPU with bus id `busId`.
std::string describeGpuPlace(const TopoDetail& d, const char* busId);

// Same source as discoverTopology (ZCOLL_TOPO_FILE or this machine), with every object listed.
Result discoverTopologyDetail(TopoDetail* out);
// Multi-line text of the above, for zcoll_info --topology.
std::string formatTopologyDetail(const TopoDetail& d);
Result describeTopologyDetail(std::string* text);
// Writes the discovered (or loaded) topology as hwloc XML, e.g. to make a test fixture.
Result exportTopologyXml(const char* path);

}  // namespace zcoll
