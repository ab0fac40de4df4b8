// Where zcollGetUniqueId's rendezvous root listens (bootstrap/root_address.h): at MASTER_ADDR's
// address when it is this machine's and ZCOLL_SOCKET_IFNAME is unset (torch's backend makes its
// id this way under torchrun: with MASTER_ADDR=127.0.0.1 the root listened on eth0 before),
// at the interface ZCOLL_SOCKET_IFNAME selects when set, else at an interface. The bound address
// is read twice: from the unique id (the listener's getsockname) and from /proc/net/tcp's
// listening sockets. Only loopback addresses are bound; nothing is sent.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netdb.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "base/result.h"
#include "bootstrap/rendezvous.h"
#include "bootstrap/root_address.h"
#include "support/ranks.h"
#include "zcoll/zcoll.h"

namespace zcoll::test {
namespace {

// The IPv4 address and port the root of `uid` listens on, "a.b.c.d:port".
std::string rootOf(const zcollUniqueId& uid) {
  return addrToString(idFromUnique(uid).root);
}

// Whether /proc/net/tcp lists a listening socket bound to `ip` (dotted IPv4) and `port`.
bool listeningAt(const std::string& ip, int port) {
  in_addr a{};
  if (inet_pton(AF_INET, ip.c_str(), &a) != 1) return false;
  char want[32];
  std::snprintf(want, sizeof(want), "%08X:%04X", a.s_addr, port);  // as the kernel prints it
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  while (std::getline(tcp, line)) {
    char local[64] = {}, remote[64] = {}, state[8] = {};
    int slot = 0;
    if (std::sscanf(line.c_str(), " %d: %63s %63s %7s", &slot, local, remote, state) == 4 &&
        want == std::string(local) && std::string(state) == "0A")
      return true;
  }
  return false;
}

// Makes a unique id under the given environment and returns where its root listens; the root
// is called off afterwards.
std::string rootAddressWith(const char* ifname, const char* master) {
  ScopedEnv a("ZCOLL_SOCKET_IFNAME", ifname);
  ScopedEnv b("MASTER_ADDR", master);
  zcollUniqueId uid;
  EXPECT_EQ(zcollGetUniqueId(&uid), zcollSuccess) << zcollGetLastError(nullptr);
  const std::string root = rootOf(uid);
  const size_t colon = root.rfind(':');
  EXPECT_NE(colon, std::string::npos) << root;
  const std::string ip = root.substr(0, colon);
  if (ip.find(':') == std::string::npos) {  // IPv4: the kernel's table agrees
    EXPECT_TRUE(listeningAt(ip, std::stoi(root.substr(colon + 1)))) << root;
  }
  cancelRendezvousRoot(idFromUnique(uid));
  return ip;
}

TEST(RootAddress, ListensAtMasterAddrWhenItIsThisMachines) {
  // 127.0.0.2 is this machine's (127/8 is loopback) but no interface's first address: only
  // MASTER_ADDR can have chosen it.
  EXPECT_EQ(rootAddressWith(nullptr, "127.0.0.2"), "127.0.0.2");
  EXPECT_EQ(rootAddressWith(nullptr, "127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(rootAddressWith(nullptr, "localhost").rfind("127.", 0), 0u) << "a name resolves";
}

TEST(RootAddress, ZcollSocketIfnameWinsOverMasterAddr) {
  EXPECT_EQ(rootAddressWith("lo", "127.0.0.2"), "127.0.0.1");
}

TEST(RootAddress, AMasterAddrOfAnotherMachineIsNotBound) {
  // 192.0.2.1 (TEST-NET-1, RFC 5737) is no machine's: the root picks an interface (lo here).
  // (With ZCOLL_SOCKET_IFNAME unset it would pick eth0 on this machine: tests bind loopback
  // only, so lo stands for the interface choice.)
  ScopedEnv a("ZCOLL_SOCKET_IFNAME", nullptr);
  ScopedEnv b("MASTER_ADDR", "192.0.2.1");
  SockAddr addr{};
  std::string from;
  ASSERT_EQ(pickRootAddress(&addr, &from), zcollSuccess) << threadLastError();
  EXPECT_EQ(from.rfind("interface ", 0), 0u) << from;
  EXPECT_NE(addrToString(addr).rfind("192.0.2.1", 0), 0u) << addrToString(addr);
  EXPECT_EQ(rootAddressWith("lo", "192.0.2.1"), "127.0.0.1");
}

TEST(RootAddress, SaysWhereTheAddressCameFrom) {
  ScopedEnv a("ZCOLL_SOCKET_IFNAME", nullptr);
  ScopedEnv b("MASTER_ADDR", "127.0.0.2");
  SockAddr addr{};
  std::string from;
  ASSERT_EQ(pickRootAddress(&addr, &from), zcollSuccess) << threadLastError();
  EXPECT_EQ(from, "MASTER_ADDR=127.0.0.2");
  EXPECT_EQ(addrToString(addr), "127.0.0.2:0");
  ScopedEnv c("ZCOLL_SOCKET_IFNAME", "lo");
  ASSERT_EQ(pickRootAddress(&addr, &from), zcollSuccess) << threadLastError();
  EXPECT_EQ(from, "interface lo");
}

// This machine's own name, where /etc/hosts maps it to a loopback address (127.0.1.1 on Debian,
// 127.0.0.1 here): other machines resolve it to its real address, so the root does not take
// the loopback one (pickRootAddress only chooses; nothing is bound).
TEST(RootAddress, AHostNameResolvingToLoopbackHereIsNotTaken) {
  char name[256] = {};
  ASSERT_EQ(gethostname(name, sizeof(name) - 1), 0);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (getaddrinfo(name, nullptr, &hints, &res) != 0 || res == nullptr)
    GTEST_SKIP() << "this machine's name " << name << " does not resolve";
  const uint32_t ip = ntohl(reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr.s_addr);
  freeaddrinfo(res);
  if ((ip >> 24) != 127) GTEST_SKIP() << name << " resolves to a non-loopback address here";
  ScopedEnv a("ZCOLL_SOCKET_IFNAME", nullptr);
  ScopedEnv b("MASTER_ADDR", name);
  SockAddr addr{};
  std::string from;
  ASSERT_EQ(pickRootAddress(&addr, &from), zcollSuccess) << threadLastError();
  EXPECT_EQ(from.rfind("interface ", 0), 0u) << from;
}

}  // namespace
}  // namespace zcoll::test
