// Which CPU variant is fastest for an operation on this machine, by measurement. cpuid says what a
// CPU can run, not what runs fastest: on some CPUs 512-bit instructions are split in two halves or
// lower the clock, and an operation can be faster on the AVX2 variant. Every variant produces the
// same bytes, so the choice only changes speed (ranks may even choose differently).
//
// Each operation runs on the input it sees in the collectives' pipelines: a 16 Ki-element bf16
// piece (L2-resident), with the collectives' default formats (qwZ: INT8; qgZ: INT4, 4 chunks).
// Best of kRuns per candidate, all candidates interleaved, about 0.1-1 ms in all per operation.
#include <algorithm>
#include <chrono>
#include <vector>

#include "base/dtype.h"
#include "quant/isa.h"
#include "quant/quant_math.h"

namespace zcoll {
namespace quant {

namespace {

constexpr size_t kElems = size_t{16} << 10;
constexpr int kChunks = 4;
constexpr int kRuns = 3;
constexpr double kMargin = 0.9;  // another variant must be 10% faster than the widest

QuantParams tuneParams(int bits) {
  QuantParams p;
  p.bits = bits;
  p.blockSize = 256;
  return p;
}

// The input of one operation and room for its output, prepared with the scalar variant.
struct TuneInput {
  QuantParams p;
  std::vector<bf16_t> x;
  std::vector<uint8_t> q, out;
  std::vector<const void*> chunks;

  explicit TuneInput(QuantOp op)
      : p(tuneParams(op == QuantOp::kQuantize || op == QuantOp::kDequantize ? 8 : 4)), x(kElems) {
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (bf16_t& v : x) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      v = floatToBf16(static_cast<float>(static_cast<int32_t>(s >> 32)) * (1.0f / 536870912.0f));
    }
    size_t qb = layoutOf(kElems, p.blockSize, p.bits, p.symmetric).totalBytes;
    q.resize(qb * kChunks);
    out.resize(std::max(qb, kElems * sizeof(bf16_t)));
    const KernelSet& ref = kernelSet(Isa::kScalar);
    for (int c = 0; c < kChunks; ++c) {
      ref.quantize(x.data(), zcollBfloat16, kElems, p, q.data() + c * qb);
      chunks.push_back(q.data() + c * qb);
    }
  }

  void run(QuantOp op, const KernelSet& ks) {
    switch (op) {
      case QuantOp::kQuantize: ks.quantize(x.data(), zcollBfloat16, kElems, p, out.data()); break;
      case QuantOp::kDequantize: ks.dequantize(q.data(), kElems, p, out.data(), zcollBfloat16); break;
      case QuantOp::kSum:
        ks.dequantizeSum(chunks.data(), kChunks, kElems, p, 0.25f, out.data(), zcollBfloat16);
        break;
      case QuantOp::kRequantize: ks.requantize(chunks.data(), kChunks, kElems, p, p, out.data()); break;
      case QuantOp::kCount: break;
    }
  }
};

double secondsOf(TuneInput& in, QuantOp op, const KernelSet& ks) {
  auto t0 = std::chrono::steady_clock::now();
  in.run(op, ks);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Isa measureFastestIsa(QuantOp op, const std::vector<Isa>& candidates) {
  if (candidates.empty()) return Isa::kScalar;
  if (candidates.size() == 1) return candidates[0];
  TuneInput in(op);
  std::vector<double> best(candidates.size(), 1e30);
  for (int r = 0; r < kRuns; ++r) {  // interleaved, so a burst of load hits every candidate
    for (size_t i = 0; i < candidates.size(); ++i) {
      best[i] = std::min(best[i], secondsOf(in, op, kernelSet(candidates[i])));
    }
  }
  size_t fastest = static_cast<size_t>(std::min_element(best.begin(), best.end()) - best.begin());
  return best[fastest] < kMargin * best[0] ? candidates[fastest] : candidates[0];
}

}  // namespace quant
}  // namespace zcoll
