// The transport addresses a rank publishes at bootstrap, as one string: for each transport in
// a fixed order (shm, ucx, cuda_ipc), a 4-byte little-endian length and that many bytes (0: the
// rank has no such transport). The rank blob (core/rank_blob.h) and zcollCommSplit carry this string.
#pragma once

#include <string>

#include "base/result.h"

namespace zcoll {

struct TransportAddresses {
  std::string shm;
  std::string ucx;
  std::string cudaIpc;  // the probe block's handle and pattern (transport/cuda_ipc_transport.h)
};

std::string packAddresses(const TransportAddresses& a);

// An empty string is a rank without transports (alone in its comm). Fails with zcollRemoteError naming `rank` when `packed` is not what packAddresses makes.
Result unpackAddresses(const std::string& packed, int rank, TransportAddresses* out);

}  // namespace zcoll
