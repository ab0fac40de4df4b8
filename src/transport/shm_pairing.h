// Whether two ranks may pair through the shm transport: what a rank publishes (its segment's
// descriptor number, its user, whether its process can share memory at all: 16 bytes), what it
// learns of every rank at bootstrap, and the verdict for a peer with its reason
// (Transport::canConnect's). Decided from what every rank published, so both ends of a pair
// agree, and the node's ranks that may pair form one clique (ShmPeerMemory relies on it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "transport/transport.h"

namespace zcoll {

class ShmPairing {
 public:
  // Probes this process (shm::probeSharing); `why` keeps what the probe found.
  ShmPairing();

  bool usable() const { return usable_; }
  const std::string& probe() const { return why_; }
  // What this rank publishes, its segment's descriptor being `segmentFd`.
  std::string address(int segmentFd) const;
  // Peers' addresses (index = comm rank; empty when a peer has no shm transport). Malformed
  // ones fail.
  Result learn(const std::vector<std::string>& addresses);
  // Whether `peer` pairs with this rank, and why or why not.
  bool canConnect(const PeerReach& peer, std::string* why) const;
  // The segment descriptor number comm rank `rank` published.
  int segmentFdOf(int rank) const { return addresses_[rank].fd; }

 private:
  struct PeerAddress {
    bool present = false;
    bool usable = false;
    uint32_t uid = 0;
    int fd = -1;
  };

  bool usable_ = false;
  std::string why_;
  uint32_t uid_ = 0;
  std::vector<PeerAddress> addresses_;
};

}  // namespace zcoll
