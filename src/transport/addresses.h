// The transport addresses a rank publishes at bootstrap, as one string: one row per transport
// that has an address, in the order the rank created them, each row a 4-byte little-endian
// length and the transport's name (transport/registry.h), then a 4-byte length and its address.
// A transport with no row gave no address (its peers see ""). The rank blob (core/rank_blob.h)
// and zcollCommSplit carry this string.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/result.h"

namespace zcoll {

struct TransportAddresses {
  std::vector<std::pair<std::string, std::string>> rows;  // {transport name, its address}

  // The address published for `transport`, "" when none.
  const std::string& of(const std::string& transport) const;
};

std::string packAddresses(const TransportAddresses& a);

// An empty string is a rank without addresses (alone in its comm). Fails with
// zcollRemoteError naming `rank` when `packed` is not what packAddresses makes (truncated,
// trailing bytes, an empty or repeated name).
Result unpackAddresses(const std::string& packed, int rank, TransportAddresses* out);

}  // namespace zcoll
