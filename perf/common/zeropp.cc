#include "common/zeropp.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/data.h"

namespace zcoll {
namespace perf {

namespace {

bool bitsOk(int v) { return v == 4 || v == 8; }
bool bitsOrExactOk(int v) { return v == 0 || bitsOk(v); }
bool blockOk(int v) { return v == 0 || (v >= 32 && v <= 4096 && v % 32 == 0); }

std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

}  // namespace

void pointToHelp(const char* prog) {
  std::fprintf(stderr, "run '%s -h' for the options\n", prog);
}

bool takeIntFlag(int argc, char** argv, int* i, const char* what, bool (*ok)(int), int* out) {
  const char* flag = argv[*i];
  const char* text = *i + 1 < argc ? argv[++*i] : nullptr;
  char* end = nullptr;
  errno = 0;
  long v = text ? std::strtol(text, &end, 10) : 0;
  if (text == nullptr || end == text || *end != '\0' || errno != 0 || v < INT_MIN ||
      v > INT_MAX || !ok(int(v))) {
    std::fprintf(stderr, "%s: %s %s: takes %s\n", argv[0], flag, text ? text : "(nothing)", what);
    return false;
  }
  *out = int(v);
  return true;
}

bool takeQuantFlags(int* argc, char** argv, QuantFlags* f, bool exactAllowed) {
  const char* bits = exactAllowed ? "0 (exact), 4 or 8" : "4 or 8";
  const char* block = "0 (the default, 256) or a multiple of 32 in [32, 4096]";
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const char* a = argv[i];
    bool ok = true;
    if (std::strcmp(a, "--bits") == 0)
      ok = takeIntFlag(*argc, argv, &i, bits, exactAllowed ? bitsOrExactOk : bitsOk, &f->bits);
    else if (std::strcmp(a, "--block") == 0)
      ok = takeIntFlag(*argc, argv, &i, block, blockOk, &f->blockSize);
    else if (std::strcmp(a, "--asym") == 0) f->asymmetric = true;
    else if (std::strcmp(a, "--stochastic") == 0) f->stochastic = true;
    else if (std::strcmp(a, "--from-secondary") == 0) f->fromSecondary = true;
    else argv[out++] = argv[i];
    if (!ok) {
      pointToHelp(argv[0]);
      return false;
    }
  }
  *argc = out;
  argv[out] = nullptr;
  return true;
}

std::vector<zcollDataType_t> quantizableTypes() {
  return {zcollFloat32, zcollFloat16, zcollBfloat16};
}

const zcollQuantConfig_t* quantConfig(const QuantFlags& f, zcollQuantConfig_t* c) {
  if (f.bits == 0) return nullptr;
  *c = ZCOLL_QUANT_CONFIG_INITIALIZER;
  c->bits = f.bits;
  c->blockSize = f.blockSize;
  c->mode = f.asymmetric ? zcollQuantAsymmetric : zcollQuantSymmetric;
  c->rounding = f.stochastic ? zcollRoundStochastic : zcollRoundNearestEven;
  c->seed = 1;
  return c;
}

double quantTolerance(const QuantFlags& f, zcollDataType_t dtype) {
  if (f.bits == 0) return 0;
  double qmax = std::ldexp(1.0, f.bits - 1) - 1;
  double scale = 120.0 / qmax;
  double rounding = dtype == zcollBfloat16 ? 0.25 : dtype == zcollFloat16 ? 0.03125 : 4e-6;
  return scale * (f.stochastic ? 1.0 : 0.5) + rounding + 1e-4;
}

double qgzFactor(int nranks, int nodes, int interBits, int intraBits, bool stochastic,
                 zcollDataType_t t) {
  const double k = stochastic ? 1.0 : 0.5, qe = std::ldexp(1.0, interBits - 1) - 1;
  const double ei = intraBits == 16 ? (t == zcollFloat32 ? 0x1.0p-8 : 0.0)
                                    : k / (std::ldexp(1.0, intraBits - 1) - 1);
  if (nodes == 1) return ei;
  if (nodes == nranks) return k / qe;
  return ei + (1 + ei) * k / qe;
}

bool intraBitsOk(int v) { return v == 4 || v == 8 || v == 16; }

std::string intraHopName(int intraBits) {
  return intraBits == 16 ? "16-bit floats (bf16; fp16 for half input)"
                         : "INT" + std::to_string(intraBits);
}

namespace {

double ulpOf(double v, zcollDataType_t t) {
  int mant = t == zcollFloat16 ? 10 : t == zcollBfloat16 ? 7 : 23;
  return std::ldexp(1.0, std::max(-14, std::ilogb(std::max(v, 1.0))) - mant);
}

}  // namespace

double reduceTolerance(double factor, zcollRedOp_t op, int nranks, zcollDataType_t dtype,
                       double slack, int ulps) {
  Pattern p{op, nranks, 0, 0};
  double sumA = 0, maxOut = 0;
  for (int r = 0; r < nranks; ++r) {
    double a = 0;
    for (size_t i = 0; i < 4096; ++i) a = std::max(a, reduceInput(p, r, i));
    sumA += a;
  }
  for (size_t i = 0; i < 4096; ++i) maxOut = std::max(maxOut, reduceResult(p, i));
  const double div = op == zcollAvg ? nranks : 1;
  const double err = (factor * sumA * (1 + 0x1.0p-10) + slack * sumA) / div;
  return err + ulps * ulpOf(maxOut + err, dtype);
}

std::vector<ExtraColumn> zeroppColumns() {
  return {
      {"wire", "(B)", 11, [](const Measurement& m) { return format("%.0f", m.wireBytes); }},
      {"inter", "(B)", 11, [](const Measurement& m) { return format("%.0f", m.interBytes); }},
      {"maxerr", "", 8,
       [](const Measurement& m) { return m.checked ? format("%.3g", m.maxError) : "N/A"; }},
  };
}

std::vector<std::string> quantUsage(const std::string& bitsLine, bool fromSecondary) {
  std::vector<std::string> lines = {
      bitsLine,
      "  --block N             elements per quantization block: a multiple of 32 in\n"
      "                        [32, 4096] (0: the default, 256)",
      "  --asym                asymmetric quantization (min/max per block), default symmetric",
      "  --stochastic          stochastic rounding (seed 1), default nearest-even"};
  if (fromSecondary)
    lines.push_back("  --from-secondary      time zcollAllGatherFromSecondary (hpZ's backward "
                    "call) from a secondary shard filled once per size");
  return lines;
}

std::string describe(const QuantFlags& f) {
  if (f.bits == 0) return "# quantization: none (exact)";
  char buf[160];
  std::snprintf(buf, sizeof(buf), "# quantization: INT%d, block %d, %s, %s rounding", f.bits,
                f.blockSize ? f.blockSize : 256, f.asymmetric ? "asymmetric" : "symmetric",
                f.stochastic ? "stochastic (seed 1)" : "nearest-even");
  return buf;
}

}  // namespace perf
}  // namespace zcoll
