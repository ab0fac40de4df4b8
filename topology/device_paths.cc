// The topology as the ranks' devices see it: where a device named by its PCI bus id sits, the
// path class between two of them (cuda_ipc's choice, core/init.cc), and a rank's device in one
// line for the init log.
#include <strings.h>

#include "topology/topology.h"

namespace zcoll {

int gpuIndexByBusId(const TopoDetail& d, const char* busId) {
  if (busId == nullptr || *busId == '\0') return -1;
  for (size_t i = 0; i < d.gpus.size(); ++i)
    if (strcasecmp(d.gpus[i].busId.c_str(), busId) == 0) return static_cast<int>(i);
  return -1;
}

int gpuPathBetween(const TopoDetail& d, const char* busA, const char* busB) {
  int a = gpuIndexByBusId(d, busA), b = gpuIndexByBusId(d, busB);
  if (a < 0 || b < 0 || a == b) return -1;
  return static_cast<int>(d.gpuPaths[a][b]);
}

std::string describeGpuPlace(const TopoDetail& d, const char* busId) {
  int g = gpuIndexByBusId(d, busId);
  if (g < 0) return "not in the topology";
  std::string s = "NUMA node " + (d.gpus[g].numa >= 0 ? std::to_string(d.gpus[g].numa) : "?");
  int nic = nearestNic(d, g);
  if (nic >= 0) {
    const TopoDevice& n = d.nics[nic];
    s += ", nearest NIC " + (n.names.empty() ? n.busId : n.names) + " (" +
         gpuPathName(d.gpuNicPaths[g][nic]) + ")";
  }
  return s;
}

}  // namespace zcoll
