// quantized_reduce_scatter_perf: zcollQuantizedReduceScatter (qgZ). Size = the whole input
// buffer (as reduce_scatter_perf); each rank gets size/n elements. -o sum or avg, -d float, half or
// bfloat16 (or all); other values are refused before any rank starts. Extra flags:
// --bits 4|8 (inter-node hop, 4), --intra-bits 4|8 (intra-node hop, 4), --block N (256),
// --asym, --stochastic, --depth N (pipeline depth; 0 = the library's default).
// The check admits the bound of docs/ZEROPP.md "qgZ" for the driver's inputs (non-negative
// integers, so every block's absmax is at most the rank's largest input A_s):
//   F * sum_s A_s (+ fp32 slack), divided by W for avg, plus one unit of the output dtype,
//   F = 1/(2qi) + (1 + 1/(2qi))/(2qe) (two hops or the flat fallback), 1/(2qi) on one node,
//   1/(2qe) with one rank per node; q = 2^(bits-1) - 1; stochastic rounding doubles each term.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/zeropp.h"

namespace zp = zcoll::perf;

namespace {

struct QgzFlags {
  int intraBits = 0;  // 0: the library default (4)
  int depth = 0;      // 0: the library default
  bool bitsGiven = false;
};

bool depthOk(int v) { return v >= 0 && v <= 64; }

// Takes --intra-bits and --depth off argv (the shared flags are taken by takeQuantFlags);
// a bad value is a usage error, as the shared ones are.
bool takeQgzFlags(int* argc, char** argv, QgzFlags* f) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    bool ok = true;
    if (std::strcmp(argv[i], "--intra-bits") == 0)
      ok = zp::takeIntFlag(*argc, argv, &i, "4, 8 or 16", zp::intraBitsOk, &f->intraBits);
    else if (std::strcmp(argv[i], "--depth") == 0)
      ok = zp::takeIntFlag(*argc, argv, &i, "0 (the library's default) to 64", depthOk,
                           &f->depth);
    else {
      f->bitsGiven |= std::strcmp(argv[i], "--bits") == 0;
      argv[out++] = argv[i];
    }
    if (!ok) {
      zp::pointToHelp(argv[0]);
      return false;
    }
  }
  *argc = out;
  argv[out] = nullptr;
  return true;
}

// What the tolerance needs from the run (filled by the first call).
struct RunShape {
  int nranks = 1, nodes = 1, localSize = 1;
  zcollRedOp_t op = zcollSum;
};

double tolerance(const RunShape& s, int interBits, int intraBits, bool stochastic,
                 zcollDataType_t t) {
  const double f = zp::qgzFactor(s.nranks, s.nodes, interBits, intraBits, stochastic, t);
  return zp::reduceTolerance(f, s.op, s.nranks, t, 0x1.0p-16, 1);
}

}  // namespace

int main(int argc, char** argv) {
  QgzFlags qf;
  zp::QuantFlags flags;
  if (!takeQgzFlags(&argc, argv, &qf) || !zp::takeQuantFlags(&argc, argv, &flags)) return 2;
  if (!qf.bitsGiven) flags.bits = 4;  // qgZ's default: INT4 across nodes
  static zcollQuantConfig_t storage;
  zp::quantConfig(flags, &storage);
  storage.intraBits = qf.intraBits;
  storage.pipelineDepth = qf.depth;
  const int intraBits = qf.intraBits ? qf.intraBits : 4;
  auto shape = std::make_shared<RunShape>();

  zp::Collective c = zp::reduceScatterShape("quantized_reduce_scatter");
  c.types = zp::quantizableTypes();
  c.ops = {zcollSum, zcollAvg};
  char depth[64];
  std::snprintf(depth, sizeof(depth), ", pipeline depth %d%s", qf.depth,
                qf.depth == 0 ? " (default)" : "");
  const std::string note = "# qgZ: intra-node hop " + zp::intraHopName(intraBits) + depth;
  c.notes = {zp::describe(flags) + " (inter-node hop)", note};
  c.usage = zp::quantUsage("  --bits 4|8            bits per value on the inter-node hop, "
                           "default 4", false);
  c.usage.insert(c.usage.begin() + 1,
                 "  --intra-bits 4|8|16   bits per value on the intra-node hop, default 4 (16: "
                 "16-bit floats)");
  c.usage.push_back("  --depth N             pipeline depth of the two hops (0: the library's "
                    "default)");
  c.run = [shape](const zp::RunArgs& a) {
    *shape = RunShape{a.info->nranks, a.info->nodes, a.info->localSize, a.op};
    return zcollQuantizedReduceScatter(a.send, a.recv, a.counts.count, a.dtype, a.op, &storage,
                                       a.info->comm, a.stream);
  };
  c.toleranceFor = [shape, flags, intraBits](zcollDataType_t t) {
    return tolerance(*shape, flags.bits, intraBits, flags.stochastic, t);
  };
  c.extraColumns = zp::zeroppColumns();
  return zp::perfMain(argc, argv, c);
}
