// Path classes between PCI devices from hwloc's tree (topology.h: GpuPath). Internal to
// topology/: hwloc objects of one loaded topology.
#pragma once

#include <hwloc.h>

#include "topology/topology.h"

namespace zcoll {

// The PCI path class between two distinct I/O objects (PCI devices, or OS devices on them).
GpuPath pciPathClass(hwloc_topology_t t, hwloc_obj_t a, hwloc_obj_t b);

}  // namespace zcoll
