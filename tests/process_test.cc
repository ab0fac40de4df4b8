// Ranks as processes: every environment style of zcollCommInitFromEnv, emulated nodes, a peer
// killed in the middle of a collective (the others get zcollRemoteError, fast) and a peer that
// never arrives (zcollTimeout). The rank program is tests/programs/zcoll_probe.cc.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>

#include <chrono>
#include <cstdlib>
#include <fcntl.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using Env = std::map<std::string, std::string>;
using Clock = std::chrono::steady_clock;

// The probe is built next to the test binaries (support/test_main.cc sets the directory).
std::string probePath() {
  const char* dir = std::getenv("ZCOLL_TEST_BIN_DIR");
  return std::string(dir ? dir : ".") + "/zcoll_probe";
}

int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

struct Proc {
  pid_t pid = -1;
  std::string log;
  int status = -1;  // exit code, 128+signal, or -1 while running
  double seconds = 0;
};

// Starts the probe with the current environment plus `extra`, output to a log file.
Proc spawnProbe(const std::vector<std::string>& args, const Env& extra, int index) {
  Proc p;
  p.log = testing::TempDir() + "probe_" + std::to_string(getpid()) + "_" + std::to_string(index) + ".log";
  Env env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const char* k : {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                        "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "ZCOLL_COMM_ID",
                        "MASTER_ADDR", "MASTER_PORT", "ZCOLL_HOSTID"})
    env.erase(k);
  for (const auto& kv : extra) env[kv.first] = kv.second;
  std::vector<std::string> envStrings;
  for (const auto& kv : env) envStrings.push_back(kv.first + "=" + kv.second);
  std::vector<char*> envp, argv;
  for (auto& s : envStrings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = probePath();
  std::vector<std::string> all = {exe};
  all.insert(all.end(), args.begin(), args.end());
  for (auto& s : all) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, p.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  EXPECT_EQ(posix_spawn(&p.pid, exe.c_str(), &fa, nullptr, argv.data(), envp.data()), 0) << exe;
  posix_spawn_file_actions_destroy(&fa);
  return p;
}

