// Pipelined chain broadcast (large messages).
//   Ranks form a chain starting at the root; the message is cut into slices and each rank
//   forwards slice k as soon as it has it, so all links carry data at once: time ~ size/bw
//   instead of log2(W) * size/bw.
#include <algorithm>

#include "base/dtype.h"
#include "coll/coll.h"

namespace zcoll {

namespace {
constexpr size_t kSliceBytes = 512 * 1024;
}

Result broadcastPipelinedRing(zcollComm* comm, const CollArgs& a) {
  const int w = comm->nranks;
  const int vr = (comm->rank - a.root + w) % w;
  const size_t bytes = a.count * dtypeSize(a.dtype);
  char* buf = static_cast<char*>(a.recv);
  const size_t slices = std::max<size_t>(1, (bytes + kSliceBytes - 1) / kSliceBytes);
  auto sliceLen = [&](size_t k) { return std::min(kSliceBytes, bytes - k * kSliceBytes); };
  const int next = (comm->rank + 1) % w;
  const int prev = (comm->rank - 1 + w) % w;
  const bool forwards = vr + 1 < w;

  Stage st(comm, *a.exec);
  if (vr == 0) ZCOLL_CHECK(st.copy(buf, a.send, bytes));
  RequestList recvs(slices);
  RequestList sends(slices);
  if (vr != 0)
    for (size_t k = 0; k < slices; ++k)
      ZCOLL_CHECK(st.recv(prev, buf + k * kSliceBytes, sliceLen(k), 0, recvs.next()));
  for (size_t k = 0; k < slices; ++k) {
    if (vr != 0) ZCOLL_CHECK(st.wait(recvs.data() + k, 1));
    if (forwards) ZCOLL_CHECK(st.send(next, buf + k * kSliceBytes, sliceLen(k), 0, sends.next()));
  }
  return st.wait(sends);
}

}  // namespace zcoll
