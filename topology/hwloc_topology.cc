// hwloc discovery: this machine, or an hwloc XML file named by ZCOLL_TOPO_FILE (so CPU-only CI
// can test DGX-like layouts), summarized into TopoSummary / TopoDetail.
#include <hwloc.h>
#include <hwloc/export.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/params.h"
#include "topology/pci_paths.h"
#include "topology/topology.h"

namespace zcoll {
namespace {

constexpr uint16_t kNvidiaVendor = 0x10de;

// Owns one hwloc topology; knows whether it describes the machine we run on (binding queries
// are meaningless for a topology loaded from a file).
class HwlocTopology {
 public:
  HwlocTopology() = default;
  HwlocTopology(const HwlocTopology&) = delete;
  HwlocTopology& operator=(const HwlocTopology&) = delete;
  ~HwlocTopology() {
    if (topo_) hwloc_topology_destroy(topo_);
  }

  Result load();
  hwloc_topology_t get() const { return topo_; }
  bool fromFile() const { return !file_.empty(); }
  std::string source() const { return fromFile() ? "file " + file_ : "this machine"; }

 private:
  Result loadFile();

  hwloc_topology_t topo_ = nullptr;
  std::string file_;
};

Result HwlocTopology::load() {
  if (hwloc_topology_init(&topo_) != 0) {
    topo_ = nullptr;
    return fail(zcollSystemError, "hwloc_topology_init failed: %s", std::strerror(errno));
  }
  // I/O objects are dropped by default; keep GPUs, NICs and the bridges leading to them.
  hwloc_topology_set_io_types_filter(topo_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
#if HWLOC_API_VERSION >= 0x00020100
  // Components zcoll does not need, where Debian's libhwloc-plugins installs them: PCI comes
  // from Linux sysfs (hwloc's linux component) without libpciaccess, which leaves allocations
  // in its unloaded plugin at exit (a LeakSanitizer report); GPUs come from the cuda and nvml
  // components, so opencl, gl, rsmi and levelzero would only start other runtimes (an OpenCL
  // ICD such as PoCL, X11) at every init.
  for (const char* unused : {"pci", "opencl", "gl", "rsmi", "levelzero"})
    hwloc_topology_set_components(topo_, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, unused);
#endif
  file_ = paramString("ZCOLL_TOPO_FILE");
  if (fromFile()) return loadFile();
  if (hwloc_topology_load(topo_) != 0)
    return fail(zcollSystemError, "hwloc could not discover this machine: %s",
                std::strerror(errno));
  return zcollSuccess;
}

Result HwlocTopology::loadFile() {
  const char* path = file_.c_str();
  // hwloc reports a missing file as a generic load failure; say which it is.
  if (access(path, R_OK) != 0)
    return fail(zcollInvalidArgument, "ZCOLL_TOPO_FILE=%s cannot be read: %s", path,
                std::strerror(errno));
  if (hwloc_topology_set_xml(topo_, path) != 0 || hwloc_topology_load(topo_) != 0)
    return fail(zcollInvalidArgument, "ZCOLL_TOPO_FILE=%s is not a valid hwloc XML topology",
                path);
  return zcollSuccess;
}

int count(hwloc_topology_t t, hwloc_obj_type_t type) {
  int n = hwloc_get_nbobjs_by_type(t, type);
  return n < 0 ? 0 : n;
}

// The one object of `type` whose cpus the set touches; -1 if it touches none or several.
int soleIntersecting(hwloc_topology_t t, hwloc_obj_type_t type, hwloc_const_cpuset_t set) {
  int found = -1;
  for (int i = 0; i < count(t, type); ++i) {
    hwloc_obj_t o = hwloc_get_obj_by_type(t, type, static_cast<unsigned>(i));
    if (o->cpuset == nullptr || !hwloc_bitmap_intersects(o->cpuset, set)) continue;
    if (found >= 0) return -1;
    found = i;
  }
  return found;
}

// Package / NUMA node of the calling thread's binding; -1 when unbound (the binding covers the
// whole machine), spread over several, or the topology is not this machine's.
void bindingLocation(const HwlocTopology& h, TopoSummary* s) {
  s->myPackage = s->myNuma = -1;
  if (h.fromFile()) return;
  hwloc_topology_t t = h.get();
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  if (set && hwloc_get_cpubind(t, set, HWLOC_CPUBIND_THREAD) == 0 &&
      !hwloc_bitmap_isincluded(hwloc_topology_get_topology_cpuset(t), set)) {
    s->myPackage = soleIntersecting(t, HWLOC_OBJ_PACKAGE, set);
    s->myNuma = soleIntersecting(t, HWLOC_OBJ_NUMANODE, set);
  }
  hwloc_bitmap_free(set);
}

bool hasPrefix(const char* s, const char* prefix) {
  return s && std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

bool isGpuOsdev(hwloc_obj_t o) {
  hwloc_obj_osdev_type_t ty = o->attr->osdev.type;
  if (ty != HWLOC_OBJ_OSDEV_GPU && ty != HWLOC_OBJ_OSDEV_COPROC) return false;
  // Only CUDA/NVML: a DRM "card0" may be a BMC's display adapter.
  const char* sub = o->subtype;
  return (sub && (!std::strcmp(sub, "CUDA") || !std::strcmp(sub, "NVML"))) ||
         hasPrefix(o->name, "cuda") || hasPrefix(o->name, "nvml");
}

bool isNicOsdev(hwloc_obj_t o) {
  hwloc_obj_osdev_type_t ty = o->attr->osdev.type;
  if (ty != HWLOC_OBJ_OSDEV_NETWORK && ty != HWLOC_OBJ_OSDEV_OPENFABRICS) return false;
  return o->name == nullptr || std::strcmp(o->name, "lo") != 0;
}

bool isNvidiaGpuPci(hwloc_obj_t pci) {
  const hwloc_obj_attr_u::hwloc_pcidev_attr_s& a = pci->attr->pcidev;
  return a.vendor_id == kNvidiaVendor && (a.class_id == 0x0302 || a.class_id == 0x0300);
}

// Whether any OS device directly below `pci` satisfies `pred`.
bool anyOsdev(hwloc_obj_t pci, bool (*pred)(hwloc_obj_t)) {
  for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling)
    if (c->type == HWLOC_OBJ_OS_DEVICE && pred(c)) return true;
  return false;
}

std::string osdevNames(hwloc_obj_t pci) {
  std::string names;
  for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
    if (c->type != HWLOC_OBJ_OS_DEVICE || c->name == nullptr) continue;
    if (!names.empty()) names += ",";
    names += c->name;
  }
  return names;
}

// Where an I/O object attaches to the CPU side: nearest NUMA node and package.
void locate(hwloc_topology_t t, hwloc_obj_t io, TopoDevice* d) {
  d->numa = d->package = -1;
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, io);
  if (anc == nullptr) return;
  if (anc->nodeset && hwloc_bitmap_weight(anc->nodeset) == 1) {
    hwloc_obj_t node =
        hwloc_get_numanode_obj_by_os_index(t, hwloc_bitmap_first(anc->nodeset));
    if (node) d->numa = static_cast<int>(node->logical_index);
  }
  hwloc_obj_t pkg = anc->type == HWLOC_OBJ_PACKAGE
                        ? anc
                        : hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, anc);
  if (pkg) d->package = static_cast<int>(pkg->logical_index);
}

