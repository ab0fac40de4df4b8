// sendrecv_perf: each rank sends to rank+1 and receives from rank-1 (a ring shift) in one
// zcollGroupStart/End. Size = the buffer; bus factor 1. No in-place variant.
#include "common/driver.h"

namespace zp = zcoll::perf;

namespace {

zcollResult_t ringShift(const zp::RunArgs& a) {
  int n = a.info->nranks, r = a.info->rank;
  zcollResult_t res = zcollGroupStart();
  if (res != zcollSuccess) return res;
  zcollResult_t s =
      zcollSend(a.send, a.counts.count, a.dtype, (r + 1) % n, a.info->comm, a.stream);
  zcollResult_t v = zcollRecv(a.recv, a.counts.count, a.dtype, (r - 1 + n) % n, a.info->comm,
                              a.stream);
  res = zcollGroupEnd();  // always closes the group, even after a failed enqueue
  return s != zcollSuccess ? s : v != zcollSuccess ? v : res;
}

}  // namespace

int main(int argc, char** argv) {
  zp::Collective c = zp::sendRecvShape("sendrecv");
  c.run = ringShift;
  return zp::perfMain(argc, argv, c);
}
