#include "transport/shm_pairing.h"

#include <unistd.h>

#include <cstring>

#include "transport/shm_segment.h"

namespace zcoll {

namespace {

constexpr uint32_t kAddressMagic = 0x4d48535a;  // "ZSHM"

struct WireAddress {  // what address() publishes
  uint32_t magic;
  int32_t fd;
  uint32_t uid;
  uint32_t usable;
};
static_assert(sizeof(WireAddress) == 16, "fixed wire size");

}  // namespace

ShmPairing::ShmPairing() : uid_(static_cast<uint32_t>(geteuid())) {
  usable_ = shm::probeSharing(&why_);
}

std::string ShmPairing::address(int segmentFd) const {
  WireAddress a{kAddressMagic, segmentFd, uid_, usable_ ? 1u : 0u};
  return std::string(reinterpret_cast<const char*>(&a), sizeof(a));
}

Result ShmPairing::learn(const std::vector<std::string>& addresses) {
  addresses_.assign(addresses.size(), PeerAddress{});
  for (size_t r = 0; r < addresses.size(); ++r) {
    if (addresses[r].empty()) continue;
    WireAddress a{};
    if (addresses[r].size() != sizeof(a))
      return fail(zcollRemoteError, "rank %zu sent a %zu-byte shm address (expected %zu)", r,
                  addresses[r].size(), sizeof(a));
    std::memcpy(&a, addresses[r].data(), sizeof(a));
    if (a.magic != kAddressMagic || (a.usable != 0 && a.fd < 0))
      return fail(zcollRemoteError, "rank %zu sent a malformed shm address", r);
    addresses_[r] = PeerAddress{true, a.usable != 0, a.uid, a.fd};
  }
  return zcollSuccess;
}

bool ShmPairing::canConnect(const PeerReach& peer, std::string* why) const {
  const PeerAddress* a = peer.rank >= 0 && peer.rank < static_cast<int>(addresses_.size())
                             ? &addresses_[peer.rank]
                             : nullptr;
  if (peer.self) {
    *why = "not for this rank";
  } else if (!usable_) {
    *why = "this process cannot share memory: " + why_;
  } else if (!peer.sameMachine) {
    *why = "another machine";
  } else if (!peer.sameNode) {
    *why = "another node of the communicator";
  } else if (a == nullptr || !a->present) {
    *why = "the peer has no shm transport";
  } else if (!a->usable) {
    *why = "the peer's process cannot share memory";
  } else if (a->uid != uid_) {
    *why = "the peer runs as another user";
  } else {
    *why = "same node: " + why_ + " above " + std::to_string(shm::kEagerBytes) + " bytes";
    return true;
  }
  return false;
}

}  // namespace zcoll
