// Text forms of the topology: one line for logs, a listing for zcoll_info --topology.
#include <cstdio>
#include <string>

#include "topology/topology.h"

namespace zcoll {
namespace {

std::string counted(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string cpuSetLine(const char* kind, const TopoCpuSet& c) {
  std::string line = "  " + std::string(kind) + " P#" + std::to_string(c.osIndex) + ": " +
                     counted(c.cores, "core", "cores") + ", " + counted(c.pus, "PU", "PUs") +
                     ", cpuset " + c.cpuset;
  if (c.memoryBytes > 0) line += ", " + std::to_string(c.memoryBytes >> 20) + " MiB";
  return line + "\n";
}

std::string where(int idx) { return idx >= 0 ? std::to_string(idx) : std::string("?"); }

std::string deviceLine(const char* kind, size_t i, const TopoDevice& d) {
  char ids[32] = "";
  if (!d.busId.empty()) std::snprintf(ids, sizeof(ids), " [%04x:%04x]", d.vendorId, d.deviceId);
  return "  " + std::string(kind) + " " + std::to_string(i) + ": " +
         (d.busId.empty() ? std::string("(no PCI)") : d.busId) + ids + " " +
         (d.names.empty() ? std::string("-") : d.names) + ", NUMA " + where(d.numa) +
         ", package " + where(d.package) + "\n";
}

// nvidia-smi topo -m style: the path class of every GPU pair, and each GPU's nearest NIC.
std::string gpuPathMatrix(const TopoDetail& d) {
  if (d.gpus.empty()) return "";
  std::string s = "  GPU paths (NVLinks: " + d.nvlinkSource + "):\n         ";
  for (size_t j = 0; j < d.gpus.size(); ++j) s += " GPU" + std::to_string(j) + (j < 10 ? " " : "");
  s += "  nearest NIC\n";
  for (size_t i = 0; i < d.gpus.size(); ++i) {
    std::string row = "    GPU" + std::to_string(i) + (i < 10 ? " " : "");
    for (size_t j = 0; j < d.gpus.size(); ++j)
      row += std::string("  ") + (i == j ? " X " : gpuPathName(d.gpuPaths[i][j])) + " ";
    int nic = nearestNic(d, static_cast<int>(i));
    row += nic < 0 ? std::string("  -")
                   : "  NIC " + std::to_string(nic) + " (" + gpuPathName(d.gpuNicPaths[i][nic]) + ")";
    s += row + "\n";
  }
  return s;
}

}  // namespace

std::string describeTopology(const TopoSummary& t) {
  return counted(t.packages, "package", "packages") + ", " +
         counted(t.numaNodes, "NUMA node", "NUMA nodes") + ", " +
         counted(t.cores, "core", "cores") + ", " + counted(t.pus, "PU", "PUs") + ", " +
         counted(t.gpus, "GPU", "GPUs") + ", " + counted(t.nics, "NIC", "NICs");
}

std::string formatTopologyDetail(const TopoDetail& d) {
  std::string s = "Topology of " + d.source + ": " + describeTopology(d.summary) + "\n";
  s += "  this thread: package " + where(d.summary.myPackage) + ", NUMA " +
       where(d.summary.myNuma) + " (? = unbound or spread)\n";
  for (const TopoCpuSet& p : d.packages) s += cpuSetLine("package", p);
  for (const TopoCpuSet& n : d.numaNodes) s += cpuSetLine("NUMA", n);
  for (size_t i = 0; i < d.gpus.size(); ++i) s += deviceLine("GPU", i, d.gpus[i]);
  for (size_t i = 0; i < d.nics.size(); ++i) s += deviceLine("NIC", i, d.nics[i]);
  return s + gpuPathMatrix(d);
}

Result describeTopologyDetail(std::string* text) {
  if (text == nullptr) return fail(zcollInvalidArgument, "describeTopologyDetail: text is NULL");
  TopoDetail d;
  ZCOLL_CHECK(discoverTopologyDetail(&d));
  *text = formatTopologyDetail(d);
  return zcollSuccess;
}

}  // namespace zcoll
