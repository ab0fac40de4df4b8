// qgZ flat fallback: quantized all-to-all reduce-scatter over the whole world, for layouts with
// unequal ranks per node (where the two-hop swizzle has no rectangle to work on).
//   q_s[t] = Qe(x_s[chunk t])            every rank s, every destination t (inter bits)
//   all-to-all: rank t receives q_s[t] from every rank s
//   out    = scale * sum over s = 0..W-1, in rank order, of D(q_s[t])   (scale 1 or 1/W)
// One quantization per value, one hop; not pipelined.
#include <vector>

#include "base/dtype.h"
#include "coll/feedback.h"
#include "coll/qgz.h"
#include "quant/quant.h"

namespace zcoll {

Result qgzFlat(zcollComm* comm, const QgzArgs& a) {
  const int w = comm->nranks, me = comm->rank;
  quant::QuantParams qp = a.quant.inter;
  qp.elementOffset = qgzFirstIndex(w, a.count, me, 0);
  const size_t q = quant::quantizedBytes(a.count, qp);
  const size_t tmp = a.firstResidual != nullptr ? a.count * sizeof(float) : 0;
  void* base = nullptr;
  ZCOLL_CHECK(scratchGet(comm, *a.exec, 2 * w * q + tmp, &base));
  char* send = static_cast<char*>(base);
  char* recv = send + w * q;
  if (a.firstResidual == nullptr) {
    ZCOLL_CHECK(a.exec->quantizeChunks(a.send, a.dtype, a.count, w, nullptr, qp, send));
  } else {  // error feedback: chunk by chunk, each with its residual (coll/feedback.h)
    const char* in = static_cast<const char*>(a.send);
    float* scratch32 = reinterpret_cast<float*>(recv + w * q);
    for (int t = 0; t < w; ++t) {
      quant::QuantParams ct = qp;
      ct.elementOffset = qgzFirstIndex(w, a.count, me, t);
      ZCOLL_CHECK(quantizeWithFeedback(*a.exec, in + t * a.count * dtypeSize(a.dtype), a.dtype,
                                       a.count, ct, a.firstResidual + t * a.count, scratch32,
                                       send + t * q));
    }
  }

  Stage st(comm, *a.exec);
  RequestList reqs(2 * w);
  for (int i = 1; i < w; ++i) {
    int to = (me + i) % w, from = (me - i + w) % w;
    ZCOLL_CHECK(st.recv(from, recv + from * q, q, 0, reqs.next()));
    ZCOLL_CHECK(st.send(to, send + to * q, q, 0, reqs.next()));
  }
  ZCOLL_CHECK(st.wait(reqs));

  std::vector<const void*> chunks(w);
  for (int s = 0; s < w; ++s) chunks[s] = (s == me ? send : recv) + s * q;
  return a.exec->dequantizeSum(chunks.data(), w, a.count, qp, qgzOutScale(a.op, w), a.recv,
                               a.dtype);
}

// Registry entry (registry.cc).
Result quantizedReduceScatterFlat(zcollComm* comm, const CollArgs& a) {
  return qgzFlat(comm, qgzArgsOf(a));
}

}  // namespace zcoll
