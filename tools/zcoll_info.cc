// zcoll_info: what this build of zcoll is and how it is configured.
//   zcoll_info            version, build options, transports, topology, every parameter
//   zcoll_info --version  one line: the version and the build's CUDA and UCX options
//   zcoll_info --params   the parameter table only (name, default, current value, description)
//   zcoll_info --params-markdown      docs/ENVIRONMENT.md: the table as Markdown (defaults only)
//   zcoll_info --algorithms           every algorithm of every collective, with what it does
//   zcoll_info --topology             host identity and every package/NUMA node/GPU/NIC
//   zcoll_info --topology-xml FILE    the topology as hwloc XML (a fixture for ZCOLL_TOPO_FILE)
//   zcoll_info --status [--json]      every running zcoll job of this user on this machine:
//                                     where each rank is, who is behind, mismatched calls
//                                     (tools/status_query.cc); --json: the flight records
//   zcoll_info --routes               as a rank of a job (e.g. tools/zcollrun -n 4 --nodes 2
//                                     build/zcoll_info --routes): the transport chosen for
//                                     every peer and why (and, for a rank with a device, how
//                                     device bytes reach it: cuda_ipc or staged)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/params.h"
#include "coll/coll.h"
#include "core/comm.h"
#include "exec/device_component.h"
#include "exec/executor.h"
#include "quant/isa.h"
#include "params_markdown.h"
#include "status_query.h"
#include "topology/topology.h"
#include "transport/shm_segment.h"
#include "zcoll/zcoll.h"

namespace {

void printParams() {
  std::printf("Parameters (environment variables):\n");
  for (const zcoll::ParamDesc& p : zcoll::allParams()) {
    const char* env = std::getenv(p.name);
    std::printf("  %-26s default=%-6s current=%s\n      %s\n", p.name,
                *p.defaultValue ? p.defaultValue : "\"\"",
                env ? env : "(default)", p.description);
  }
}

// The table of collectives (src/coll/collectives.h): each collective's algorithms, one line
// each, and its default rules; ZCOLL_ALGO_<KIND> forces one.
void printAlgorithms() {
  std::printf("Algorithms (forced with the parameter named; default: the first rule that holds):\n");
  for (const zcoll::Collective& c : zcoll::allCollectives()) {
    std::printf("  %s (%s, %s=NAME)\n", c.shortName, c.apiName, c.overrideParam);
    for (const zcoll::Algorithm& a : zcoll::allAlgorithms())
      if (a.kind == c.kind) std::printf("    %-24s %s\n", a.name, a.description);
    std::printf("    default: %s\n", zcoll::describeDefaults(c.kind).c_str());
  }
}

void printBuild() {
  int version = 0;
  zcollGetVersion(&version);
  std::printf("zcoll %d.%d.%d (version code %d)\n", version / 10000, version / 100 % 100,
              version % 100, version);
#ifdef ZCOLL_HAVE_CUDA
  std::printf("  CUDA kernels: built\n");
#else
  std::printf("  CUDA kernels: not built\n");
#endif
  std::printf("  executors: %s\n", zcoll::executorSummary().c_str());
#ifdef ZCOLL_NCCL_API_VERSION
  std::printf("  NCCL API: libzcoll_nccl.so (SONAME libnccl.so.2) is zcoll serving NCCL %s's API "
              "(its ncclGetVersion reports that version; docs/NCCL.md)\n", ZCOLL_NCCL_API_VERSION);
#else
  std::printf("  NCCL API: libzcoll_nccl.so not built (no nccl.h, or ZCOLL_BUILD_NCCL=OFF)\n");
#endif
  const zcoll::DeviceComponent* device = zcoll::deviceComponent();
  if (device != nullptr)
    std::printf("  device buffers: %s, on the call's stream; to node peers by cuda_ipc where "
                "both devices share memory, else through host staging (--routes shows each "
                "peer's)\n", device->name);
  else
    std::printf("  device buffers: none recognised here (no CUDA device, or CUDA not built)\n");
  std::string why;
  bool shm = zcoll::shm::probeSharing(&why);
  std::printf("  transports: self, shm (%s: %s)%s\n", shm ? "usable" : "unusable here",
              why.c_str(),
#ifdef ZCOLL_HAVE_UCX
              ", ucx"
#else
              ""
#endif
  );
}

// The CPU quantization variant of each operation (the measurement runs here if needed).
void printQuantKernels() {
  using namespace zcoll::quant;
  std::printf("  quantization kernels (%s):", isaChoiceReason());
  for (QuantOp op : {QuantOp::kQuantize, QuantOp::kDequantize, QuantOp::kSum, QuantOp::kRequantize})
    std::printf(" %s=%s", quantOpName(op), isaName(activeIsa(op)));
  std::printf("\n");
}

void printTopology() {
  zcoll::HostIdentity host{};
  zcoll::TopoSummary topo{};
  if (zcoll::getHostIdentity(nullptr, &host) == zcollSuccess)
    std::printf("  host: %s (id %016llx)\n", host.name,
                static_cast<unsigned long long>(host.hash));
  if (zcoll::discoverTopology(&topo) == zcollSuccess)
    std::printf("  topology: %s\n", zcoll::describeTopology(topo).c_str());
}

void printUsage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--version | --params | --params-markdown | --algorithms | --topology | "
               "--topology-xml FILE | --routes | --status [--json] | --help]\n",
               argv0);
}

