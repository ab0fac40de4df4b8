// all_reduce_perf: zcollAllReduce. Size = one rank's buffer.
// Quantized mode (zcollQuantizedAllReduce, docs/ZEROPP.md "Quantized all-reduce"): --bits 4|8
// (the inter-node hop and the gather) and/or --intra-bits 4|8 (qgZ's intra-node hop), each 8
// when the other is given; --block N, --asym, --stochastic as the other quantized binaries.
// It takes -d float, half or bfloat16 and -o sum or avg (others are refused before any rank
// starts). It adds the wire, inter, maxerr and same columns (same: every rank's checked output
// held the same bits; --wire adds them to the exact mode too), and the check admits the
// documented bound for the driver's inputs (non-negative integers, so every
// block's absmax is at most the rank's largest input A_s):
//   (F + k/qg * (1 + F)) * sum_s A_s (+ fp32 slack), divided by W for avg, plus output units;
//   F = qgZ's factor (common/zeropp.h qgzFactor), k = 1/2 (1 stochastic), qg = 2^(bits-1)-1.
// Below the library's exact threshold (256 KiB per rank) the call is the exact all-reduce;
// ZCOLL_ALGO_QUANTIZED_ALLREDUCE=qgz_then_qwz quantizes every size.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/driver.h"
#include "common/zeropp.h"

namespace zp = zcoll::perf;

namespace {

struct QarFlags {
  bool quantized = false;  // --bits or --intra-bits given
  int intraBits = 8;
  bool wire = false;       // --wire: the exact mode adds the quantized mode's columns too
};

// Takes --intra-bits off argv and notes whether quantization was asked (--bits is taken with
// the shared flags by takeQuantFlags); a bad value is a usage error, as the shared ones are.
bool takeQarFlags(int* argc, char** argv, QarFlags* f) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    if (std::strcmp(argv[i], "--intra-bits") == 0) {
      f->quantized = true;
      if (!zp::takeIntFlag(*argc, argv, &i, "4, 8 or 16", zp::intraBitsOk, &f->intraBits)) {
        zp::pointToHelp(argv[0]);
        return false;
      }
      continue;
    }
    if (std::strcmp(argv[i], "--wire") == 0) {
      f->wire = true;
      continue;
    }
    f->quantized |= std::strcmp(argv[i], "--bits") == 0;
    argv[out++] = argv[i];
  }
  *argc = out;
  argv[out] = nullptr;
  return true;
}

struct RunShape {
  int nranks = 1, nodes = 1;
  zcollRedOp_t op = zcollSum;
};

// zcollQuantizedAllReduce's bound (docs/ZEROPP.md "Quantized all-reduce"): qgZ's factor F,
// then the gather's quantization of the reduced chunk, G = F + (1 + F)/(2qe).
double tolerance(const RunShape& s, int bits, int intraBits, bool stochastic, zcollDataType_t t) {
  const double k = stochastic ? 1.0 : 0.5, qe = std::ldexp(1.0, bits - 1) - 1;
  double f = zp::qgzFactor(s.nranks, s.nodes, bits, intraBits, stochastic, t);
  f += k / qe * (1 + f);
  return zp::reduceTolerance(f, s.op, s.nranks, t, 0x1.0p-15, 2);
}

// The columns wire, inter, maxerr (common/zeropp.h) and same: every rank's checked output held
// the same bits (a mismatch also counts one wrong value, so the run fails).
void addOutputColumns(zp::Collective* c) {
  c->extraColumns = zp::zeroppColumns();
  c->extraColumns.push_back({"same", "", 5, [](const zp::Measurement& m) {
                               return m.checked ? (m.sameBits ? "yes" : "no") : "N/A";
                             }});
  c->sameOnEveryRank = true;
}

int quantizedMain(int argc, char** argv, zp::Collective c, const QarFlags& qf,
                  const zp::QuantFlags& flags) {
  static zcollQuantConfig_t storage;
  zp::quantConfig(flags, &storage);
  storage.intraBits = qf.intraBits;
  auto shape = std::make_shared<RunShape>();
  c.name = "quantized_all_reduce";
  c.types = zp::quantizableTypes();
  c.ops = {zcollSum, zcollAvg};
  c.notes = {zp::describe(flags) + " (inter-node hop and gather)",
             "# zcollQuantizedAllReduce: intra-node hop " + zp::intraHopName(qf.intraBits)};
  c.run = [shape](const zp::RunArgs& a) {
    *shape = RunShape{a.info->nranks, a.info->nodes, a.op};
    return zcollQuantizedAllReduce(a.send, a.recv, a.counts.count, a.dtype, a.op, &storage,
                                   a.info->comm, a.stream);
  };
  c.toleranceFor = [shape, flags, qf](zcollDataType_t t) {
    return tolerance(*shape, flags.bits, qf.intraBits, flags.stochastic, t);
  };
  addOutputColumns(&c);
  return zp::perfMain(argc, argv, c);
}

}  // namespace

int main(int argc, char** argv) {
  QarFlags qf;
  zp::QuantFlags flags;
  if (!takeQarFlags(&argc, argv, &qf) || !zp::takeQuantFlags(&argc, argv, &flags)) return 2;
  zp::Collective c = zp::allReduceShape("all_reduce");
  c.usage = zp::quantUsage("  --bits 4|8            quantized mode (zcollQuantizedAllReduce): "
                           "bits on the inter-node hop and the gather, default 8", false);
  c.usage.insert(c.usage.begin() + 1,
                 "  --intra-bits 4|8|16   quantized mode: bits on the intra-node hop, default 8 "
                 "(16: 16-bit floats)");
  if (qf.quantized) return quantizedMain(argc, argv, c, qf, flags);
  c.usage.push_back("  --wire                the exact mode prints the quantized mode's "
                    "columns too (wire, inter, maxerr, same)");
  c.ringPartials = true;
  if (qf.wire) addOutputColumns(&c);
  c.run = [](const zp::RunArgs& a) {
    return zcollAllReduce(a.send, a.recv, a.counts.count, a.dtype, a.op, a.info->comm, a.stream);
  };
  return zp::perfMain(argc, argv, c);
}
