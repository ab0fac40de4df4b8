// Topology: host identity precedence and hashing, hwloc discovery of this machine, and exact
// counts from the hwloc XML fixtures in tests/data (a DGX-like node, a small CPU-only node).
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>

#include "base/result.h"
#include "support/fake_device.h"
#include "topology/topology.h"
#include "transport/cuda_ipc_transport.h"

namespace zcoll {
namespace {

// Sets (or, with nullptr, unsets) one environment variable for the scope; the test binary may
// run every case in one process, so each test leaves the environment as it found it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    hadOld_ = old != nullptr;
    if (hadOld_) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (hadOld_)
      setenv(name_.c_str(), old_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool hadOld_ = false;
};

std::string fixture(const char* name) {
  const char* src = std::getenv("ZCOLL_SOURCE_DIR");
  if (src && *src) return std::string(src) + "/tests/data/" + name;
  std::string here = __FILE__;
  return here.substr(0, here.rfind('/')) + "/data/" + name;
}

std::string tempPath(const char* name) {
  return testing::TempDir() + "zcoll_topo_" + std::to_string(getpid()) + "_" + name;
}

HostIdentity identity(const char* overrideId) {
  HostIdentity id{};
  EXPECT_EQ(getHostIdentity(overrideId, &id), zcollSuccess);
  return id;
}

TopoSummary summaryOf(const std::string& file) {
  ScopedEnv env("ZCOLL_TOPO_FILE", file.c_str());
  TopoSummary t{};
  EXPECT_EQ(discoverTopology(&t), zcollSuccess) << threadLastError();
  return t;
}

TopoDetail detailOf(const std::string& file) {
  ScopedEnv env("ZCOLL_TOPO_FILE", file.c_str());
  TopoDetail d;
  EXPECT_EQ(discoverTopologyDetail(&d), zcollSuccess) << threadLastError();
  return d;
}

// ---- Host identity ------------------------------------------------------------------------

TEST(TopologyHostId, OverrideBeatsEnvironment) {
  ScopedEnv env("ZCOLL_HOSTID", "env-node");
  HostIdentity id = identity("config-node");
  EXPECT_STREQ(id.name, "config-node");
  EXPECT_NE(id.hash, identity(nullptr).hash);
  EXPECT_STREQ(identity(nullptr).name, "env-node");
}

TEST(TopologyHostId, EnvironmentBeatsDiscovery) {
  uint64_t discovered;
  {
    ScopedEnv env("ZCOLL_HOSTID", nullptr);
    discovered = identity(nullptr).hash;
  }
  ScopedEnv env("ZCOLL_HOSTID", "env-node");
  EXPECT_STREQ(identity(nullptr).name, "env-node");
  EXPECT_STREQ(identity("").name, "env-node") << "an empty override must not win";
  EXPECT_NE(identity(nullptr).hash, discovered);
}

TEST(TopologyHostId, SameIdFromConfigOrEnvironmentIsOneNode) {
  uint64_t fromConfig;
  {
    ScopedEnv env("ZCOLL_HOSTID", nullptr);
    fromConfig = identity("node7").hash;
  }
  ScopedEnv env("ZCOLL_HOSTID", "node7");
  EXPECT_EQ(identity(nullptr).hash, fromConfig);
}

TEST(TopologyHostId, DiscoveredUsesHostnameAndIsStable) {
  ScopedEnv env("ZCOLL_HOSTID", "");  // empty counts as unset
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  HostIdentity a = identity(nullptr), b = identity(nullptr);
  EXPECT_EQ(std::string(a.name), std::string(host).substr(0, 63));
  EXPECT_EQ(a.hash, b.hash);
  // Boot id and IPC namespace are part of it: an override spelling the hostname differs.
  EXPECT_NE(a.hash, identity(host).hash);
}

// Two containers on one host with separate IPC namespaces cannot share memory: different nodes.
TEST(TopologyHostId, OtherIpcNamespaceIsAnotherNode) {
  ScopedEnv env("ZCOLL_HOSTID", nullptr);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    HostIdentity id{};
    uint64_t h = 0;  // 0: could not enter a new IPC namespace (not root)
    if (unshare(CLONE_NEWIPC) == 0 && getHostIdentity(nullptr, &id) == zcollSuccess) h = id.hash;
    _exit(write(fds[1], &h, sizeof(h)) == sizeof(h) ? 0 : 1);
  }
  close(fds[1]);
  uint64_t childHash = 0;
  ssize_t n = read(fds[0], &childHash, sizeof(childHash));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_EQ(n, static_cast<ssize_t>(sizeof(childHash)));
  if (childHash == 0) GTEST_SKIP() << "unshare(CLONE_NEWIPC) not permitted here";
  EXPECT_NE(childHash, identity(nullptr).hash);
}

TEST(TopologyHostId, DistinctOverridesGiveDistinctHashes) {
  std::set<uint64_t> hashes, highHalves;
  for (int i = 0; i < 256; ++i) {
    HostIdentity id = identity(("node" + std::to_string(i)).c_str());
    hashes.insert(id.hash);
    highHalves.insert(id.hash >> 32);
  }
  EXPECT_EQ(hashes.size(), 256u);
  EXPECT_EQ(highHalves.size(), 256u) << "similar names must differ in the high bits too";
  EXPECT_EQ(identity("node1").hash, identity("node1").hash);
}

TEST(TopologyHostId, LongIdIsTruncatedInNameButNotInHash) {
  std::string longA(200, 'x'), longB(200, 'x');
  longA += "A";
  longB += "B";
  HostIdentity a = identity(longA.c_str()), b = identity(longB.c_str());
  EXPECT_EQ(std::string(a.name), std::string(63, 'x'));
  EXPECT_EQ(a.name[63], '\0');
  EXPECT_STREQ(a.name, b.name);
  EXPECT_NE(a.hash, b.hash);
}

TEST(TopologyHostId, NullOutputIsAnError) {
  EXPECT_EQ(getHostIdentity("x", nullptr), zcollInvalidArgument);
}

// ---- This machine -------------------------------------------------------------------------

TEST(TopologyThisMachine, ThisMachineHasSaneCounts) {
  ScopedEnv env("ZCOLL_TOPO_FILE", nullptr);
  TopoSummary t{};
  ASSERT_EQ(discoverTopology(&t), zcollSuccess) << threadLastError();
  EXPECT_GE(t.packages, 1);
  EXPECT_GE(t.numaNodes, 1);
  EXPECT_GE(t.cores, 1);
  EXPECT_GE(t.pus, t.cores);
  EXPECT_GE(t.gpus, 0);
  EXPECT_GE(t.nics, 0);
  EXPECT_GE(t.myPackage, -1);
  EXPECT_LT(t.myPackage, t.packages);
  EXPECT_GE(t.myNuma, -1);
  EXPECT_LT(t.myNuma, t.numaNodes);
}

// A thread pinned to one CPU is located on a package and a NUMA node; hwloc reports the
// binding, so this checks the bound/unbound distinction, not just the counts.
TEST(TopologyThisMachine, BoundThreadReportsItsPackageAndNuma) {
  ScopedEnv env("ZCOLL_TOPO_FILE", nullptr);
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  if (CPU_COUNT(&all) < 2) GTEST_SKIP() << "one CPU: a binding always covers the machine";
  int cpu = 0;
  while (!CPU_ISSET(cpu, &all)) ++cpu;
  TopoSummary bound{};
  Result r = zcollInternalError;
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0)
      r = discoverTopology(&bound);
  }).join();
  ASSERT_EQ(r, zcollSuccess) << threadLastError();
  EXPECT_GE(bound.myPackage, 0);
  EXPECT_LT(bound.myPackage, bound.packages);
  EXPECT_GE(bound.myNuma, 0);
  EXPECT_LT(bound.myNuma, bound.numaNodes);
}