TopoDevice pciDevice(hwloc_topology_t t, hwloc_obj_t pci) {
  const hwloc_obj_attr_u::hwloc_pcidev_attr_s& a = pci->attr->pcidev;
  char bus[32];
  std::snprintf(bus, sizeof(bus), "%04x:%02x:%02x.%x", a.domain, a.bus, a.dev, a.func);
  TopoDevice d{bus, a.vendor_id, a.device_id, osdevNames(pci), -1, -1};
  locate(t, pci, &d);
  return d;
}

TopoDevice plainOsdev(hwloc_topology_t t, hwloc_obj_t os) {
  TopoDevice d{"", 0, 0, os->name ? os->name : "", -1, -1};
  locate(t, os, &d);
  return d;
}

// The hwloc objects behind TopoDetail's gpus and nics, index for index.
struct DeviceObjects {
  std::vector<hwloc_obj_t> gpus, nics;
};

// A PCI device with several OS devices (ib0 and mlx5_0) counts once; OS devices that hang off
// no PCI device (virtual or non-PCI buses) count one each.
void collectDevices(hwloc_topology_t t, TopoDetail* d, DeviceObjects* objs) {
  for (hwloc_obj_t p = nullptr; (p = hwloc_get_next_pcidev(t, p)) != nullptr;) {
    if (isNvidiaGpuPci(p) || anyOsdev(p, isGpuOsdev)) {
      d->gpus.push_back(pciDevice(t, p));
      objs->gpus.push_back(p);
    } else if (anyOsdev(p, isNicOsdev)) {
      d->nics.push_back(pciDevice(t, p));
      objs->nics.push_back(p);
    }
  }
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_osdev(t, o)) != nullptr;) {
    if (o->parent && o->parent->type == HWLOC_OBJ_PCI_DEVICE) continue;
    if (isGpuOsdev(o)) {
      d->gpus.push_back(plainOsdev(t, o));
      objs->gpus.push_back(o);
    } else if (isNicOsdev(o)) {
      d->nics.push_back(plainOsdev(t, o));
      objs->nics.push_back(o);
    }
  }
}

