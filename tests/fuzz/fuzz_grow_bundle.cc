// libFuzzer target: the coordinator's bundle a new rank reads at a grow's rendezvous (the
// communicator's shared settings and every member's description). A decoded bundle must be safe
// to use: every member description as decodeRankBlob allows, a positive timeout, and it must
// round-trip through encodeGrowBundle.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/grow.h"
#include "core/rank_blob.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int members = data[0] % 4 + 1;
  const std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  zcoll::InitSettings settings;
  std::vector<zcoll::PeerInfo> peers(members);
  std::vector<std::string> addresses(members);
  if (zcoll::decodeGrowBundle(bytes, members, &settings, &peers, &addresses) != zcollSuccess)
    return 0;
  if (settings.timeoutSec <= 0) __builtin_trap();
  std::vector<std::string> blobs;
  for (int m = 0; m < members; ++m) {
    if (peers[m].rank != m || addresses[m].size() > zcoll::kMaxTransportAddress)
      __builtin_trap();
    blobs.push_back(zcoll::encodeRankBlob(peers[m], addresses[m]));
  }
  if (zcoll::encodeGrowBundle(settings, blobs) != bytes) __builtin_trap();
  return 0;
}
