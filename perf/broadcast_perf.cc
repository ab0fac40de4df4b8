// broadcast_perf: zcollBroadcast from -r root. Size = the buffer.
#include "common/driver.h"

namespace zp = zcoll::perf;

int main(int argc, char** argv) {
  zp::Collective c;
  c.name = "broadcast";
  c.rooted = true;
  c.busFactor = [](int) { return 1.0; };
  c.counts = [](size_t elems, int, int) {
    zp::Counts k;
    k.count = k.sendElems = k.recvElems = elems;
    return k;
  };
  c.run = [](const zp::RunArgs& a) {
    return zcollBroadcast(a.send, a.recv, a.counts.count, a.dtype, a.root, a.info->comm,
                          a.stream);
  };
  // Every rank fills its own values, so a non-root buffer that is not overwritten shows.
  c.input = [](const zp::Pattern&, int rank, size_t i) { return zp::movedValue(rank, i); };
  c.expected = [](const zp::Pattern& p, int, size_t i) { return zp::movedValue(p.root, i); };
  return zp::perfMain(argc, argv, c);
}