TEST(TopologyThisMachine, UnboundThreadReportsMinusOne) {
  ScopedEnv env("ZCOLL_TOPO_FILE", nullptr);
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  if (CPU_COUNT(&all) < static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)))
    GTEST_SKIP() << "the process itself is bound to a subset of the CPUs";
  TopoSummary t{};
  ASSERT_EQ(discoverTopology(&t), zcollSuccess) << threadLastError();
  EXPECT_EQ(t.myPackage, -1);
  EXPECT_EQ(t.myNuma, -1);
}

// ---- Fixtures -----------------------------------------------------------------------------

TEST(TopologyFile, DgxLikeNode) {
  TopoSummary t = summaryOf(fixture("topo_dgx_like.xml"));
  EXPECT_EQ(t.packages, 2);
  EXPECT_EQ(t.numaNodes, 2);
  EXPECT_EQ(t.cores, 16);
  EXPECT_EQ(t.pus, 32);
  EXPECT_EQ(t.gpus, 8) << "the BMC display is not a GPU; nvmlN is not a second GPU";
  EXPECT_EQ(t.nics, 8) << "ibN + mlx5_N on one HCA is one NIC";
  EXPECT_EQ(t.myPackage, -1) << "a file's topology says nothing about our binding";
  EXPECT_EQ(t.myNuma, -1);
  EXPECT_EQ(describeTopology(t), "2 packages, 2 NUMA nodes, 16 cores, 32 PUs, 8 GPUs, 8 NICs");
}

