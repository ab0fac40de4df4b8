// FNV-1a over bytes: the one non-cryptographic hash zcoll uses to derive identities (host ids,
// rendezvous magics). Stable across builds and machines: ranks compare each other's results.
#pragma once

#include <cstdint>
#include <string_view>

namespace zcoll {

inline uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

}  // namespace zcoll
