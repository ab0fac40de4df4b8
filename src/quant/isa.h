// CPU kernel variants and their run-time selection. Each variant (kernels_scalar.cc,
// kernels_avx2.cc, kernels_avx512.cc) instantiates the same algorithm (kernels_impl.h) over its
// own vector primitives and exposes one KernelSet. Arguments reaching a KernelSet are validated.
#pragma once

#include <cstddef>

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

const char* isaName(Isa isa);
// Compiled in and supported by this CPU (and OS).
bool isaSupported(Isa isa);
Isa bestIsa();
// The variant the operations use: the test override if set, else ZCOLL_QUANT_ISA (read once;
// an unknown or unsupported value logs a warning and falls back), else bestIsa().
Isa activeIsa();
// What ZCOLL_QUANT_ISA asks for right now (falling back as above); activeIsa caches it.
Isa isaFromEnv();
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
