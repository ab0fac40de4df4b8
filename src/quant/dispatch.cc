// Run-time choice of the CPU kernel variant: cpuid (via __builtin_cpu_supports, which also checks
// that the OS saves the vector state), ZCOLL_QUANT_ISA, and an override for tests. Resolved once:
// the hot paths only read an atomic.
#include <atomic>
#include <string>

#include "core/log.h"
#include "core/params.h"
#include "quant/isa.h"

namespace zcoll {
namespace quant {

namespace {

constexpr int kUnset = -1;
std::atomic<int> gOverride{kUnset};
std::atomic<int> gResolved{kUnset};

bool cpuHas(Isa isa) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
             __builtin_cpu_supports("fma");
    case Isa::kAvx512:
      return cpuHas(Isa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq");
  }
  return false;
#else
  return isa == Isa::kScalar;
#endif
}

}  // namespace

Isa isaFromEnv() {
  std::string want = paramString("ZCOLL_QUANT_ISA");
  if (want.empty()) return bestIsa();
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (want != isaName(isa)) continue;
    if (isaSupported(isa)) return isa;
    ZCOLL_WARN(LogSubsys::kQuant, "ZCOLL_QUANT_ISA=%s: not supported by this CPU, using %s",
               want.c_str(), isaName(bestIsa()));
    return bestIsa();
  }
  ZCOLL_WARN(LogSubsys::kQuant, "ZCOLL_QUANT_ISA=%s: unknown (scalar, avx2, avx512), using %s",
             want.c_str(), isaName(bestIsa()));
  return bestIsa();
}

const char* isaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "unknown";
}

bool isaSupported(Isa isa) { return cpuHas(isa); }

Isa bestIsa() {
  if (isaSupported(Isa::kAvx512)) return Isa::kAvx512;
  if (isaSupported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kScalar;
}

Isa activeIsa() {
  int o = gOverride.load(std::memory_order_relaxed);
  if (o != kUnset) return static_cast<Isa>(o);
  int r = gResolved.load(std::memory_order_acquire);
  if (r == kUnset) {
    r = static_cast<int>(isaFromEnv());
    gResolved.store(r, std::memory_order_release);
    ZCOLL_INFO(LogSubsys::kQuant, "quantization kernels: %s", isaName(static_cast<Isa>(r)));
  }
  return static_cast<Isa>(r);
}

Result setIsaOverride(Isa isa) {
  if (!isaSupported(isa)) {
    return fail(zcollInvalidUsage, "quantization ISA %s is not supported by this CPU",
                isaName(isa));
  }
  gOverride.store(static_cast<int>(isa), std::memory_order_relaxed);
  return zcollSuccess;
}

void clearIsaOverride() { gOverride.store(kUnset, std::memory_order_relaxed); }

const KernelSet& kernelSet(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return avx512::kernels();
    case Isa::kAvx2: return avx2::kernels();
    default: return scalar::kernels();
  }
}

}  // namespace quant
}  // namespace zcoll
