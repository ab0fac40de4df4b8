#include "bootstrap/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "base/params.h"

namespace zcoll {

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.release();
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string addrToString(const SockAddr& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (a.storage.sa.sa_family == AF_INET) {
    auto* in = &a.storage.in4;
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  auto* in6 = &a.storage.in6;
  inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
  port = ntohs(in6->sin6_port);
  return "[" + std::string(host) + "]:" + std::to_string(port);
}

Result parseHostPort(const std::string& text, SockAddr* out) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return fail(zcollInvalidArgument, "'%s' is not host:port", text.c_str());
  std::string host = text.substr(0, colon);
  std::string port = text.substr(colon + 1);
  if (host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr)
    return fail(zcollInvalidArgument, "cannot resolve '%s': %s", text.c_str(), gai_strerror(rc));
  std::memset(out, 0, sizeof(*out));
  if (res->ai_addrlen > sizeof(out->storage)) {
    freeaddrinfo(res);
    return fail(zcollInvalidArgument, "'%s': unsupported address family", text.c_str());
  }
  std::memcpy(&out->storage, res->ai_addr, res->ai_addrlen);
  out->len = res->ai_addrlen;
  freeaddrinfo(res);
  return zcollSuccess;
}

namespace {

// NCCL_SOCKET_IFNAME syntax: "eth,ib" prefixes; "^docker" excludes; "=eth0" exact names.
bool ifNameMatches(const std::string& spec, const char* name) {
  std::string s = spec;
  bool exclude = !s.empty() && s[0] == '^';
  if (exclude) s.erase(0, 1);
  bool exact = !s.empty() && s[0] == '=';
  if (exact) s.erase(0, 1);
  bool hit = false;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string tok = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!tok.empty() && (exact ? tok == name : std::strncmp(name, tok.c_str(), tok.size()) == 0))
      hit = true;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return exclude ? !hit : hit;
}

bool defaultIfAcceptable(const char* name, unsigned flags) {
  return !(flags & IFF_LOOPBACK) && std::strncmp(name, "docker", 6) != 0 &&
         std::strncmp(name, "lo", 2) != 0;
}

}  // namespace

Result pickInterfaceAddress(SockAddr* out, std::string* ifName) {
  std::string spec = paramString("ZCOLL_SOCKET_IFNAME");
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0)
    return fail(zcollSystemError, "getifaddrs: %s", std::strerror(errno));
  const ifaddrs* chosen = nullptr;
  const ifaddrs* loopback = nullptr;
  for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || !(ifa->ifa_flags & IFF_UP)) continue;
    int fam = ifa->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (fam == AF_INET6) {  // skip link-local v6: needs a scope id to be usable
      auto* in6 = reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) continue;
    }
    bool ok = spec.empty() ? defaultIfAcceptable(ifa->ifa_name, ifa->ifa_flags)
                           : ifNameMatches(spec, ifa->ifa_name);
    if (ok && (chosen == nullptr || (chosen->ifa_addr->sa_family == AF_INET6 && fam == AF_INET)))
      chosen = ifa;
    if ((ifa->ifa_flags & IFF_LOOPBACK) && fam == AF_INET) loopback = ifa;
  }
  if (chosen == nullptr && spec.empty()) chosen = loopback;
  if (chosen == nullptr) {
    freeifaddrs(list);
    return fail(zcollSystemError, "no up interface matches ZCOLL_SOCKET_IFNAME='%s'",
                spec.c_str());
  }
  std::memset(out, 0, sizeof(*out));
  out->len = chosen->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  std::memcpy(&out->storage, chosen->ifa_addr, out->len);
  *ifName = chosen->ifa_name;
  freeifaddrs(list);
  return zcollSuccess;
}

