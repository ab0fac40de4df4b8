// zcollQuantizedAllReduce (docs/ZEROPP.md "Quantized all-reduce"): how a count is split into the
// W chunks that qgZ reduces and qwZ gathers, and the sections of the error-feedback residual
// buffer. The entry point (api/zeropp_allreduce.cc) sizes and checks the caller's buffer with
// it; the algorithms (quantized_allreduce.cc) carve it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/comm.h"

namespace zcoll {

// count = W * chunk + tail (tail < W): rank r's chunk is [r*chunk, (r+1)*chunk), reduced by qgZ
// and gathered by qwZ; the tail [W*chunk, count) is all-reduced exactly. The residual buffer
// (fp32) holds, in this order: the first quantization's residual (W*chunk elements, in the
// order of sendbuff), the two-hop requantization's (N*chunk, only on equal nodes with N > 1
// and L > 1), the chunk owner's for the gather (chunk).
struct QarSplit {
  size_t chunk = 0, tail = 0;
  size_t firstElems = 0, partialElems = 0, ownerElems = 0;
  size_t residualBytes() const { return (firstElems + partialElems + ownerElems) * sizeof(float); }
};
QarSplit qarSplit(const zcollComm* comm, size_t count);

// Stochastic rounding of the gather: rank r numbers its chunk from (2*W*W + r) * chunk, past
// every index qgZ uses (coll/qgz.h), so no random number is drawn twice in one call.
inline uint64_t qarGatherIndex(int w, size_t chunk, int rank) {
  return (2 * uint64_t(w) * uint64_t(w) + uint64_t(rank)) * chunk;
}

}  // namespace zcoll
