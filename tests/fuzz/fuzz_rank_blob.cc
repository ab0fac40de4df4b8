// libFuzzer target: a rank description (PeerInfo + transport address) as every rank decodes the
// descriptions the rendezvous hands back. A decoded description must be safe to use: host name
// terminated, rank as claimed, a positive pid, a bounded address, and it must round-trip.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/rank_blob.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int rank = data[0] % 8;
  std::string blob(reinterpret_cast<const char*>(data + 1), size - 1);
  zcoll::PeerInfo info;
  std::string address;
  if (zcoll::decodeRankBlob(blob, rank, &info, &address) != zcollSuccess) return 0;
  if (info.rank != rank || info.pid <= 0 || std::strlen(info.hostName) >= sizeof(info.hostName))
    __builtin_trap();
  if (address.size() != blob.size() - sizeof(zcoll::PeerInfo) ||
      address.size() > zcoll::kMaxTransportAddress)
    __builtin_trap();
  if (zcoll::encodeRankBlob(info, address) != blob) __builtin_trap();
  return 0;
}