Result listenOn(SockAddr* addr, Socket* out) {
  Socket s(::socket(addr->storage.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return fail(zcollSystemError, "socket: %s", std::strerror(errno));
  int one = 1;
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(s.fd(), &addr->storage.sa, addr->len) != 0)
    return fail(zcollSystemError, "bind %s: %s", addrToString(*addr).c_str(),
                std::strerror(errno));
  if (::listen(s.fd(), 1024) != 0) return fail(zcollSystemError, "listen: %s", std::strerror(errno));
  socklen_t len = sizeof(addr->storage);
  getsockname(s.fd(), &addr->storage.sa, &len);
  addr->len = len;
  *out = std::move(s);
  return zcollSuccess;
}

namespace {

int msUntil(Deadline d) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d - Clock::now()).count();
  return ms < 0 ? 0 : static_cast<int>(ms > 1000 ? 1000 : ms);
}

// Waits for `events` on fd; false on timeout.
Result pollFor(int fd, short events, Deadline deadline, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, msUntil(deadline));
    if (rc > 0) return zcollSuccess;
    if (rc < 0 && errno != EINTR) return fail(zcollSystemError, "poll: %s", std::strerror(errno));
    if (Clock::now() >= deadline)
      return fail(zcollTimeout, "timed out waiting to %s (ZCOLL_TIMEOUT)", what);
  }
}

}  // namespace

Result acceptBefore(const Socket& listener, Deadline deadline, Socket* out) {
  ZCOLL_CHECK(pollFor(listener.fd(), POLLIN, deadline, "accept a rank"));
  int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return fail(zcollSystemError, "accept: %s", std::strerror(errno));
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  *out = Socket(fd);
  return zcollSuccess;
}

Result connectBefore(const SockAddr& addr, Deadline deadline, Socket* out) {
  for (int attempt = 0;; ++attempt) {
    Socket s(::socket(addr.storage.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid()) return fail(zcollSystemError, "socket: %s", std::strerror(errno));
    if (::connect(s.fd(), &addr.storage.sa, addr.len) == 0) {
      int one = 1;
      setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      *out = std::move(s);
      return zcollSuccess;
    }
    int err = errno;
    if (err != ECONNREFUSED && err != ETIMEDOUT && err != EAGAIN && err != ECONNRESET &&
        err != EINTR)
      return fail(zcollSystemError, "connect %s: %s", addrToString(addr).c_str(),
                  std::strerror(err));
    if (Clock::now() >= deadline)
      return fail(zcollTimeout, "could not reach the rendezvous at %s before the timeout (%s)",
                  addrToString(addr).c_str(), std::strerror(err));
    std::this_thread::sleep_for(std::chrono::milliseconds(attempt < 20 ? 10 : 100));
  }
}

Result sendAll(const Socket& s, const void* buf, size_t bytes, Deadline deadline) {
  const char* p = static_cast<const char*>(buf);
  while (bytes > 0) {
    ZCOLL_CHECK(pollFor(s.fd(), POLLOUT, deadline, "send to a peer"));
    ssize_t n = ::send(s.fd(), p, bytes, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return fail(zcollRemoteError, "bootstrap send: %s", std::strerror(errno));
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return zcollSuccess;
}

Result recvAll(const Socket& s, void* buf, size_t bytes, Deadline deadline) {
  char* p = static_cast<char*>(buf);
  while (bytes > 0) {
    ZCOLL_CHECK(pollFor(s.fd(), POLLIN, deadline, "receive from a peer"));
    ssize_t n = ::recv(s.fd(), p, bytes, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n == 0) return fail(zcollRemoteError, "bootstrap peer closed the connection");
    if (n < 0) return fail(zcollRemoteError, "bootstrap recv: %s", std::strerror(errno));
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return zcollSuccess;
}

Result sendBlob(const Socket& s, const std::string& blob, Deadline deadline) {
  uint64_t len = blob.size();
  ZCOLL_CHECK(sendAll(s, &len, sizeof(len), deadline));
  return sendAll(s, blob.data(), blob.size(), deadline);
}

Result recvBlob(const Socket& s, std::string* blob, size_t maxBytes, Deadline deadline) {
  uint64_t len = 0;
  ZCOLL_CHECK(recvAll(s, &len, sizeof(len), deadline));
  if (len > maxBytes)
    return fail(zcollRemoteError, "bootstrap message of %llu bytes exceeds the %zu limit",
                static_cast<unsigned long long>(len), maxBytes);
  blob->resize(len);
  return recvAll(s, blob->data(), len, deadline);
}

}  // namespace zcoll