int printTopologyDetail() {
  zcoll::HostIdentity host{};
  std::string text;
  if (zcoll::getHostIdentity(nullptr, &host) == zcollSuccess)
    std::printf("Host: %s (id %016llx)\n", host.name,
                static_cast<unsigned long long>(host.hash));
  if (zcoll::describeTopologyDetail(&text) != zcollSuccess) {
    std::fprintf(stderr, "topology: %s\n", zcoll::threadLastError().c_str());
    return 1;
  }
  std::fputs(text.c_str(), stdout);
  return 0;
}

int exportXml(const char* path) {
  if (zcoll::exportTopologyXml(path) != zcollSuccess) {
    std::fprintf(stderr, "topology: %s\n", zcoll::threadLastError().c_str());
    return 1;
  }
  std::printf("wrote %s\n", path);
  return 0;
}

// Joins the job described by the environment (zcollCommInitFromEnv) and prints this rank's
// route to every peer, as the communicator chose it at init.
int printRoutes() {
  zcollComm_t comm = nullptr;
  zcollResult_t r = zcollCommInitFromEnv(&comm, nullptr);
  if (r != zcollSuccess) {
    std::fprintf(stderr, "routes: init from the environment failed: %s | %s\n",
                 zcollGetErrorString(r), zcollGetLastError(nullptr));
    return 1;
  }
  std::printf("rank %d of %d on %s, node %d of %d:\n", comm->rank, comm->nranks,
              comm->peers[comm->rank].hostName, comm->node(), comm->layout.nodes);
  const zcoll::DeviceIdentity& dev = comm->peers[comm->rank].device;
  if (dev.present)
    std::printf("  device %s:%d, PCI %s; device bytes to each peer after the ';'\n", dev.kind,
                dev.ordinal, dev.busId[0] != '\0' ? dev.busId : "unknown");
  for (int p = 0; p < comm->nranks; ++p)
    std::printf("  rank %d -> %s%s%s\n", p, comm->routeWhy[p].c_str(), dev.present ? "; " : "",
                dev.present ? comm->deviceRouteWhy[p].c_str() : "");
  std::fflush(stdout);
  return zcollCommDestroy(comm) == zcollSuccess ? 0 : 1;
}

}  // namespace

// One line: "zcoll 0.1.0 (version code 100; build: cuda ON, ucx ON)".
void printVersion() {
  int version = 0;
  zcollGetVersion(&version);
  std::printf("zcoll %d.%d.%d (version code %d; build: cuda %s, ucx %s)\n", version / 10000,
              version / 100 % 100, version % 100, version,
#ifdef ZCOLL_HAVE_CUDA
              "ON",
#else
              "OFF",
#endif
#ifdef ZCOLL_HAVE_UCX
              "ON"
#else
              "OFF"
#endif
  );
}

int main(int argc, char** argv) {
  if (argc == 2 && (std::strcmp(argv[1], "--version") == 0 || std::strcmp(argv[1], "-V") == 0)) {
    printVersion();
    return 0;
  }
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    printUsage(argv[0]);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "--params") == 0) {
    printParams();
    return 0;
  }
  if (argc == 2 && std::strcmp(argv[1], "--params-markdown") == 0) {
    std::fputs(zcoll::environmentPageMarkdown().c_str(), stdout);
    return 0;
  }
  if (argc == 2 && std::strcmp(argv[1], "--topology") == 0) return printTopologyDetail();
  if (argc == 3 && std::strcmp(argv[1], "--topology-xml") == 0) return exportXml(argv[2]);
  if (argc == 2 && std::strcmp(argv[1], "--routes") == 0) return printRoutes();
  if (argc >= 2 && std::strcmp(argv[1], "--status") == 0)
    return printStatus(argc == 3 && std::strcmp(argv[2], "--json") == 0);
  if (argc == 2 && std::strcmp(argv[1], "--algorithms") == 0) {
    printAlgorithms();
    return 0;
  }
  if (argc > 1) {
    printUsage(argv[0]);
    return 2;
  }
  printBuild();
  printQuantKernels();
  printTopology();
  printAlgorithms();
  printParams();
  return 0;
}
