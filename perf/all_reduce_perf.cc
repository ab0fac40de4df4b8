// all_reduce_perf: zcollAllReduce. Size = one rank's buffer.
// Quantized mode (zcollQuantizedAllReduce, docs/ZEROPP.md "Quantized all-reduce"): --bits 4|8
// (the inter-node hop and the gather) and/or --intra-bits 4|8 (qgZ's intra-node hop), each 8
// when the other is given; --block N, --asym, --stochastic as the other quantized binaries.
// Use -d float, half or bfloat16 and -o sum or avg (others fail in the call). It adds the wire, inter and maxerr columns, and the
// check admits the documented bound for the driver's inputs (non-negative integers, so every
// block's absmax is at most the rank's largest input A_s):
//   (F + k/qg * (1 + F)) * sum_s A_s (+ fp32 slack), divided by W for avg, plus output units;
//   F = qgZ's factor (quantized_reduce_scatter_perf.cc), k = 1/2 (1 stochastic), qg = 2^(bits-1)-1.
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
};

// Takes --intra-bits off argv and notes whether quantization was asked (--bits is taken with
// the shared flags by takeQuantFlags).
bool takeQarFlags(int* argc, char** argv, QarFlags* f) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    if (std::strcmp(argv[i], "--intra-bits") == 0) {
      f->quantized = true;
      f->intraBits = i + 1 < *argc ? std::atoi(argv[++i]) : 0;
      if (f->intraBits != 4 && f->intraBits != 8) {
        std::fprintf(stderr, "--intra-bits takes 4 or 8\n");
        return false;
      }
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

double ulpOf(double v, zcollDataType_t t) {
  int mant = t == zcollFloat16 ? 10 : t == zcollBfloat16 ? 7 : 23;
  return std::ldexp(1.0, std::max(-14, std::ilogb(std::max(v, 1.0))) - mant);
}

double tolerance(const RunShape& s, int bits, int intraBits, bool stochastic, zcollDataType_t t) {
  const double k = stochastic ? 1.0 : 0.5;
  const double qi = std::ldexp(1.0, intraBits - 1) - 1, qe = std::ldexp(1.0, bits - 1) - 1;
  double f = k / qi + (1 + k / qi) * k / qe;
  if (s.nodes == 1) f = k / qi;
  else if (s.nodes == s.nranks) f = k / qe;
  f += k / qe * (1 + f);  // the gather's quantization of the reduced chunk
  zp::Pattern p{s.op, s.nranks, 0, 0};
  double sumA = 0, maxOut = 0;
  for (int r = 0; r < s.nranks; ++r) {
    double a = 0;
    for (size_t i = 0; i < 4096; ++i) a = std::max(a, zp::reduceInput(p, r, i));
    sumA += a;
  }
  for (size_t i = 0; i < 4096; ++i) maxOut = std::max(maxOut, zp::reduceResult(p, i));
  const double div = s.op == zcollAvg ? s.nranks : 1;
  const double err = (f * sumA * (1 + 0x1.0p-10) + 0x1.0p-15 * sumA) / div;
  return err + 2 * ulpOf(maxOut + err, t);
}

int quantizedMain(int argc, char** argv, zp::Collective c, const QarFlags& qf,
                  const zp::QuantFlags& flags) {
  static zcollQuantConfig_t storage;
  zp::quantConfig(flags, &storage);
  storage.intraBits = qf.intraBits;
  auto shape = std::make_shared<RunShape>();
  c.name = "quantized_all_reduce";
  char note[96];
  std::snprintf(note, sizeof(note), "# zcollQuantizedAllReduce: intra-node hop INT%d",
                qf.intraBits);
  c.notes = {zp::describe(flags) + " (inter-node hop and gather)", note};
  c.run = [shape](const zp::RunArgs& a) {
    *shape = RunShape{a.info->nranks, a.info->nodes, a.op};
    return zcollQuantizedAllReduce(a.send, a.recv, a.counts.count, a.dtype, a.op, &storage,
                                   a.info->comm, a.stream);
  };
  c.toleranceFor = [shape, flags, qf](zcollDataType_t t) {
    return tolerance(*shape, flags.bits, qf.intraBits, flags.stochastic, t);
  };
  c.extraColumns = zp::zeroppColumns();
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
                 "  --intra-bits 4|8      quantized mode: bits on the intra-node hop, default 8");
  if (qf.quantized) return quantizedMain(argc, argv, c, qf, flags);
  c.run = [](const zp::RunArgs& a) {
    return zcollAllReduce(a.send, a.recv, a.counts.count, a.dtype, a.op, a.info->comm, a.stream);
  };
  return zp::perfMain(argc, argv, c);
}
