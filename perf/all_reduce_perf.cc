// all_reduce_perf: zcollAllReduce. Size = one rank's buffer.
#include "common/driver.h"

namespace zp = zcoll::perf;

int main(int argc, char** argv) {
  zp::Collective c;
  c.name = "all_reduce";
  c.reduces = true;
  c.busFactor = [](int n) { return 2.0 * (n - 1) / n; };
  c.counts = [](size_t elems, int, int) {
    zp::Counts k;
    k.count = k.sendElems = k.recvElems = elems;
    return k;
  };
  c.run = [](const zp::RunArgs& a) {
    return zcollAllReduce(a.send, a.recv, a.counts.count, a.dtype, a.op, a.info->comm, nullptr);
  };
  c.input = zp::reduceInput;
  c.expected = [](const zp::Pattern& p, int, size_t i) { return zp::reduceResult(p, i); };
  return zp::perfMain(argc, argv, c);
}
