// zcoll_info: what this build of zcoll is and how it is configured.
//   zcoll_info            version, build options, transports, topology, every parameter
//   zcoll_info --params   the parameter table only (name, default, current value, description)
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/params.h"
#include "topology/topology.h"
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
#ifdef ZCOLL_HAVE_UCX
  std::printf("  transports: self, ucx\n");
#else
  std::printf("  transports: self\n");
#endif
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

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--params") == 0) {
    printParams();
    return 0;
  }
  if (argc > 1) {
    std::fprintf(stderr, "usage: %s [--params]\n", argv[0]);
    return 2;
  }
  printBuild();
  printTopology();
  printParams();
  return 0;
}
