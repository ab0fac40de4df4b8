// alltoall_perf: zcollAllToAll. Size = one rank's whole send buffer (n chunks of size/n).
// No in-place variant: the API requires separate buffers.
#include "common/driver.h"

namespace zp = zcoll::perf;

int main(int argc, char** argv) {
  zp::Collective c;
  c.name = "alltoall";
  c.inPlace = false;
  c.busFactor = [](int n) { return double(n - 1) / n; };
  c.counts = [](size_t elems, int n, int) {
    zp::Counts k;
    k.count = elems / n;
    k.sendElems = k.recvElems = k.count * n;
    return k;
  };
  c.run = [](const zp::RunArgs& a) {
    return zcollAllToAll(a.send, a.recv, a.counts.count, a.dtype, a.info->comm, nullptr);
  };
  c.input = [](const zp::Pattern&, int rank, size_t i) { return zp::movedValue(rank, i); };
  // Chunk p of rank q's output is chunk q of rank p's input.
  c.expected = [](const zp::Pattern& p, int rank, size_t i) {
    size_t from = i / p.count, offset = i % p.count;
    return zp::movedValue(int(from), size_t(rank) * p.count + offset);
  };
  return zp::perfMain(argc, argv, c);
}
