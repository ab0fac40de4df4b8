// reduce_scatter_perf: zcollReduceScatter. Size = the whole input buffer; each rank gets size/n.
#include "common/driver.h"

namespace zp = zcoll::perf;

int main(int argc, char** argv) {
  zp::Collective c = zp::reduceScatterShape("reduce_scatter");
  c.ringPartials = true;
  c.run = [](const zp::RunArgs& a) {
    return zcollReduceScatter(a.send, a.recv, a.counts.count, a.dtype, a.op, a.info->comm,
                              a.stream);
  };
  return zp::perfMain(argc, argv, c);
}
