// CPU kernel variants and their run-time selection. Each variant (kernels_scalar.cc,
// kernels_avx2.cc, kernels_avx512.cc) instantiates the same algorithm (kernels_impl.h) over its
// own vector primitives and exposes one KernelSet. Arguments reaching a KernelSet are validated.
#pragma once

#include <cstddef>
#include <vector>

#include "quant/quant.h"

namespace zcoll {
namespace quant {

enum class Isa : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

struct KernelSet {
  const char* name;
  void (*quantize)(const void* in, zcollDataType_t dtype, size_t n, const QuantParams& p,
                   void* out);
  void (*dequantize)(const void* q, size_t n, const QuantParams& p, void* out,
                     zcollDataType_t dtype);
  void (*dequantizeSum)(const void* const* chunks, int k, size_t n, const QuantParams& p,
                        float scale, void* out, zcollDataType_t dtype);
  void (*requantize)(const void* const* chunks, int k, size_t n, const QuantParams& in,
                     const QuantParams& out, void* outQ);
};

// The four operations, each of which runs on its own choice of variant.
enum class QuantOp : int { kQuantize = 0, kDequantize, kSum, kRequantize, kCount };
const char* quantOpName(QuantOp op);

const char* isaName(Isa isa);
// Compiled in and supported by this CPU (and OS).
bool isaSupported(Isa isa);
Isa bestIsa();
// The vector variants this CPU supports, widest first; {scalar} when it has none.
std::vector<Isa> tuningCandidates();

// The variant `op` runs on: the test override if set, else ZCOLL_QUANT_ISA (read once; an unknown
// or unsupported value logs a warning and is ignored), else the fastest of tuningCandidates() for
// `op`, measured once, at the first use of any operation (measureFastestIsa). Thread-safe.
Isa activeIsa(QuantOp op);
// How activeIsa chose: "override", "ZCOLL_QUANT_ISA" or "measured" (resolves if needed).
const char* isaChoiceReason();
// Whether ZCOLL_QUANT_ISA, as set right now, forces a supported variant (then *isa is it).
bool isaForcedByEnv(Isa* isa);
// Times `op` on a small input (a pipeline piece: 16 Ki bf16 elements) with each candidate, best
// of a few runs; returns the first candidate (the widest) unless another is at least 10% faster.
// Bounded to a few milliseconds. Every variant gives the same bytes: the choice is speed only.
Isa measureFastestIsa(QuantOp op, const std::vector<Isa>& candidates);

// For tests: force a variant (zcollInvalidUsage if this CPU lacks it) / drop the override.
Result setIsaOverride(Isa isa);
void clearIsaOverride();

const KernelSet& kernelSet(Isa isa);

namespace scalar {
const KernelSet& kernels();
}
namespace avx2 {
const KernelSet& kernels();
}
namespace avx512 {
const KernelSet& kernels();
}

}  // namespace quant
}  // namespace zcoll
