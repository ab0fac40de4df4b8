#include <algorithm>
#include <vector>

#include "base/dtype.h"
#include "trigger/collectives.h"
#include "trigger/steps.h"

namespace zcoll {

Result triggeredAllGather(TriggerRing& ring, Executor& ex, const CollArgs& a) {
  const int n = ring.nranks(), me = ring.me();
  const size_t bytes = a.count * dtypeSize(a.dtype);
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  if (send != recv + me * bytes) ZCOLL_CHECK(ex.copy(recv + me * bytes, send, bytes));
  if (ring.equalNodes()) {  // by rail, then node: each piece enters each other node once
    const size_t piece = railPartBytes(ring);
    for (size_t at = 0; at < bytes; at += piece) {
      const size_t len = std::min(piece, bytes - at);
      ZCOLL_CHECK(railGatherStep(
          ring, ex, piece, std::vector<size_t>(n, len),
          [&](char* part) { return ex.copy(part, send + at, len); },
          [&](int r, const char* from) {
            return r == me ? zcollSuccess : ex.copy(recv + r * bytes + at, from, len);
          }));
    }
    return zcollSuccess;
  }
  const size_t piece = ring.slotBytes();
  for (size_t at = 0; at < bytes; at += piece) {
    const size_t len = std::min(piece, bytes - at);
    std::vector<char*> out(n);
    for (int p = 0; p < n; ++p) out[p] = recv + p * bytes + at;
    ZCOLL_CHECK(gatherStep(ring, ex, send + at, std::vector<size_t>(n, len), out));
  }
  return zcollSuccess;
}

}  // namespace zcoll