// Waits for all, killing any still running after `limitSec`.
void waitAll(std::vector<Proc>& procs, int limitSec) {
  auto start = Clock::now();
  size_t left = procs.size();
  while (left > 0) {
    for (Proc& p : procs) {
      if (p.status != -1) continue;
      int st = 0;
      if (waitpid(p.pid, &st, WNOHANG) == p.pid) {
        p.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        p.seconds = std::chrono::duration<double>(Clock::now() - start).count();
        --left;
      }
    }
    if (Clock::now() - start > std::chrono::seconds(limitSec)) {
      for (Proc& p : procs)
        if (p.status == -1) kill(p.pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string readLog(const Proc& p) {
  std::ifstream f(p.log);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs `n` ranks with per-rank environments from makeEnv(rank).
std::vector<Proc> runProbes(int n, const std::vector<std::string>& args,
                            const std::function<Env(int)>& makeEnv, int limitSec = 60) {
  std::vector<Proc> procs;
  for (int r = 0; r < n; ++r) procs.push_back(spawnProbe(args, makeEnv(r), r));
  waitAll(procs, limitSec);
  return procs;
}

void expectAllExit(const std::vector<Proc>& procs, int code) {
  for (size_t r = 0; r < procs.size(); ++r)
    EXPECT_EQ(procs[r].status, code) << "rank " << r << " log:\n" << readLog(procs[r]);
}

struct Style {
  const char* name;
  const char* rankVar;
  const char* sizeVar;
  bool masterAddr;  // MASTER_ADDR/MASTER_PORT instead of ZCOLL_COMM_ID
};

class InitFromEnv : public testing::TestWithParam<Style> {};

TEST_P(InitFromEnv, ThreeRanksAllReduce) {
  const Style st = GetParam();
  const int port = freePort();
  auto procs = runProbes(3, {"ok"}, [&](int r) {
    Env e{{st.rankVar, std::to_string(r)}, {st.sizeVar, "3"}};
    if (st.masterAddr) {
      e["MASTER_ADDR"] = "127.0.0.1";
      e["MASTER_PORT"] = std::to_string(port - 1);  // zcoll uses MASTER_PORT + 1
    } else {
      e["ZCOLL_COMM_ID"] = "127.0.0.1:" + std::to_string(port);
    }
    return e;
  });
  expectAllExit(procs, 0);
}

// A one-process job (torchrun --nproc-per-node 1, zcollrun -n 1) has nobody to meet: init is
// immediate, with or without a rendezvous address in the environment.
TEST_P(InitFromEnv, OneRankNeedsNoRendezvous) {
  const Style st = GetParam();
  const int port = freePort();
  for (bool withAddress : {true, false}) {
    auto procs = runProbes(1, {"ok"}, [&](int) {
      Env e{{st.rankVar, "0"}, {st.sizeVar, "1"}, {"ZCOLL_TIMEOUT", "30"}};
      if (withAddress) e[st.masterAddr ? "MASTER_ADDR" : "ZCOLL_COMM_ID"] = "127.0.0.1";
      if (withAddress && st.masterAddr) e["MASTER_PORT"] = std::to_string(port);
      if (withAddress && !st.masterAddr) e["ZCOLL_COMM_ID"] = "127.0.0.1:" + std::to_string(port);
      return e;
    }, 10);
    expectAllExit(procs, 0);
  }
}

// The root listens where the address points, not on an interface of its own choosing: with
// 127.0.0.2 (this machine's, but no interface's first address) every style's rank 0 says so at
// INFO, and the ranks meet there.
TEST_P(InitFromEnv, TheRootListensWhereTheAddressPoints) {
  const Style st = GetParam();
  const int port = freePort();
  auto procs = runProbes(2, {"ok"}, [&](int r) {
    Env e{{st.rankVar, std::to_string(r)}, {st.sizeVar, "2"}, {"ZCOLL_DEBUG", "INFO"}};
    if (st.masterAddr) {
      e["MASTER_ADDR"] = "127.0.0.2";
      e["MASTER_PORT"] = std::to_string(port - 1);
    } else {
      e["ZCOLL_COMM_ID"] = "127.0.0.2:" + std::to_string(port);
    }
    return e;
  });
  expectAllExit(procs, 0);
  const std::string want = "rendezvous root listening on 127.0.0.2:" + std::to_string(port);
  EXPECT_NE(readLog(procs[0]).find(want), std::string::npos) << want << "\n" << readLog(procs[0]);
}

INSTANTIATE_TEST_SUITE_P(
    Styles, InitFromEnv,
    testing::Values(Style{"zcollrun", "RANK", "WORLD_SIZE", false},
                    Style{"torchrun", "RANK", "WORLD_SIZE", true},
                    Style{"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", true},
                    Style{"pmi", "PMI_RANK", "PMI_SIZE", false},
                    Style{"slurm", "SLURM_PROCID", "SLURM_NTASKS", false}),
    [](const testing::TestParamInfo<Style>& i) { return std::string(i.param.name); });

Env rankEnv(int r, int n, int port) {
  return Env{{"RANK", std::to_string(r)},
             {"WORLD_SIZE", std::to_string(n)},
             {"ZCOLL_COMM_ID", "127.0.0.1:" + std::to_string(port)}};
}

TEST(Processes, EmulatedNodesFromHostId) {
  const int port = freePort();
  auto procs = runProbes(4, {"info"}, [&](int r) {
    Env e = rankEnv(r, 4, port);
    e["ZCOLL_HOSTID"] = r % 2 == 0 ? "nodeA" : "nodeB";  // not node-contiguous
    return e;
  });
  expectAllExit(procs, 0);
  for (int r = 0; r < 4; ++r) {
    std::string want = "rank " + std::to_string(r) + " size 4 nodes 2 node " +
                       std::to_string(r % 2) + " local " + std::to_string(r / 2) + "/2";
    EXPECT_NE(readLog(procs[r]).find(want), std::string::npos) << readLog(procs[r]);
  }
}

std::vector<std::string> sharedMemoryNames() {
  std::vector<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Over each transport between the processes of one machine: shm (memfd segments, nothing named
// in /dev/shm) and ucx. The killed rank leaves no shared-memory names behind.
class PeerKilled : public testing::TestWithParam<const char*> {};

TEST_P(PeerKilled, MidCollectiveGivesRemoteErrorFastAndLeavesNoSharedMemory) {
  const int port = freePort();
  const std::vector<std::string> before = sharedMemoryNames();
  auto procs = runProbes(4, {"die", "2"}, [&](int r) {
    Env e = rankEnv(r, 4, port);
    e["ZCOLL_TIMEOUT"] = "120";  // a hang would show as a timeout after 120 s, not in 20
    e["ZCOLL_TRANSPORT"] = GetParam();
    return e;
  }, 60);
  EXPECT_EQ(procs[2].status, 128 + SIGKILL);
  for (int r : {0, 1, 3}) {
    EXPECT_EQ(procs[r].status, 3) << "rank " << r << " log:\n" << readLog(procs[r]);
    EXPECT_LT(procs[r].seconds, 20.0) << "rank " << r;
  }
  // A name left behind stays; other processes on the machine (tests running beside this one)
  // create names that UCX unlinks at once, so a new name must still be there a second later.
  std::vector<std::string> added;
  for (int tries = 0; tries < 20; ++tries) {
    const std::vector<std::string> after = sharedMemoryNames();
    added.clear();
    std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                        std::back_inserter(added));
    if (added.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(added.empty()) << "left in /dev/shm: " << testing::PrintToString(added);
}

INSTANTIATE_TEST_SUITE_P(Transports, PeerKilled, testing::Values("shm", "ucx"),
                         [](const testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

// A rank that leaves mid-way, its process alive (destroy, abort) or gone (exit): the other
// four, most not adjacent to it in the ring, get zcollRemoteError well before ZCOLL_TIMEOUT.
class PeerLeaves : public testing::TestWithParam<const char*> {};

// The flight records (ZCOLL_DEBUG_DUMP) in `dir`, by the rank each names.
std::map<int, std::string> dumpsByRank(const std::string& dir) {
  std::map<int, std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream f(dir + "/" + e->d_name);
      std::string json((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      const std::string key = "\"rank\": ";
      size_t at = json.find(key);
      if (at != std::string::npos) out[std::atoi(json.c_str() + at + key.size())] = json;
    }
    closedir(d);
  }
  return out;
}

// Each of the other ranks also keeps its flight record, with the error it failed with (not
// only ranks that time out themselves); the rank that aborts keeps its own.
TEST_P(PeerLeaves, OthersGetRemoteErrorFast) {
  const int port = freePort();
  const std::string dumps = testing::TempDir() + "leaves_" + std::to_string(getpid()) + "_" +
                            GetParam();
  ASSERT_EQ(system(("rm -rf " + dumps + " && mkdir -p " + dumps).c_str()), 0);
  auto procs = runProbes(5, {GetParam(), "1"}, [&](int r) {
    Env e = rankEnv(r, 5, port);
    e["ZCOLL_TIMEOUT"] = "60";
    e["ZCOLL_DEBUG_DUMP"] = dumps + "/%r.json";
    return e;
  }, 60);
  EXPECT_EQ(procs[1].status, 0) << readLog(procs[1]);
  const std::map<int, std::string> records = dumpsByRank(dumps);
  for (int r : {0, 2, 3, 4}) {
    EXPECT_EQ(procs[r].status, 3) << "rank " << r << " log:\n" << readLog(procs[r]);
    EXPECT_LT(procs[r].seconds, 10.0) << "rank " << r;
    EXPECT_NE(readLog(procs[r]).find("rank 1"), std::string::npos) << readLog(procs[r]);
    auto it = records.find(r);
    ASSERT_NE(it, records.end()) << "rank " << r << " wrote no flight record";
    EXPECT_NE(it->second.find("\"reason\": \"error\""), std::string::npos) << it->second;
    EXPECT_NE(it->second.find("\"error\": \"zcollRemoteError\""), std::string::npos) << it->second;
  }
  if (std::string(GetParam()) == "abort") {
    ASSERT_EQ(records.count(1), 1u);
    EXPECT_NE(records.at(1).find("\"reason\": \"abort\""), std::string::npos) << records.at(1);
    EXPECT_NE(records.at(1).find("\"error\": \"zcollRemoteError\""), std::string::npos)
        << records.at(1);
  } else {
    EXPECT_EQ(records.count(1), 0u) << "a rank that left cleanly dumped: " << records.at(1);
  }
  system(("rm -rf " + dumps).c_str());
}

INSTANTIATE_TEST_SUITE_P(Ways, PeerLeaves, testing::Values("destroy", "exit", "abort"),
                         [](const testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

// Logging: levels and subsystems in any case; with INFO the first line is the version; lines of
// a call (and of init) name the rank.
TEST(Processes, LogInfoAnyCaseStartsWithTheVersionAndNamesTheRank) {
  const int port = freePort();
  auto procs = runProbes(1, {"ok"}, [&](int) {
    Env e = rankEnv(0, 1, port);
    e["ZCOLL_DEBUG"] = "info";
    e["ZCOLL_DEBUG_SUBSYS"] = "init,Coll";
    e.erase("ZCOLL_DEBUG_FILE");
    return e;
  }, 30);
  expectAllExit(procs, 0);
  std::string log = readLog(procs[0]);
  std::string first = log.substr(0, log.find('\n'));
  EXPECT_NE(first.find("zcoll INFO INIT zcoll version "), std::string::npos) << log;
  EXPECT_NE(first.find(" (build: cuda O"), std::string::npos) << log;
  EXPECT_NE(first.find(", ucx O"), std::string::npos) << log;
  EXPECT_NE(log.find("[rank 0] zcoll INFO INIT "), std::string::npos) << log;
  EXPECT_EQ(log.find("unknown"), std::string::npos) << log;
}

TEST(Processes, UnknownLogLevelAndSubsystemWarnOnce) {
  const int port = freePort();
  auto procs = runProbes(2, {"ok"}, [&](int r) {
    Env e = rankEnv(r, 2, port);
    e["ZCOLL_DEBUG"] = "loud";
    e["ZCOLL_DEBUG_SUBSYS"] = "INIT,bogus";
    e.erase("ZCOLL_DEBUG_FILE");
    return e;
  }, 60);
  expectAllExit(procs, 0);
  for (const Proc& p : procs) {
    std::string log = readLog(p);
    auto count = [&](const std::string& needle) {
      size_t n = 0;
      for (size_t at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1))
        ++n;
      return n;
    };
    EXPECT_EQ(count("ZCOLL_DEBUG=loud: unknown level"), 1u) << log;
    EXPECT_EQ(count("ZCOLL_DEBUG takes NONE, WARN, INFO or TRACE"), 1u) << log;
    EXPECT_EQ(count("ZCOLL_DEBUG_SUBSYS=INIT,bogus: unknown subsystem bogus"), 1u) << log;
  }
}

// A rank with another ZCOLL_AUTH_TOKEN is refused with a message that fits init from the
// environment (no unique id there), naming the token.
TEST(Processes, WrongAuthTokenIsToldAboutTheToken) {
  const int port = freePort();
  auto procs = runProbes(2, {"ok"}, [&](int r) {
    Env e = rankEnv(r, 2, port);
    e["ZCOLL_AUTH_TOKEN"] = r == 0 ? "secret-a" : "secret-b";
    e["ZCOLL_TIMEOUT"] = "3";
    return e;
  }, 60);
  EXPECT_EQ(procs[0].status, 4) << readLog(procs[0]);  // the root waits for rank 1: timeout
  EXPECT_NE(procs[1].status, 0);
  std::string log = readLog(procs[1]);
  EXPECT_NE(log.find("ZCOLL_AUTH_TOKEN"), std::string::npos) << log;
}

// While it waits, the root says whom it waits for, and a rank that joined says it waits, at the
// default log level (every tenth of the timeout, at least every second: here 1 s).
TEST(Processes, PeerThatNeverArrivesGivesTimeout) {
  const int port = freePort();
  auto procs = runProbes(2, {"ok"}, [&](int r) {
    Env e = rankEnv(r, 3, port);  // rank 2 never starts
    e["ZCOLL_TIMEOUT"] = "3";
    return e;
  }, 60);
  expectAllExit(procs, 4);
  for (const Proc& p : procs) {
    EXPECT_LT(p.seconds, 15.0);
    EXPECT_NE(readLog(p).find("rank 2 never did"), std::string::npos) << readLog(p);
  }
  const std::string where = "127.0.0.1:" + std::to_string(port);
  EXPECT_NE(readLog(procs[0]).find("rendezvous root at " + where + ": waiting for rank 2 (1 of 3 "
                                   "missing), 2 s left"), std::string::npos) << readLog(procs[0]);
  EXPECT_NE(readLog(procs[1]).find("rank 1 joined the rendezvous at " + where + " and waits for "
                                   "the other ranks, 2 s left"), std::string::npos)
      << readLog(procs[1]);
}

// WORLD_SIZE differs between the ranks (the root's larger, or smaller, than the others'):
// every rank fails at once, not at ZCOLL_TIMEOUT, naming both sizes.
class MisSizedWorld : public testing::TestWithParam<int> {};

TEST_P(MisSizedWorld, EveryRankFailsAtOnceNamingBothSizes) {
  const int rootSize = GetParam(), otherSize = rootSize == 3 ? 2 : 3;
  const int port = freePort();
  auto procs = runProbes(otherSize == 2 ? 2 : 3, {"ok"}, [&](int r) {
    Env e = rankEnv(r, r == 0 ? rootSize : otherSize, port);
    e["ZCOLL_TIMEOUT"] = "300";
    return e;
  }, 60);
  const std::string sizes = "says there are " + std::to_string(otherSize) +
                            " ranks (WORLD_SIZE / nranks), the rendezvous expects " +
                            std::to_string(rootSize);
  for (size_t r = 0; r < procs.size(); ++r) {
    const std::string log = readLog(procs[r]);
    EXPECT_EQ(procs[r].status, 5) << "rank " << r << " log:\n" << log;  // zcollInvalidUsage
    EXPECT_LT(procs[r].seconds, 20.0) << "rank " << r;
    EXPECT_NE(log.find(sizes), std::string::npos) << "rank " << r << " log:\n" << log;
  }
}

INSTANTIATE_TEST_SUITE_P(RootSizes, MisSizedWorld, testing::Values(3, 2),
                         [](const testing::TestParamInfo<int>& i) {
                           return i.param == 3 ? std::string("RootLarger") : "RootSmaller";
                         });

// Another program listens on the rendezvous port (here a socket of this test that never
// answers): rank 0 names the variable that chose the port; the others give up within the
// handshake deadline (20 s), not at ZCOLL_TIMEOUT, saying the rendezvous did not answer as
// zcoll. Both ways of naming the address run side by side.
TEST(Processes, AForeignProgramOnTheRendezvousPortIsNamed) {
  int ports[2];
  int listeners[2];
  for (int j = 0; j < 2; ++j) {
    listeners[j] = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(listeners[j], reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ASSERT_EQ(listen(listeners[j], 16), 0);
    socklen_t len = sizeof(a);
    getsockname(listeners[j], reinterpret_cast<sockaddr*>(&a), &len);
    ports[j] = ntohs(a.sin_port);
  }
  std::vector<Proc> procs;
  for (int j = 0; j < 2; ++j) {
    for (int r = 0; r < 2; ++r) {
      Env e{{"RANK", std::to_string(r)}, {"WORLD_SIZE", "2"}, {"ZCOLL_TIMEOUT", "300"}};
      if (j == 0) {
        e["ZCOLL_COMM_ID"] = "127.0.0.1:" + std::to_string(ports[j]);
      } else {
        e["MASTER_ADDR"] = "127.0.0.1";
        e["MASTER_PORT"] = std::to_string(ports[j] - 1);  // zcoll uses MASTER_PORT + 1
      }
      procs.push_back(spawnProbe({"ok"}, e, 2 * j + r));
    }
  }
  waitAll(procs, 90);
  for (int fd : listeners) close(fd);
  const char* says[2] = {"(set by ZCOLL_COMM_ID; if another program uses that port, choose "
                         "another port in ZCOLL_COMM_ID)",
                         "(set by MASTER_ADDR and MASTER_PORT + 1; if another program uses that "
                         "port, choose another MASTER_PORT)"};
  for (int j = 0; j < 2; ++j) {
    const std::string where = "127.0.0.1:" + std::to_string(ports[j]);
    const Proc& root = procs[2 * j];
    const Proc& other = procs[2 * j + 1];
    EXPECT_EQ(root.status, 5) << readLog(root);  // zcollSystemError
    EXPECT_NE(readLog(root).find("rank 0 cannot serve the rendezvous at " + where + " " +
                                 says[j] + ": bind " + where + ": Address already in use"),
              std::string::npos) << readLog(root);
    EXPECT_EQ(other.status, 5) << readLog(other);
    EXPECT_LT(other.seconds, 30.0) << readLog(other);
    EXPECT_NE(readLog(other).find("the rendezvous at " + where + " did not answer as zcoll (no "
                                  "answer within 20 s of rank 1's hello)"),
              std::string::npos) << readLog(other);
  }
}

}  // namespace
