// all_reduce_perf: zcollAllReduce. Size = one rank's buffer.
#include "common/driver.h"

namespace zp = zcoll::perf;

int main(int argc, char** argv) {
  zp::Collective c = zp::allReduceShape("all_reduce");
  c.ringPartials = true;
  c.run = [](const zp::RunArgs& a) {
    return zcollAllReduce(a.send, a.recv, a.counts.count, a.dtype, a.op, a.info->comm, a.stream);
  };
  return zp::perfMain(argc, argv, c);
}
