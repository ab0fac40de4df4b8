// Run-time choice of the CPU kernel variant per operation: cpuid (via __builtin_cpu_supports, which
// also checks that the OS saves the vector state), an override for tests, ZCOLL_QUANT_ISA, else a
// short measurement (autotune.cc). Resolved once: the hot paths only read an atomic.
#include <atomic>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <mutex>
#include <vector>
#include <string>

#include "base/log.h"
#include "base/params.h"
#include "quant/isa.h"

namespace zcoll {
namespace quant {

namespace {

constexpr int kUnset = -1;
constexpr int kNumOps = static_cast<int>(QuantOp::kCount);
std::atomic<int> gOverride{kUnset};
std::atomic<int> gResolved[kNumOps] = {{kUnset}, {kUnset}, {kUnset}, {kUnset}};
std::once_flag gResolveOnce;
bool gForcedByEnv = false;  // written once under gResolveOnce

#if defined(__x86_64__)
// F16C from cpuid (leaf 1, ECX): clang before 15 rejects __builtin_cpu_supports("f16c").
bool cpuHasF16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
}
#endif

bool cpuHas(Isa isa) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && cpuHasF16c() &&
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

// ZCOLL_QUANT_ISA for every operation, else a measurement per operation (a few ms, once).
void resolveAll() {
  Isa forced = Isa::kScalar;
  gForcedByEnv = isaForcedByEnv(&forced);
  std::vector<Isa> candidates = tuningCandidates();
  std::string summary;
  for (int op = 0; op < kNumOps; ++op) {
    Isa isa = gForcedByEnv ? forced : measureFastestIsa(static_cast<QuantOp>(op), candidates);
    gResolved[op].store(static_cast<int>(isa), std::memory_order_release);
    summary += std::string(op ? ", " : "") + quantOpName(static_cast<QuantOp>(op)) + " " +
               isaName(isa);
  }
  ZCOLL_INFO(LogSubsys::kQuant, "quantization kernels (%s): %s",
             gForcedByEnv ? "ZCOLL_QUANT_ISA" : "measured", summary.c_str());
}

}  // namespace

bool isaForcedByEnv(Isa* out) {
  std::string want = paramString("ZCOLL_QUANT_ISA");
  if (want.empty()) return false;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (want != isaName(isa)) continue;
    if (isaSupported(isa)) {
      *out = isa;
      return true;
    }
    ZCOLL_WARN(LogSubsys::kQuant, "ZCOLL_QUANT_ISA=%s: not supported by this CPU, ignored",
               want.c_str());
    return false;
  }
  ZCOLL_WARN(LogSubsys::kQuant, "ZCOLL_QUANT_ISA=%s: unknown (scalar, avx2, avx512), ignored",
             want.c_str());
  return false;
}

const char* quantOpName(QuantOp op) {
  switch (op) {
    case QuantOp::kQuantize: return "quantize";
    case QuantOp::kDequantize: return "dequantize";
    case QuantOp::kSum: return "dequant_sum";
    case QuantOp::kRequantize: return "dequant_reduce_requant";
    case QuantOp::kCount: break;
  }
  return "unknown";
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

std::vector<Isa> tuningCandidates() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2}) {
    if (isaSupported(isa)) out.push_back(isa);
  }
  if (out.empty()) out.push_back(Isa::kScalar);
  return out;
}

Isa activeIsa(QuantOp op) {
  int o = gOverride.load(std::memory_order_relaxed);
  if (o != kUnset) return static_cast<Isa>(o);
  int r = gResolved[static_cast<int>(op)].load(std::memory_order_acquire);
  if (r != kUnset) return static_cast<Isa>(r);
  std::call_once(gResolveOnce, resolveAll);
  return static_cast<Isa>(gResolved[static_cast<int>(op)].load(std::memory_order_acquire));
}

const char* isaChoiceReason() {
  if (gOverride.load(std::memory_order_relaxed) != kUnset) return "override";
  std::call_once(gResolveOnce, resolveAll);
  return gForcedByEnv ? "ZCOLL_QUANT_ISA" : "measured";
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