TEST(TopologyFile, SmallCpuOnlyNode) {
  TopoSummary t = summaryOf(fixture("topo_cpu_small.xml"));
  EXPECT_EQ(t.packages, 1);
  EXPECT_EQ(t.numaNodes, 1);
  EXPECT_EQ(t.cores, 4);
  EXPECT_EQ(t.pus, 8);
  EXPECT_EQ(t.gpus, 0);
  EXPECT_EQ(t.nics, 1) << "eth0 counts, lo does not";
  EXPECT_EQ(describeTopology(t), "1 package, 1 NUMA node, 4 cores, 8 PUs, 0 GPUs, 1 NIC");
}

TEST(TopologyFile, DgxDevicesAreLocatedNearTheirNuma) {
  TopoDetail d = detailOf(fixture("topo_dgx_like.xml"));
  ASSERT_EQ(d.gpus.size(), 8u);
  ASSERT_EQ(d.nics.size(), 8u);
  ASSERT_EQ(d.packages.size(), 2u);
  ASSERT_EQ(d.numaNodes.size(), 2u);
  for (size_t i = 0; i < 8; ++i) {
    int side = i < 4 ? 0 : 1;
    EXPECT_EQ(d.gpus[i].vendorId, 0x10de);
    EXPECT_EQ(d.gpus[i].numa, side) << d.gpus[i].busId;
    EXPECT_EQ(d.gpus[i].package, side);
    EXPECT_EQ(d.gpus[i].names, "nvml" + std::to_string(i));
    EXPECT_EQ(d.nics[i].vendorId, 0x15b3);
    EXPECT_EQ(d.nics[i].numa, side) << d.nics[i].busId;
    EXPECT_EQ(d.nics[i].names, "ib" + std::to_string(i) + ",mlx5_" + std::to_string(i));
  }
  EXPECT_EQ(d.gpus[0].busId, "0000:12:00.0");
  EXPECT_EQ(d.packages[0].cores, 8);
  EXPECT_EQ(d.packages[1].pus, 16);
  EXPECT_EQ(d.numaNodes[1].memoryBytes, 512ull << 30);
  EXPECT_EQ(d.source, "file " + fixture("topo_dgx_like.xml"));
}

TEST(TopologyFile, DetailTextNamesDevices) {
  ScopedEnv env("ZCOLL_TOPO_FILE", fixture("topo_dgx_like.xml").c_str());
  std::string text;
  ASSERT_EQ(describeTopologyDetail(&text), zcollSuccess) << threadLastError();
  EXPECT_NE(text.find("8 GPUs, 8 NICs"), std::string::npos) << text;
  EXPECT_NE(text.find("0000:12:00.0 [10de:20b0] nvml0, NUMA 0"), std::string::npos) << text;
  EXPECT_NE(text.find("ib7,mlx5_7, NUMA 1"), std::string::npos) << text;
}

