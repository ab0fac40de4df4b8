// all_gather_perf: zcollAllGather. Size = the whole gathered buffer; each rank sends size/n.
#include "common/driver.h"

namespace zp = zcoll::perf;

int main(int argc, char** argv) {
  zp::Collective c;
  c.name = "all_gather";
  c.busFactor = [](int n) { return double(n - 1) / n; };
  c.counts = [](size_t elems, int n, int rank) {
    zp::Counts k;
    k.count = elems / n;
    k.sendElems = k.count;
    k.recvElems = k.count * n;
    k.sendInPlace = k.count * rank;  // in place: this rank's slot of the output
    return k;
  };
  c.run = [](const zp::RunArgs& a) {
    return zcollAllGather(a.send, a.recv, a.counts.count, a.dtype, a.info->comm, nullptr);
  };
  c.input = [](const zp::Pattern&, int rank, size_t i) { return zp::movedValue(rank, i); };
  c.expected = [](const zp::Pattern& p, int, size_t i) {
    return zp::movedValue(int(i / p.count), i % p.count);
  };
  return zp::perfMain(argc, argv, c);
}
