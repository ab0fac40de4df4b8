// reduce_scatter_perf: zcollReduceScatter. Size = the whole input buffer; each rank gets size/n.
#include "common/driver.h"

namespace zp = zcoll::perf;

int main(int argc, char** argv) {
  zp::Collective c;
  c.name = "reduce_scatter";
  c.reduces = true;
  c.busFactor = [](int n) { return double(n - 1) / n; };
  c.counts = [](size_t elems, int n, int rank) {
    zp::Counts k;
    k.count = elems / n;
    k.sendElems = k.count * n;
    k.recvElems = k.count;
    k.recvInPlace = k.count * rank;  // in place: this rank's slot of the input
    return k;
  };
  c.run = [](const zp::RunArgs& a) {
    return zcollReduceScatter(a.send, a.recv, a.counts.count, a.dtype, a.op, a.info->comm,
                              nullptr);
  };
  c.input = zp::reduceInput;
  c.expected = [](const zp::Pattern& p, int rank, size_t i) {
    return zp::reduceResult(p, size_t(rank) * p.count + i);
  };
  return zp::perfMain(argc, argv, c);
}