TEST(TopologyFile, MissingFileIsInvalidArgumentNamingIt) {
  std::string path = tempPath("does_not_exist.xml");
  ScopedEnv env("ZCOLL_TOPO_FILE", path.c_str());
  clearThreadLastError();
  TopoSummary t{};
  EXPECT_EQ(discoverTopology(&t), zcollInvalidArgument);
  EXPECT_NE(threadLastError().find(path), std::string::npos) << threadLastError();
}

TEST(TopologyFile, MalformedFileIsInvalidArgumentNamingIt) {
  std::string path = tempPath("malformed.xml");
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("<?xml version=\"1.0\"?>\n<topology version=\"2.0\"><object type=\"Mach", f);
  std::fclose(f);
  ScopedEnv env("ZCOLL_TOPO_FILE", path.c_str());
  clearThreadLastError();
  TopoSummary t{};
  EXPECT_EQ(discoverTopology(&t), zcollInvalidArgument);
  EXPECT_NE(threadLastError().find(path), std::string::npos) << threadLastError();
  std::remove(path.c_str());
}

TEST(TopologyFile, ExportRoundTrips) {
  std::string out = tempPath("export.xml");
  {
    ScopedEnv env("ZCOLL_TOPO_FILE", fixture("topo_dgx_like.xml").c_str());
    ASSERT_EQ(exportTopologyXml(out.c_str()), zcollSuccess) << threadLastError();
  }
  TopoSummary back = summaryOf(out);
  EXPECT_EQ(describeTopology(back), "2 packages, 2 NUMA nodes, 16 cores, 32 PUs, 8 GPUs, 8 NICs");
  std::remove(out.c_str());
}

TEST(TopologyFile, ExportToUnwritablePathIsSystemError) {
  ScopedEnv env("ZCOLL_TOPO_FILE", fixture("topo_cpu_small.xml").c_str());
  const char* path = "/nonexistent-dir/zcoll/topo.xml";
  clearThreadLastError();
  EXPECT_EQ(exportTopologyXml(path), zcollSystemError);
  EXPECT_NE(threadLastError().find(path), std::string::npos) << threadLastError();
}

TEST(TopologyText, Plurals) {
  TopoSummary t{1, 1, 1, 1, -1, -1, 1, 0};
  EXPECT_EQ(describeTopology(t), "1 package, 1 NUMA node, 1 core, 1 PU, 1 GPU, 0 NICs");
}

// ---- GPU paths (NCCL's classes from the PCI tree; NVLinks from a table) ----------------------

int gpuByBus(const TopoDetail& d, const char* bus) {
  for (size_t i = 0; i < d.gpus.size(); ++i)
    if (d.gpus[i].busId == bus) return static_cast<int>(i);
  ADD_FAILURE() << "no GPU " << bus;
  return 0;
}

GpuPath pathOf(const TopoDetail& d, const char* a, const char* b) {
  return d.gpuPaths[gpuByBus(d, a)][gpuByBus(d, b)];
}

std::string writeTemp(const char* name, const char* text) {
  std::string path = tempPath(name);
  FILE* f = std::fopen(path.c_str(), "w");
  EXPECT_NE(f, nullptr);
  std::fputs(text, f);
  std::fclose(f);
  return path;
}

TEST(TopologyGpuPaths, DgxLikeBoxFromItsPciTree) {
  // Per package two host bridges, each with one switch holding two GPUs and two NICs.
  ScopedEnv nv("ZCOLL_NVLINK_FILE", nullptr);
  TopoDetail d = detailOf(fixture("topo_dgx_like.xml"));
  ASSERT_EQ(d.gpus.size(), 8u);
  EXPECT_EQ(pathOf(d, "0000:12:00.0", "0000:13:00.0"), GpuPath::kPIX);  // one switch
  EXPECT_EQ(pathOf(d, "0000:12:00.0", "0000:32:00.0"), GpuPath::kPHB);  // two host bridges
  EXPECT_EQ(pathOf(d, "0000:12:00.0", "0000:52:00.0"), GpuPath::kSYS);  // two packages
  EXPECT_EQ(pathOf(d, "0000:73:00.0", "0000:72:00.0"), GpuPath::kPIX);
  // Each GPU's nearest NICs are the two on its switch; ties spread: GPU i gets NIC i.
  for (int g = 0; g < 8; ++g) {
    int nic = nearestNic(d, g);
    EXPECT_EQ(nic, g) << "GPU " << g;
    EXPECT_EQ(d.gpuNicPaths[g][nic], GpuPath::kPIX) << "GPU " << g;
  }
  EXPECT_NE(d.nvlinkSource.find("none"), std::string::npos) << d.nvlinkSource;
}

