// A rank's description as the rendezvous carries it: PeerInfo (fixed size, this build's layout),
// then the transport address. decodeRankBlob is the only reader of these bytes from the network;
// it rejects anything a peer of the same build could not have sent (tests/fuzz/fuzz_rank_blob.cc).
#pragma once

#include <string>

#include "base/result.h"
#include "core/comm.h"

namespace zcoll {

constexpr size_t kMaxTransportAddress = 64 * 1024;

std::string encodeRankBlob(const PeerInfo& info, const std::string& address);

// Fills *info and *address from the description that rank `rank` sent; zcollRemoteError with
// the reason when it is malformed (short, wrong rank, unterminated host name, impossible
// topology counts, an address over kMaxTransportAddress).
Result decodeRankBlob(const std::string& blob, int rank, PeerInfo* info, std::string* address);

}  // namespace zcoll
