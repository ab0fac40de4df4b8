// NVLinks between the GPUs of a topology: from a file (ZCOLL_NVLINK_FILE, for fixtures and for
// machines whose NVML is not reachable) or from NVML loaded at run time (no link-time
// dependency: the library runs where no NVIDIA driver is installed). hwloc does not describe
// NVLink, so this is the one source of NVL in TopoDetail::gpuPaths.
#include <dlfcn.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/params.h"
#include "topology/topology.h"

namespace zcoll {

namespace {

// "dddd:bb:dd.f" from any domain width ("00000000:12:00.0" from NVML); "" if not a bus id.
std::string normalBusId(const std::string& s) {
  unsigned dom = 0, bus = 0, dev = 0, fn = 0;
  char tail = 0;
  if (std::sscanf(s.c_str(), "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4) return "";
  char out[32];
  std::snprintf(out, sizeof(out), "%04x:%02x:%02x.%x", dom, bus, dev, fn);
  return out;
}

int gpuIndex(const TopoDetail& d, const std::string& busId) {
  std::string want = normalBusId(busId);
  for (size_t i = 0; i < d.gpus.size(); ++i)
    if (!want.empty() && normalBusId(d.gpus[i].busId) == want) return static_cast<int>(i);
  return -1;
}

void link(TopoDetail* d, int a, int b) {
  if (a == b) return;
  d->gpuPaths[a][b] = d->gpuPaths[b][a] = GpuPath::kNVL;
}

// Every pair of `fabric` (GPUs with a link to an NVSwitch) is NVL.
void linkFabric(TopoDetail* d, const std::vector<int>& fabric) {
  for (int a : fabric)
    for (int b : fabric) link(d, a, b);
}

Result applyFile(const std::string& path, TopoDetail* d) {
  std::ifstream in(path);
  if (!in) return fail(zcollInvalidArgument, "ZCOLL_NVLINK_FILE=%s cannot be read", path.c_str());
  std::string line;
  for (int lineNo = 1; std::getline(in, line); ++lineNo) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.empty()) continue;
    const bool fabric = w[0] == "nvswitch";
    std::vector<int> gpus;
    for (size_t i = fabric ? 1 : 0; i < w.size(); ++i) {
      int g = gpuIndex(*d, w[i]);
      if (g < 0)
        return fail(zcollInvalidArgument, "ZCOLL_NVLINK_FILE=%s line %d: %s is not the PCI bus id "
                    "of a GPU of this topology (%s)", path.c_str(), lineNo, w[i].c_str(),
                    d->source.c_str());
      gpus.push_back(g);
    }
    if (!fabric && gpus.size() != 2)
      return fail(zcollInvalidArgument, "ZCOLL_NVLINK_FILE=%s line %d: expected \"<busid> "
                  "<busid>\" or \"nvswitch <busid>...\"", path.c_str(), lineNo);
    linkFabric(d, gpus);
  }
  d->nvlinkSource = "ZCOLL_NVLINK_FILE " + path;
  return zcollSuccess;
}

// ---- NVML, loaded at run time (declarations as nvml.h documents them) -------------------------
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr int kNvmlSuccess = 0;
constexpr unsigned kNvmlMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS (Hopper)
struct NvmlPciInfo {                    // nvmlPciInfo_t (v2 layout, NVML >= 9)
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

struct Nvml {
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*handleByBusId)(const char*, nvmlDevice_t*) = nullptr;
  int (*linkState)(nvmlDevice_t, unsigned, int*) = nullptr;
  int (*remotePci)(nvmlDevice_t, unsigned, NvmlPciInfo*) = nullptr;

  // "" when every entry point was found and NVML initialized, else why not.
  std::string open() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return "libnvidia-ml.so.1 not loadable";
    init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    shutdown = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlShutdown"));
    handleByBusId = reinterpret_cast<int (*)(const char*, nvmlDevice_t*)>(
        dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    linkState = reinterpret_cast<int (*)(nvmlDevice_t, unsigned, int*)>(
        dlsym(lib, "nvmlDeviceGetNvLinkState"));
    remotePci = reinterpret_cast<int (*)(nvmlDevice_t, unsigned, NvmlPciInfo*)>(
        dlsym(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2"));
    if (!init || !shutdown || !handleByBusId || !linkState || !remotePci)
      return "libnvidia-ml.so.1 lacks the NVLink queries";
    if (init() != kNvmlSuccess) {
      shutdown = nullptr;
      return "nvmlInit failed";
    }
    return "";
  }
  ~Nvml() {
    if (shutdown) shutdown();
    if (lib) dlclose(lib);
  }
};

void applyNvml(TopoDetail* d) {
  Nvml nvml;
  std::string why = nvml.open();
  if (!why.empty()) {
    d->nvlinkSource = "none (" + why + ")";
    return;
  }
  std::vector<int> fabric;  // GPUs with a link to something that is not one of our GPUs
  for (size_t i = 0; i < d->gpus.size(); ++i) {
    nvmlDevice_t dev = nullptr;
    const std::string& bus = d->gpus[i].busId;
    if (bus.empty() || nvml.handleByBusId(bus.c_str(), &dev) != kNvmlSuccess) continue;
    bool onSwitch = false;
    for (unsigned l = 0; l < kNvmlMaxLinks; ++l) {
      int active = 0;
      NvmlPciInfo remote{};
      if (nvml.linkState(dev, l, &active) != kNvmlSuccess || active == 0) continue;
      if (nvml.remotePci(dev, l, &remote) != kNvmlSuccess) continue;
      remote.busId[sizeof(remote.busId) - 1] = '\0';
      int peer = gpuIndex(*d, remote.busId);
      if (peer >= 0) {
        link(d, static_cast<int>(i), peer);
      } else {
        onSwitch = true;  // an NVSwitch (or a GPU outside this topology)
      }
    }
    if (onSwitch) fabric.push_back(static_cast<int>(i));
  }
  linkFabric(d, fabric);
  d->nvlinkSource = "NVML";
}

}  // namespace

const char* gpuPathName(GpuPath p) {
  switch (p) {
    case GpuPath::kNVL: return "NVL";
    case GpuPath::kPIX: return "PIX";
    case GpuPath::kPXB: return "PXB";
    case GpuPath::kPHB: return "PHB";
    case GpuPath::kSYS: return "SYS";
  }
  return "?";
}

Result applyNvlinks(TopoDetail* d) {
  if (d == nullptr) return fail(zcollInvalidArgument, "applyNvlinks: NULL topology");
  std::string file = paramString("ZCOLL_NVLINK_FILE");
  if (!file.empty()) return applyFile(file, d);
  if (d->source != "this machine") {
    d->nvlinkSource = "none (the topology is a file: ZCOLL_NVLINK_FILE gives its NVLinks)";
    return zcollSuccess;
  }
  applyNvml(d);
  return zcollSuccess;
}

int nearestNic(const TopoDetail& d, int gpu) {
  const std::vector<GpuPath>& row = d.gpuNicPaths.at(static_cast<size_t>(gpu));
  if (row.empty()) return -1;
  GpuPath best = row[0];
  for (GpuPath p : row) best = p < best ? p : best;
  std::vector<int> tied;
  for (size_t k = 0; k < row.size(); ++k)
    if (row[k] == best) tied.push_back(static_cast<int>(k));
  return tied[static_cast<size_t>(gpu) % tied.size()];
}

}  // namespace zcoll