TEST(TopologyGpuPaths, DgxLikeNvSwitchTableMakesEveryPairNvl) {
  ScopedEnv nv("ZCOLL_NVLINK_FILE", fixture("nvlink_dgx_like.txt").c_str());
  TopoDetail d = detailOf(fixture("topo_dgx_like.xml"));
  for (size_t i = 0; i < d.gpus.size(); ++i)
    for (size_t j = 0; j < d.gpus.size(); ++j) {
      if (i != j) {
        EXPECT_EQ(d.gpuPaths[i][j], GpuPath::kNVL) << i << "-" << j;
      }
    }
  EXPECT_EQ(d.gpuNicPaths[0][0], GpuPath::kPIX);  // NICs stay on PCI
  EXPECT_EQ(d.nvlinkSource, "ZCOLL_NVLINK_FILE " + fixture("nvlink_dgx_like.txt"));
}

TEST(TopologyGpuPaths, PcieOnlyBoxWithANestedSwitch) {
  // Package 0: switch U1 with GPUs 03, 04 and a nested switch (GPU 08, NIC 09); GPU 10 on a
  // second host bridge. Package 1: a switch with GPUs 83, 84.
  ScopedEnv nv("ZCOLL_NVLINK_FILE", nullptr);
  TopoDetail d = detailOf(fixture("topo_pcie_only.xml"));
  ASSERT_EQ(d.gpus.size(), 6u);
  ASSERT_EQ(d.nics.size(), 1u);
  EXPECT_EQ(pathOf(d, "0000:03:00.0", "0000:04:00.0"), GpuPath::kPIX);
  EXPECT_EQ(pathOf(d, "0000:03:00.0", "0000:08:00.0"), GpuPath::kPXB);
  EXPECT_EQ(pathOf(d, "0000:08:00.0", "0000:04:00.0"), GpuPath::kPXB);
  EXPECT_EQ(pathOf(d, "0000:03:00.0", "0000:10:00.0"), GpuPath::kPHB);
  EXPECT_EQ(pathOf(d, "0000:03:00.0", "0000:83:00.0"), GpuPath::kSYS);
  EXPECT_EQ(pathOf(d, "0000:84:00.0", "0000:83:00.0"), GpuPath::kPIX);
  EXPECT_EQ(d.gpuNicPaths[gpuByBus(d, "0000:08:00.0")][0], GpuPath::kPIX);
  EXPECT_EQ(d.gpuNicPaths[gpuByBus(d, "0000:03:00.0")][0], GpuPath::kPXB);
  EXPECT_EQ(d.gpuNicPaths[gpuByBus(d, "0000:10:00.0")][0], GpuPath::kPHB);
  EXPECT_EQ(d.gpuNicPaths[gpuByBus(d, "0000:83:00.0")][0], GpuPath::kSYS);
  std::string text = formatTopologyDetail(d);
  EXPECT_NE(text.find("GPU paths"), std::string::npos) << text;
  EXPECT_NE(text.find("PXB"), std::string::npos) << text;
}

