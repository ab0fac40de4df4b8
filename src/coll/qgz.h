// qgZ, the quantized all-to-all reduce-scatter (docs/ZEROPP.md "qgZ"): the arguments both
// algorithms take, the piece split of the pipeline, and the stochastic-rounding index ranges.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "coll/coll.h"
#include "coll/zeropp_config.h"

namespace zcoll {

struct QgzArgs {
  const void* send;  // W chunks of `count` elements; chunk t is destined to rank t
  void* recv;        // `count` elements (may be send + rank*count)
  size_t count;
  zcollDataType_t dtype;
  zcollRedOp_t op;  // Sum or Avg
  QuantSettings quant;
  int pipelineDepth;  // >= 1, already resolved from the default
  Executor* exec;     // the data work (quantize, dequantize-reduce-requantize, dequantize-sum)
  bool shmRead = false;  // two-hop: the intra hop reads the local peers' windows in place
  // Error feedback (coll/feedback.h), fp32 in the call's memory kind; NULL: none. The first
  // quantization's residual, W*count elements in the order of `send`; the two-hop
  // requantization's, N*count elements (partial for node m at m*count).
  float* firstResidual = nullptr;
  float* partialResidual = nullptr;
};

inline QgzArgs qgzArgsOf(const CollArgs& a) {
  QgzArgs q{a.send, a.recv, a.count, a.dtype, a.op, *a.quant, a.pipelineDepth, a.exec};
  q.firstResidual = a.firstResidual;
  q.partialResidual = a.partialResidual;
  return q;
}

// Whether qgZ picks one of its two-hop algorithms for `bytes` per rank (what a stream-triggered
// qgZ computes; a forced or uneven-node `flat` quantizes at other bits).
bool qgzPicksTwoHop(const zcollComm* comm, size_t bytes, MemKind mem);

// Default pipeline depth (docs/ZEROPP.md "qgZ", measured in perf/LOG.md): pieces of at least
// 64K elements per chunk, at most 4 of them.
inline int qgzDefaultDepth(size_t count) {
  const size_t d = count / (size_t(1) << 16);
  return d < 1 ? 1 : d > 4 ? 4 : int(d);
}

// Hierarchical two-hop algorithm (qgz_reducescatter.cc): requires a uniform node layout. With
// a.shmRead, host buffers and every node peer on shm, its intra hop reads the peers' quantized
// pieces in place from their windows instead of exchanging them (the same bits).
Result qgzHierarchical(zcollComm* comm, const QgzArgs& a);
// Flat quantized all-to-all reduce-scatter (qgz_flat.cc): any layout.
Result qgzFlat(zcollComm* comm, const QgzArgs& a);

// Elements per pipeline piece: ceil(count / depth) rounded up to whole blocks, so that a piece
// boundary is always a block boundary of the whole chunk (results do not depend on the depth).
inline size_t qgzPieceElems(size_t count, int depth, int blockSize) {
  size_t b = static_cast<size_t>(blockSize);
  size_t per = (count + depth - 1) / depth;
  return std::max<size_t>(b, (per + b - 1) / b * b);
}

// Output scale: 1 for Sum, 1/W for Avg (the world size, not the node count).
inline float qgzOutScale(zcollRedOp_t op, int nranks) {
  return op == zcollAvg ? 1.0f / static_cast<float>(nranks) : 1.0f;
}

// Stochastic-rounding element indices: the first quantization of rank s numbers chunk t from
// (s*W + t)*C; the requantized partial of node m for rank t from (W*W + m*W + t)*C. Disjoint,
// and independent of the pipeline split.
inline uint64_t qgzFirstIndex(int w, size_t count, int src, int chunk) {
  return (uint64_t(src) * uint64_t(w) + uint64_t(chunk)) * count;
}
inline uint64_t qgzPartialIndex(int w, size_t count, int node, int dest) {
  return (uint64_t(w) * uint64_t(w) + uint64_t(node) * uint64_t(w) + uint64_t(dest)) * count;
}

}  // namespace zcoll
