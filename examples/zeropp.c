/* ZeRO++'s two quantized collectives on the data of one ZeRO-3 step: qwZ gathers the weights
 * (INT8 blocks on the wire), qgZ reduce-scatters the gradients (INT4 blocks, intra-node hop
 * then inter-node hop). Every rank checks each element against the exact result and the error
 * bounds of docs/ZEROPP.md.
 *
 *   tools/zcollrun -n 4 --nodes 2 build/examples/zcoll_example_zeropp
 *
 * Exit code 0 when every element is within its bound; 1 when one is not, 2 when a call fails. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <zcoll/zcoll.h>

enum { kShard = 1024, kBlock = 256 }; /* elements per rank; quantization block (the default) */

#define CHECK(call)                                                                  \
  do {                                                                               \
    zcollResult_t r_ = (call);                                                       \
    if (r_ != zcollSuccess) {                                                        \
      fprintf(stderr, "%s failed: %s: %s\n", #call, zcollGetErrorString(r_),         \
              zcollGetLastError(comm));                                              \
      return 2;                                                                      \
    }                                                                                \
  } while (0)

/* Reproducible values in [-1, 1): any rank can compute any rank's data. */
static float value(uint32_t seed, uint32_t index) {
  uint32_t x = seed * 2654435761u ^ (index + 0x9e3779b9u) * 2246822519u;
  x ^= x >> 15;
  x *= 2246822519u;
  x ^= x >> 13;
  return (float)(x >> 8) / (float)(1u << 23) - 1.0f;
}
static float weight(size_t i) { return value(1, (uint32_t)i); }                 /* global index */
static float grad(int rank, size_t i) { return value(100 + (uint32_t)rank, (uint32_t)i); }

/* The largest magnitude over the elements [from, to). */
static double absmaxWeights(size_t from, size_t to) {
  double m = 0;
  for (size_t i = from; i < to; ++i) m = fmax(m, fabs(weight(i)));
  return m;
}
static double absmaxGrads(int rank, size_t from, size_t to) {
  double m = 0;
  for (size_t i = from; i < to; ++i) m = fmax(m, fabs(grad(rank, i)));
  return m;
}

/* qwZ, INT8 symmetric, nearest-even: |x - x'| <= scale/2 with scale = absmax/127 over the
 * element's block (blocks start at each shard's first element), plus fp32 slack. */
static int checkWeights(const float* full, int nranks, double* worst) {
  int wrong = 0;
  for (int r = 0; r < nranks; ++r)
    for (size_t b = 0; b < kShard; b += kBlock) {
      size_t from = (size_t)r * kShard + b, to = from + kBlock;
      double absmax = absmaxWeights(from, to);
      double bound = absmax / 127 / 2 + absmax * 0x1p-16;
      for (size_t i = from; i < to; ++i) {
        double err = fabs((double)full[i] - weight(i));
        if (err > bound) ++wrong;
        if (absmax > 0) *worst = fmax(*worst, err / (absmax / 127));
      }
    }
  return wrong;
}

/* qgZ, INT4 both hops: |out - sum_s x_s| <= F * sum_s A_s with F = 1/(2qi) + (1 + 1/(2qi))/(2qe),
 * qi = qe = 7, A_s the largest magnitude in the element's block of rank s's chunk; plus fp32
 * slack (2^-10 relative, 2^-16 * sum_s A_s). */
static int checkGrads(const float* out, int rank, int nranks, double* worst) {
  const double q = 7, F = 1 / (2 * q) + (1 + 1 / (2 * q)) / (2 * q);
  int wrong = 0;
  for (size_t b = 0; b < kShard; b += kBlock) {
    size_t from = (size_t)rank * kShard + b, to = from + kBlock;
    double sumA = 0;
    for (int s = 0; s < nranks; ++s) sumA += absmaxGrads(s, from, to);
    for (size_t i = from; i < to; ++i) {
      double exact = 0;
      for (int s = 0; s < nranks; ++s) exact += grad(s, i);
      double err = fabs((double)out[i - from + b] - exact);
      if (err > F * sumA + fabs(exact) * 0x1p-10 + sumA * 0x1p-16) ++wrong;
      *worst = fmax(*worst, err / (F * sumA));
    }
  }
  return wrong;
}

static uint64_t interNodeBytesSent(zcollComm_t comm) {
  zcollStats_t stats = {0};
  stats.size = sizeof stats;
  if (zcollCommGetStats(comm, &stats) != zcollSuccess) return 0;
  return stats.bytesSent[zcollPathInter];
}

int main(void) {
  zcollComm_t comm = NULL;
  int rank = 0, nranks = 0, nodes = 0;
  CHECK(zcollCommInitFromEnv(&comm, NULL));
  CHECK(zcollCommUserRank(comm, &rank));
  CHECK(zcollCommCount(comm, &nranks));
  CHECK(zcollCommNodeCount(comm, &nodes));
  const size_t total = (size_t)nranks * kShard;

  float* shard = malloc(sizeof(float) * kShard);
  float* full = malloc(sizeof(float) * total);
  float* grads = malloc(sizeof(float) * total);
  float* reduced = malloc(sizeof(float) * kShard);
  if (!shard || !full || !grads || !reduced) return 2;
  for (size_t i = 0; i < kShard; ++i) shard[i] = weight((size_t)rank * kShard + i);
  for (size_t i = 0; i < total; ++i) grads[i] = grad(rank, i);

  /* qwZ: the weights, INT8 blocks of 256 on the wire (the defaults: NULL settings). */
  CHECK(zcollQuantizedAllGather(shard, full, kShard, zcollFloat32, NULL, comm, NULL));
  uint64_t qwzInter = interNodeBytesSent(comm);

  /* qgZ: the gradients, INT4 on both hops (the defaults); the sum over all ranks. */
  zcollQuantConfig_t quant = ZCOLL_QUANT_CONFIG_INITIALIZER;
  quant.bits = 4;
  quant.intraBits = 4;
  CHECK(zcollQuantizedReduceScatter(grads, reduced, kShard, zcollFloat32, zcollSum, &quant, comm,
                                    NULL));
  uint64_t qgzInter = interNodeBytesSent(comm) - qwzInter;

  double worstW = 0, worstG = 0;
  int wrongW = checkWeights(full, nranks, &worstW);
  int wrongG = checkGrads(reduced, rank, nranks, &worstG);
  printf("rank %d of %d (%d nodes): qwZ %zu weights, %d outside the bound (worst error %.3f "
         "scale, bound 0.5), %llu inter-node bytes sent; qgZ %d gradients, %d outside the bound "
         "(worst error %.3f of it), %llu inter-node bytes sent\n",
         rank, nranks, nodes, total, wrongW, worstW, (unsigned long long)qwzInter, kShard, wrongG,
         worstG, (unsigned long long)qgzInter);
  free(shard);
  free(full);
  free(grads);
  free(reduced);
  if (zcollCommDestroy(comm) != zcollSuccess) return 2;
  return wrongW == 0 && wrongG == 0 ? 0 : 1;
}