TEST(TopologyGpuPaths, ADirectNvlinkLineLinksOnlyThatPair) {
  // Two PCIe cards joined by an NVLink bridge; bus ids in NVML's 8-digit-domain form work too.
  std::string path = writeTemp("nvlink_pair.txt", "# bridge\n00000000:03:00.0 0000:04:00.0\n");
  ScopedEnv nv("ZCOLL_NVLINK_FILE", path.c_str());
  TopoDetail d = detailOf(fixture("topo_pcie_only.xml"));
  EXPECT_EQ(pathOf(d, "0000:03:00.0", "0000:04:00.0"), GpuPath::kNVL);
  EXPECT_EQ(pathOf(d, "0000:04:00.0", "0000:03:00.0"), GpuPath::kNVL);
  EXPECT_EQ(pathOf(d, "0000:03:00.0", "0000:08:00.0"), GpuPath::kPXB);
  std::remove(path.c_str());
}

TEST(TopologyGpuPaths, BadNvlinkFilesAreInvalidArgumentNamingTheLine) {
  ScopedEnv topo("ZCOLL_TOPO_FILE", fixture("topo_pcie_only.xml").c_str());
  struct Case {
    const char* text;
    const char* needle;
  } cases[] = {
      {"0000:03:00.0 0000:04:00.0\n0000:03:00.0 0000:99:00.0\n", "line 2: 0000:99:00.0"},
      {"0000:03:00.0 0000:04:00.0 0000:08:00.0\n", "line 1: expected"},
      {"nvswitch 0000:03:00.0 eth0\n", "line 1: eth0"},
  };
  for (const Case& c : cases) {
    std::string path = writeTemp("nvlink_bad.txt", c.text);
    ScopedEnv nv("ZCOLL_NVLINK_FILE", path.c_str());
    TopoDetail d;
    clearThreadLastError();
    EXPECT_EQ(discoverTopologyDetail(&d), zcollInvalidArgument) << c.text;
    EXPECT_NE(threadLastError().find(c.needle), std::string::npos) << threadLastError();
    std::remove(path.c_str());
  }
  ScopedEnv missing("ZCOLL_NVLINK_FILE", tempPath("no_such_nvlinks.txt").c_str());
  TopoDetail d;
  EXPECT_EQ(discoverTopologyDetail(&d), zcollInvalidArgument);
  EXPECT_NE(threadLastError().find("cannot be read"), std::string::npos) << threadLastError();
}

// ---- cuda_ipc's choice per peer from the path between two GPUs (the fixtures) --------------

std::unique_ptr<CudaIpcTransport> cudaIpcUpTo(GpuPath level) {
  std::unique_ptr<DeviceIpc> ipc;
  EXPECT_EQ(test::fakeMakeIpc(&ipc), zcollSuccess);
  std::unique_ptr<CudaIpcTransport> t;
  EXPECT_EQ(CudaIpcTransport::create(std::move(ipc), static_cast<int>(level), false, 2000, &t),
            zcollSuccess)
      << threadLastError();
  return t;
}

// A node peer on this machine whose device shares memory, on the GPU with bus id `theirs`.
PeerReach devicePeer(const TopoDetail& d, const char* mine, const char* theirs) {
  PeerReach r;
  r.rank = 1;
  r.sameMachine = r.sameNode = r.deviceIpc = true;
  r.sameDevice = std::string(mine) == theirs;
  r.devicePath = gpuPathBetween(d, mine, theirs);
  return r;
}

// canConnect's answer, with its reason appended to the failure message of the caller.
bool connects(const CudaIpcTransport& t, const PeerReach& r, std::string* why) {
  why->clear();
  return t.canConnect(r, why);
}

TEST(CudaIpcChoice, EveryPairOfTheDgxLikeBoxIsOnNvlink) {
  test::FakeDevice device;  // the transport's DeviceIpc (its probe block)
  ScopedEnv nv("ZCOLL_NVLINK_FILE", fixture("nvlink_dgx_like.txt").c_str());
  TopoDetail d = detailOf(fixture("topo_dgx_like.xml"));
  ASSERT_EQ(d.gpus.size(), 8u);
  auto t = cudaIpcUpTo(GpuPath::kNVL);
  std::string why;
  for (const TopoDevice& a : d.gpus)
    for (const TopoDevice& b : d.gpus) {
      if (a.busId == b.busId) continue;
      EXPECT_TRUE(connects(*t, devicePeer(d, a.busId.c_str(), b.busId.c_str()), &why)) << why;
      EXPECT_EQ(why, "devices connected by NVL");
    }
}

