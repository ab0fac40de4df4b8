// Minimal TCP socket helpers with deadlines: nothing here blocks past the deadline it is given.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <string>

#include "base/result.h"

namespace zcoll {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline deadlineIn(int seconds) { return Clock::now() + std::chrono::seconds(seconds); }

// Owns a file descriptor.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.release()) {}
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void close();

 private:
  int fd_ = -1;
};

// An IPv4/IPv6 address that fits in a unique id.
struct SockAddr {
  union {
    sockaddr sa;
    sockaddr_in in4;
    sockaddr_in6 in6;
  } storage;
  socklen_t len;
};

std::string addrToString(const SockAddr& a);
// Parses "host:port" ("[v6]:port" too), resolving names.
Result parseHostPort(const std::string& text, SockAddr* out);
// The address of the interface ZCOLL_SOCKET_IFNAME selects (NCCL syntax), port 0.
Result pickInterfaceAddress(SockAddr* out, std::string* ifName);

// Listening socket bound to `addr` (port 0 = any); the actual address is written back.
Result listenOn(SockAddr* addr, Socket* out);
// Waits for a connection until the deadline.
Result acceptBefore(const Socket& listener, Deadline deadline, Socket* out);
// Connects, retrying while the listener is not up yet, until the deadline.
Result connectBefore(const SockAddr& addr, Deadline deadline, Socket* out);

Result sendAll(const Socket& s, const void* buf, size_t bytes, Deadline deadline);
Result recvAll(const Socket& s, void* buf, size_t bytes, Deadline deadline);

// Length-prefixed strings.
Result sendBlob(const Socket& s, const std::string& blob, Deadline deadline);
Result recvBlob(const Socket& s, std::string* blob, size_t maxBytes, Deadline deadline);

}  // namespace zcoll
