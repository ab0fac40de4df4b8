#include "bootstrap/root_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

#include "base/log.h"
#include "base/params.h"

namespace zcoll {

namespace {

// `host` (a name, an IPv4 or an IPv6 address) resolved, port 0; *why: the resolver's error.
bool resolve(const char* host, SockAddr* out, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host, "0", &hints, &res);
  if (rc != 0 || res == nullptr) {
    *why = rc != 0 ? gai_strerror(rc) : "no address";
    return false;
  }
  const bool fits = res->ai_addrlen <= sizeof(out->storage);
  if (fits) {
    std::memset(out, 0, sizeof(*out));
    std::memcpy(&out->storage, res->ai_addr, res->ai_addrlen);
    out->len = res->ai_addrlen;
  }
  freeaddrinfo(res);
  if (!fits) *why = "unsupported address family";
  return fits;
}

// Whether a socket can be bound to `a` (port 0) here: one of this machine's addresses.
bool bindableHere(const SockAddr& a) {
  Socket s(::socket(a.storage.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  return s.valid() && ::bind(s.fd(), &a.storage.sa, a.len) == 0;
}

bool isLoopback(const SockAddr& a) {
  if (a.storage.sa.sa_family == AF_INET)
    return (ntohl(a.storage.in4.sin_addr.s_addr) >> 24) == 127;
  return a.storage.sa.sa_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&a.storage.in6.sin6_addr);
}

// A loopback address only reaches this machine: taken when asked for by number or as
// "localhost", not when a host name resolves to it here (Debian's /etc/hosts maps the machine's
// own name to 127.0.1.1, while the other nodes resolve that name to its real address).
bool loopbackMeant(const char* host) {
  unsigned char buf[sizeof(in6_addr)];
  return std::strcmp(host, "localhost") == 0 || inet_pton(AF_INET, host, buf) == 1 ||
         inet_pton(AF_INET6, host, buf) == 1;
}

// MASTER_ADDR's address when it is set and this machine's.
bool masterAddress(SockAddr* out, std::string* from) {
  const char* master = std::getenv("MASTER_ADDR");
  if (master == nullptr || *master == '\0') return false;
  SockAddr a{};
  std::string why;
  if (!resolve(master, &a, &why)) {
    ZCOLL_INFO(LogSubsys::kBootstrap, "MASTER_ADDR=%s does not resolve (%s): the root picks an "
               "interface", master, why.c_str());
    return false;
  }
  if (isLoopback(a) && !loopbackMeant(master)) {
    ZCOLL_INFO(LogSubsys::kBootstrap, "MASTER_ADDR=%s resolves to %s (loopback) here, not to an "
               "address other machines reach: the root picks an interface", master,
               addrToString(a).c_str());
    return false;
  }
  if (!bindableHere(a)) {
    ZCOLL_INFO(LogSubsys::kBootstrap, "MASTER_ADDR=%s is not an address of this machine: the "
               "root picks an interface", master);
    return false;
  }
  *out = a;
  *from = std::string("MASTER_ADDR=") + master;
  return true;
}

}  // namespace

Result pickRootAddress(SockAddr* out, std::string* from) {
  if (paramString("ZCOLL_SOCKET_IFNAME").empty() && masterAddress(out, from)) return zcollSuccess;
  std::string ifName;
  ZCOLL_CHECK(pickInterfaceAddress(out, &ifName));
  *from = "interface " + ifName;
  return zcollSuccess;
}

}  // namespace zcoll