TEST(CudaIpcChoice, PcieOnlyPathsAgainstZcollCudaIpcLevel) {
  test::FakeDevice device;
  ScopedEnv nv("ZCOLL_NVLINK_FILE", nullptr);
  TopoDetail d = detailOf(fixture("topo_pcie_only.xml"));
  struct Case {
    GpuPath level;
    const char *a, *b;
    bool expected;
    const char* why;
  } cases[] = {
      {GpuPath::kPHB, "0000:03:00.0", "0000:04:00.0", true, "devices connected by PIX"},
      {GpuPath::kPHB, "0000:03:00.0", "0000:08:00.0", true, "devices connected by PXB"},
      {GpuPath::kPHB, "0000:03:00.0", "0000:10:00.0", true, "devices connected by PHB"},
      {GpuPath::kPHB, "0000:03:00.0", "0000:83:00.0", false,
       "path SYS between the devices is beyond ZCOLL_CUDA_IPC_LEVEL=PHB"},
      {GpuPath::kSYS, "0000:03:00.0", "0000:83:00.0", true, "devices connected by SYS"},
      {GpuPath::kPIX, "0000:03:00.0", "0000:08:00.0", false,
       "path PXB between the devices is beyond ZCOLL_CUDA_IPC_LEVEL=PIX"},
      {GpuPath::kNVL, "0000:03:00.0", "0000:03:00.0", true, "same device"},
      {GpuPath::kNVL, "0000:03:00.0", "0000:ff:00.0", true,
       "devices not located in the topology; assumed reachable"},
  };
  for (const Case& c : cases) {
    auto t = cudaIpcUpTo(c.level);
    std::string why;
    EXPECT_EQ(connects(*t, devicePeer(d, c.a, c.b), &why), c.expected) << c.a << " " << c.b;
    EXPECT_EQ(why, c.why) << c.a << " " << c.b;
  }
}

TEST(CudaIpcChoice, OnlyNodePeersOnThisMachineWithShareableDevices) {
  test::FakeDevice device;
  auto t = cudaIpcUpTo(GpuPath::kSYS);
  PeerReach r;
  r.sameMachine = r.sameNode = r.deviceIpc = r.sameDevice = true;
  std::string why;
  EXPECT_TRUE(connects(*t, r, &why)) << why;
  PeerReach self = r;
  self.self = true;
  EXPECT_FALSE(connects(*t, self, &why));
  PeerReach remote = r;
  remote.sameMachine = false;
  EXPECT_FALSE(connects(*t, remote, &why));
  EXPECT_EQ(why, "another machine");
  PeerReach otherNode = r;
  otherNode.sameNode = false;  // ZCOLL_HOSTID splits this machine: that node's bytes are staged
  EXPECT_FALSE(connects(*t, otherNode, &why));
  PeerReach noDevice = r;
  noDevice.deviceIpc = false;
  EXPECT_FALSE(connects(*t, noDevice, &why));
  EXPECT_EQ(why, "a rank has no device whose memory it can share");
}

TEST(CudaIpcChoice, DescribesWhereAGpuSits) {
  ScopedEnv nv("ZCOLL_NVLINK_FILE", nullptr);
  TopoDetail d = detailOf(fixture("topo_pcie_only.xml"));
  EXPECT_EQ(describeGpuPlace(d, "0000:08:00.0").rfind("NUMA node", 0), 0u);
  EXPECT_NE(describeGpuPlace(d, "0000:08:00.0").find("(PIX)"), std::string::npos)
      << describeGpuPlace(d, "0000:08:00.0");
  EXPECT_EQ(describeGpuPlace(d, "0000:ff:00.0"), "not in the topology");
  EXPECT_EQ(gpuIndexByBusId(d, "0000:08:00.0"), gpuByBus(d, "0000:08:00.0"));
  EXPECT_EQ(gpuIndexByBusId(d, ""), -1);
  EXPECT_EQ(gpuPathBetween(d, "0000:08:00.0", "0000:08:00.0"), -1);
}

}  // namespace
}  // namespace zcoll
