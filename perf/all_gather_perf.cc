// all_gather_perf: zcollAllGather. Size = the whole gathered buffer; each rank sends size/n.
#include "common/driver.h"

namespace zp = zcoll::perf;

int main(int argc, char** argv) {
  zp::Collective c = zp::allGatherShape("all_gather");
  c.run = [](const zp::RunArgs& a) {
    return zcollAllGather(a.send, a.recv, a.counts.count, a.dtype, a.info->comm, a.stream);
  };
  return zp::perfMain(argc, argv, c);
}
