// alltoall_perf: zcollAllToAll. Size = one rank's whole send buffer (n chunks of size/n).
// No in-place variant: the API requires separate buffers.
#include "common/driver.h"

namespace zp = zcoll::perf;

int main(int argc, char** argv) {
  zp::Collective c = zp::allToAllShape("alltoall");
  c.run = [](const zp::RunArgs& a) {
    return zcollAllToAll(a.send, a.recv, a.counts.count, a.dtype, a.info->comm, a.stream);
  };
  return zp::perfMain(argc, argv, c);
}
