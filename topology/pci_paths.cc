// PCI path classes from the hwloc tree. The lowest common ancestor of the two devices decides:
// above a package -> SYS; a CPU-side object or a host bridge -> PHB; a PCI bridge -> PIX or PXB
// by the number of PCIe switches on the path.
//
// A switch is an upstream port with its downstream ports. hwloc shows the upstream port as a
// PCI bridge with at least two children, all bridges (its downstream ports), and that is how
// it is recognized here. A bridge with one bridge below it (a downstream port leading to a
// nested switch) is not one. The downstream ports belong to their upstream port's switch.
#include "topology/pci_paths.h"

namespace zcoll {

namespace {

bool isPciBridge(hwloc_obj_t o) {
  return o != nullptr && o->type == HWLOC_OBJ_BRIDGE &&
         o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
}

bool isUpstreamPort(hwloc_obj_t o) {
  if (!isPciBridge(o)) return false;
  int bridges = 0;
  for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) {
    if (c->type != HWLOC_OBJ_BRIDGE) return false;
    ++bridges;
  }
  return bridges >= 2;
}

// Switches passed going up from `o` to `top`, `top`'s own switch excluded: every PCI bridge on
// the way except downstream ports (their upstream port is counted, or is `top`'s switch).
int switchesBelow(hwloc_obj_t o, hwloc_obj_t top) {
  int n = 0;
  for (hwloc_obj_t p = o->parent; p != nullptr && p != top; p = p->parent)
    if (isPciBridge(p) && !isUpstreamPort(p->parent)) ++n;
  return n;
}

// The lowest common ancestor by parent pointers (hwloc_get_common_ancestor_obj compares depths,
// which I/O objects do not have in the normal sense).
hwloc_obj_t commonAncestor(hwloc_obj_t a, hwloc_obj_t b) {
  for (hwloc_obj_t x = a; x != nullptr; x = x->parent)
    for (hwloc_obj_t y = b; y != nullptr; y = y->parent)
      if (x == y) return x;
  return nullptr;
}

hwloc_obj_t packageOf(hwloc_topology_t t, hwloc_obj_t cpuSide) {
  if (cpuSide == nullptr || cpuSide->type == HWLOC_OBJ_PACKAGE) return cpuSide;
  return hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, cpuSide);
}

}  // namespace

GpuPath pciPathClass(hwloc_topology_t t, hwloc_obj_t a, hwloc_obj_t b) {
  hwloc_obj_t top = commonAncestor(a, b);
  if (top == nullptr) return GpuPath::kSYS;
  if (isPciBridge(top)) {
    const int switches = switchesBelow(a, top) + switchesBelow(b, top) + 1;  // + top's own
    return switches == 1 ? GpuPath::kPIX : GpuPath::kPXB;
  }
  if (top->type == HWLOC_OBJ_BRIDGE) return GpuPath::kPHB;  // both below one host bridge
  // A CPU-side object: the devices hang off different host bridges.
  hwloc_obj_t pa = packageOf(t, hwloc_get_non_io_ancestor_obj(t, a));
  hwloc_obj_t pb = packageOf(t, hwloc_get_non_io_ancestor_obj(t, b));
  return pa != nullptr && pa == pb ? GpuPath::kPHB : GpuPath::kSYS;
}

}  // namespace zcoll