// PCI path classes of every GPU pair and GPU-NIC pair (NVLinks come later: applyNvlinks).
void classifyPaths(hwloc_topology_t t, const DeviceObjects& objs, TopoDetail* d) {
  const size_t g = objs.gpus.size(), n = objs.nics.size();
  d->gpuPaths.assign(g, std::vector<GpuPath>(g, GpuPath::kPIX));
  d->gpuNicPaths.assign(g, std::vector<GpuPath>(n, GpuPath::kSYS));
  for (size_t i = 0; i < g; ++i) {
    for (size_t j = 0; j < g; ++j)
      if (i != j) d->gpuPaths[i][j] = pciPathClass(t, objs.gpus[i], objs.gpus[j]);
    for (size_t k = 0; k < n; ++k)
      d->gpuNicPaths[i][k] = pciPathClass(t, objs.gpus[i], objs.nics[k]);
  }
}

TopoCpuSet cpuSetOf(hwloc_topology_t t, hwloc_obj_t o) {
  TopoCpuSet c{static_cast<int>(o->os_index), 0, 0, 0, ""};
  if (o->cpuset) {
    c.cores = hwloc_get_nbobjs_inside_cpuset_by_type(t, o->cpuset, HWLOC_OBJ_CORE);
    c.pus = hwloc_get_nbobjs_inside_cpuset_by_type(t, o->cpuset, HWLOC_OBJ_PU);
    char* text = nullptr;
    if (hwloc_bitmap_asprintf(&text, o->cpuset) >= 0 && text) c.cpuset = text;
    std::free(text);
  }
  if (o->type == HWLOC_OBJ_NUMANODE) c.memoryBytes = o->attr->numanode.local_memory;
  return c;
}

std::vector<TopoCpuSet> cpuSets(hwloc_topology_t t, hwloc_obj_type_t type) {
  std::vector<TopoCpuSet> v;
  for (int i = 0; i < count(t, type); ++i)
    v.push_back(cpuSetOf(t, hwloc_get_obj_by_type(t, type, static_cast<unsigned>(i))));
  return v;
}

void summarize(const HwlocTopology& h, TopoDetail* d) {
  hwloc_topology_t t = h.get();
  d->source = h.source();
  DeviceObjects objs;
  collectDevices(t, d, &objs);
  classifyPaths(t, objs, d);
  TopoSummary& s = d->summary;
  s.packages = count(t, HWLOC_OBJ_PACKAGE);
  s.numaNodes = count(t, HWLOC_OBJ_NUMANODE);
  s.cores = count(t, HWLOC_OBJ_CORE);
  s.pus = count(t, HWLOC_OBJ_PU);
  s.gpus = static_cast<int32_t>(d->gpus.size());
  s.nics = static_cast<int32_t>(d->nics.size());
  bindingLocation(h, &s);
}

}  // namespace

Result discoverTopologyDetail(TopoDetail* out) {
  if (out == nullptr) return fail(zcollInvalidArgument, "discoverTopologyDetail: out is NULL");
  *out = TopoDetail{};
  HwlocTopology h;
  ZCOLL_CHECK(h.load());
  summarize(h, out);
  out->packages = cpuSets(h.get(), HWLOC_OBJ_PACKAGE);
  out->numaNodes = cpuSets(h.get(), HWLOC_OBJ_NUMANODE);
  return applyNvlinks(out);
}

Result discoverTopology(TopoSummary* out) {
  if (out == nullptr) return fail(zcollInvalidArgument, "discoverTopology: out is NULL");
  *out = TopoSummary{};
  TopoDetail d;
  HwlocTopology h;
  ZCOLL_CHECK(h.load());
  summarize(h, &d);
  *out = d.summary;
  ZCOLL_INFO(LogSubsys::kTopo, "topology of %s: %s", d.source.c_str(),
             describeTopology(*out).c_str());
  return zcollSuccess;
}

Result exportTopologyXml(const char* path) {
  if (path == nullptr || *path == '\0')
    return fail(zcollInvalidArgument, "exportTopologyXml: no output path");
  HwlocTopology h;
  ZCOLL_CHECK(h.load());
  if (hwloc_topology_export_xml(h.get(), path, 0) != 0)
    return fail(zcollSystemError, "cannot write hwloc XML to %s: %s", path, std::strerror(errno));
  return zcollSuccess;
}

}  // namespace zcoll
