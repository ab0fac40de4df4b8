// zero_step_perf: the communication of one ZeRO-3 training step against one ZeRO++ step, on the
// same ranks, for a model of P parameters sharded over the W ranks (C = ceil(P/W) per rank).
//
//   ZeRO-3 : forward  zcollAllGather(shard -> weights)                         16-bit
//            backward zcollAllGather(shard -> weights)                         16-bit
//            gradient zcollReduceScatter(grads -> grad shard, Avg)            16-bit partials
//                                                                              (as NCCL)
//   ZeRO++ : forward  zcollAllGatherHier(shard -> weights, secondary, INT8)   qwZ over the rail + hpZ
//            backward zcollAllGatherFromSecondary(secondary -> weights)       intra-node only
//            gradient zcollQuantizedReduceScatter(grads -> grad shard, Avg)   qgZ, INT4
//
// Prints per step and per collective: time (max over ranks, mean over iterations), intra-node
// and inter-node bytes sent (summed over ranks, from zcollCommGetStats), the ZeRO++/ZeRO-3
// ratios, and the relative errors of ZeRO++'s weights and gradients against ZeRO-3's exact
// ones. The LAST line is a one-line summary ("zero_step: ..."). Exit 1 on a failed call or when
// ZeRO++'s forward and backward weights differ.
//
// Flags: -p P (parameters; K/M/G), -d bfloat16|half|float, -n iterations, -w warm-up steps,
//        --fwd-bits 4|8 (hpZ rail), --grad-bits 4|8 (qgZ both hops), --device 0|1,
//        --progress SEC, -G 0 (nccl-tests' CUDA graphs: only 0), -h.
// Progress: rank 0 writes a line to stderr at most every SEC seconds (10; 0: after every step)
// while the steps run, so a long run (a large -p over a slow link) shows it is alive.
// --device 1: every buffer in CUDA device memory (device LOCAL_RANK % device count, chosen before
// init), calls on a non-blocking stream; each phase's time is the host clock around its call and
// a cudaStreamSynchronize; the inputs are copied in once and the outputs back before the errors
// are computed (on the host, as without --device 1).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "common/device.h"
#include "common/options.h"
#include "zcoll/zcoll.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  size_t params = size_t(16) << 20;
  zcollDataType_t dtype = zcollBfloat16;
  int iters = 5;
  int warmup = 1;
  int fwdBits = 8;
  int gradBits = 4;
  bool device = false;  // --device 1
  int progressSec = 10;  // --progress
};

// ---- Setup ------------------------------------------------------------------------------------

[[noreturn]] void usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: zero_step_perf [-p params (16M)] [-d bfloat16|half|float (bfloat16)]\n"
               "       [-n iterations (5)] [-w warm-up steps (1)] [--fwd-bits 4|8 (8)]\n"
               "       [--grad-bits 4|8 (4)] [--device 0|1 (0): device buffers]\n"
               "       [--progress SEC (10): a progress line on stderr at most every SEC s,\n"
               "        0: every step] [-G 0: CUDA graphs (nccl-tests' -G), only 0]\n");
  std::exit(code);
}

int intArg(const char* v) {
  char* end = nullptr;
  long x = v ? std::strtol(v, &end, 10) : -1;
  if (v == nullptr || *end != '\0' || x < 0) usage(2);
  return static_cast<int>(x);
}

Args parseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (f == "-h" || f == "--help") usage(0);
    ++i;
    if (f == "-p") {
      if (v == nullptr || !zcoll::perf::parseSize(v, &a.params)) usage(2);
    } else if (f == "-d") {
      std::string d = v ? v : "";
      if (d == "bfloat16") a.dtype = zcollBfloat16;
      else if (d == "half" || d == "float16") a.dtype = zcollFloat16;
      else if (d == "float" || d == "float32") a.dtype = zcollFloat32;
      else usage(2);
    } else if (f == "-n") a.iters = intArg(v);
    else if (f == "-w") a.warmup = intArg(v);
    else if (f == "--fwd-bits") a.fwdBits = intArg(v);
    else if (f == "--grad-bits") a.gradBits = intArg(v);
    else if (f == "--progress") a.progressSec = intArg(v);
    else if (f == "--device") {
      int d = intArg(v);
      if (d > 1) usage(2);
      a.device = d == 1;
    } else if (f == "-G") {
      if (intArg(v) != 0) {
        std::fprintf(stderr, "zero_step_perf: -G %s (nccl-tests: CUDA graph launches): these "
                     "binaries do not capture (zcoll captures only stream-triggered calls), so "
                     "only -G 0; for device buffers use --device 1\n", v);
        std::exit(2);
      }
    } else usage(2);
  }
  if (a.iters < 1) a.iters = 1;
  return a;
}

struct Ranks {
  zcollComm_t comm = nullptr;
  int rank = 0, nranks = 1, nodes = 1, localSize = 1;
  zcollStream_t stream = nullptr;  // --device 1: the stream of every call
};

void check(zcollResult_t r, const char* what, const Ranks& k) {
  if (r == zcollSuccess) return;
  std::fprintf(stderr, "rank %d: %s failed: %s: %s\n", k.rank, what, zcollGetErrorString(r),
               zcollGetLastError(k.comm));
  std::exit(1);
}

Ranks initRanks() {
  Ranks k;
  // The ZeRO-3 baseline moves NCCL's bytes: its ring reduce-scatter sends 16-bit partials
  // (zcoll's default, fp32 partials, would send up to 2x, flattering ZeRO++). An explicit
  // ZCOLL_REDUCE_PARTIALS in the environment wins. Likewise its all-gathers and reduce-scatter
  // take NCCL's ring (zcoll's defaults on several nodes, the hierarchical ones, cross between
  // nodes less).
  setenv("ZCOLL_REDUCE_PARTIALS", "dtype", 0);
  setenv("ZCOLL_ALGO_ALLGATHER", "ring", 0);
  setenv("ZCOLL_ALGO_REDUCESCATTER", "ring", 0);
  check(zcollCommInitFromEnv(&k.comm, nullptr), "zcollCommInitFromEnv", k);
  check(zcollCommUserRank(k.comm, &k.rank), "zcollCommUserRank", k);
  check(zcollCommCount(k.comm, &k.nranks), "zcollCommCount", k);
  check(zcollCommNodeCount(k.comm, &k.nodes), "zcollCommNodeCount", k);
  check(zcollCommLocalSize(k.comm, &k.localSize), "zcollCommLocalSize", k);
  return k;
}

// ---- Data -------------------------------------------------------------------------------------

size_t typeSize(zcollDataType_t t) { return t == zcollFloat32 ? 4 : 2; }

void setValue(void* buf, zcollDataType_t t, size_t i, float v) {
  if (t == zcollFloat32) static_cast<float*>(buf)[i] = v;
  else if (t == zcollBfloat16) static_cast<zcoll::bf16_t*>(buf)[i] = zcoll::floatToBf16(v);
  else static_cast<zcoll::half_t*>(buf)[i] = zcoll::floatToHalf(v);
}

double getValue(const void* buf, zcollDataType_t t, size_t i) {
  if (t == zcollFloat32) return static_cast<const float*>(buf)[i];
  if (t == zcollBfloat16) return zcoll::bf16ToFloat(static_cast<const zcoll::bf16_t*>(buf)[i]);
  return zcoll::halfToFloat(static_cast<const zcoll::half_t*>(buf)[i]);
}

uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Seeded values in [-1, 1) times a magnitude that changes every 64 elements (2^-6 .. 1), like
// weights and gradients whose scale varies across a tensor.
void fillRandom(void* buf, zcollDataType_t t, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; ++i) {
    double mag = std::ldexp(1.0, -static_cast<int>(mix(seed ^ (i / 64) * 7919) % 7));
    double u = double(mix(seed * 0x100000001b3ull + i) >> 11) * 0x1.0p-53 * 2 - 1;
    setValue(buf, t, i, static_cast<float>(mag * u));
  }
}

// A buffer in host memory and, with --device 1, its device mirror, which the calls get.
struct Block {
  std::vector<unsigned char> host;
  zcoll::perf::DeviceBuffer device;
  unsigned char* call = nullptr;  // what the calls get: host.data(), or the device mirror

  void resize(size_t bytes, bool onDevice) {
    host.resize(bytes);
    call = onDevice ? device.ensure(bytes) : host.data();
  }
  void toDevice() {
    if (call != host.data()) zcoll::perf::copyToDevice(call, host.data(), host.size());
  }
  void toHost() {
    if (call != host.data()) zcoll::perf::copyToHost(host.data(), call, host.size());
  }
};

struct Buffers {
  size_t shard = 0;  // C elements per rank
  Block weightShard, weights, weightsBack, secondary, grads, grad3, gradpp, weights3;
};

Buffers makeBuffers(const Args& a, const Ranks& k) {
  Buffers b;
  b.shard = (a.params + k.nranks - 1) / k.nranks;
  size_t es = typeSize(a.dtype), full = b.shard * k.nranks;
  const bool dev = a.device;
  b.weightShard.resize(b.shard * es, dev);
  b.weights.resize(full * es, dev);
  b.weightsBack.resize(full * es, dev);
  b.weights3.resize(full * es, dev);
  b.secondary.resize(b.shard * k.nodes * es, dev);
  b.grads.resize(full * es, dev);
  b.grad3.resize(b.shard * es, dev);
  b.gradpp.resize(b.shard * es, dev);
  fillRandom(b.weightShard.host.data(), a.dtype, b.shard, 1000 + k.rank);
  fillRandom(b.grads.host.data(), a.dtype, full, 2000 + k.rank);
  b.weightShard.toDevice();
  b.grads.toDevice();
  return b;
}

// --device 1: the outputs back to the host, for the errors.
void outputsToHost(Buffers& b) {
  for (Block* x : {&b.weights, &b.weightsBack, &b.weights3, &b.grad3, &b.gradpp}) x->toHost();
}

// ---- Steps ------------------------------------------------------------------------------------

enum Phase { kForward, kBackward, kGradient, kNumPhases };
const char* const kPhaseNames[kNumPhases] = {"forward all-gather", "backward all-gather",
                                             "gradient reduce-scatter"};

enum Path { kIntra, kInter, kNumCounted };

struct Totals {  // per phase, then the whole step
  double sec[kNumPhases + 1] = {};
  double bytes[kNumCounted][kNumPhases + 1] = {};  // sent, by path
};

zcollStats_t stats(const Ranks& k) {
  zcollStats_t s;
  std::memset(&s, 0, sizeof(s));
  s.size = sizeof(s);
  check(zcollCommGetStats(k.comm, &s), "zcollCommGetStats", k);
  return s;
}

zcollResult_t runPhase(bool zeropp, Phase p, const Args& a, const Ranks& k, Buffers& b) {
  zcollQuantConfig_t fwd = ZCOLL_QUANT_CONFIG_INITIALIZER, grad = ZCOLL_QUANT_CONFIG_INITIALIZER;
  fwd.bits = a.fwdBits;
  grad.bits = grad.intraBits = a.gradBits;
  const size_t c = b.shard;
  zcollStream_t s = k.stream;
  if (!zeropp) {
    if (p == kGradient)
      return zcollReduceScatter(b.grads.call, b.grad3.call, c, a.dtype, zcollAvg, k.comm, s);
    void* out = p == kForward ? b.weights3.call : b.weightsBack.call;
    return zcollAllGather(b.weightShard.call, out, c, a.dtype, k.comm, s);
  }
  if (p == kForward)
    return zcollAllGatherHier(b.weightShard.call, b.weights.call, b.secondary.call, c, a.dtype,
                              &fwd, k.comm, s);
  if (p == kBackward)
    return zcollAllGatherFromSecondary(b.secondary.call, b.weightsBack.call, c, a.dtype, k.comm,
                                       s);
  return zcollQuantizedReduceScatter(b.grads.call, b.gradpp.call, c, a.dtype, zcollAvg, &grad,
                                     k.comm, s);
}

// --device 1: waits for the stream, then fails on an error an enqueued call met while it ran.
void settle(const Ranks& k, const char* what) {
  if (k.stream == nullptr) return;
  zcoll::perf::synchronize(k.stream, "cudaStreamSynchronize");
  zcollResult_t async = zcollSuccess;
  check(zcollCommGetAsyncError(k.comm, &async), "zcollCommGetAsyncError", k);
  check(async, what, k);
}

// One step: the three phases back to back; adds this rank's times and bytes to `t`.
void runStep(bool zeropp, const Args& a, const Ranks& k, Buffers& b, Totals* t) {
  check(zcollBarrier(k.comm, nullptr), "zcollBarrier", k);
  auto stepStart = Clock::now();
  for (int p = 0; p < kNumPhases; ++p) {
    zcollStats_t before = stats(k);
    auto start = Clock::now();
    check(runPhase(zeropp, Phase(p), a, k, b), kPhaseNames[p], k);
    settle(k, kPhaseNames[p]);
    t->sec[p] += std::chrono::duration<double>(Clock::now() - start).count();
    zcollStats_t after = stats(k);
    t->bytes[kIntra][p] +=
        double(after.bytesSent[zcollPathIntra] - before.bytesSent[zcollPathIntra]);
    t->bytes[kInter][p] +=
        double(after.bytesSent[zcollPathInter] - before.bytesSent[zcollPathInter]);
  }
  t->sec[kNumPhases] += std::chrono::duration<double>(Clock::now() - stepStart).count();
}

// Progress on stderr (rank 0): after a step, when `everySec` has passed since the last line.
class Progress {
 public:
  Progress(const Args& a, int rank)
      : everySec_(a.progressSec), rank_(rank), total_(2 * (a.warmup + a.iters)),
        start_(Clock::now()), last_(start_) {}
  void stepDone(const char* what, int i, int n) {
    ++done_;
    auto now = Clock::now();
    if (rank_ != 0 || std::chrono::duration<double>(now - last_).count() < everySec_) return;
    last_ = now;
    std::fprintf(stderr, "zero_step_perf: step %d of %d done (%s %d/%d), %.1f s elapsed\n",
                 done_, total_, what, i + 1, n,
                 std::chrono::duration<double>(now - start_).count());
    std::fflush(stderr);
  }

 private:
  double everySec_;
  int rank_, total_, done_ = 0;
  Clock::time_point start_, last_;
};

// Mean over iterations; times: max over ranks; bytes: sum over ranks.
Totals measure(bool zeropp, const Args& a, const Ranks& k, Buffers& b, Progress* progress) {
  Totals warm, t;
  const char* name = zeropp ? "ZeRO++" : "ZeRO-3";
  std::string warming = std::string(name) + " warm-up";
  for (int i = 0; i < a.warmup; ++i) {
    runStep(zeropp, a, k, b, &warm);
    progress->stepDone(warming.c_str(), i, a.warmup);
  }
  for (int i = 0; i < a.iters; ++i) {
    runStep(zeropp, a, k, b, &t);
    progress->stepDone(name, i, a.iters);
  }
  for (auto& path : t.bytes)
    for (int p = 0; p < kNumPhases; ++p) path[kNumPhases] += path[p];
  check(zcollAllReduce(t.sec, t.sec, kNumPhases + 1, zcollFloat64, zcollMax, k.comm, nullptr),
        "zcollAllReduce", k);
  check(zcollAllReduce(t.bytes, t.bytes, sizeof(t.bytes) / sizeof(double), zcollFloat64, zcollSum,
                       k.comm, nullptr),
        "zcollAllReduce", k);
  for (int p = 0; p <= kNumPhases; ++p) {
    t.sec[p] /= a.iters;
    for (auto& path : t.bytes) path[p] /= a.iters;
  }
  return t;
}

// ---- Accuracy ---------------------------------------------------------------------------------

// sqrt(sum (x-y)^2 / sum y^2) over all ranks' `n` elements.
double relativeError(const void* x, const void* y, size_t n, zcollDataType_t t, const Ranks& k) {
  double s[2] = {0, 0};
  for (size_t i = 0; i < n; ++i) {
    double d = getValue(x, t, i) - getValue(y, t, i), r = getValue(y, t, i);
    s[0] += d * d;
    s[1] += r * r;
  }
  check(zcollAllReduce(s, s, 2, zcollFloat64, zcollSum, k.comm, nullptr), "zcollAllReduce", k);
  return s[1] > 0 ? std::sqrt(s[0] / s[1]) : 0;
}

// 1 when any rank's ZeRO++ forward and backward weights differ.
int forwardBackwardDiffer(const Buffers& b, const Ranks& k) {
  int differ = b.weights.host != b.weightsBack.host;
  check(zcollAllReduce(&differ, &differ, 1, zcollInt32, zcollMax, k.comm, nullptr),
        "zcollAllReduce", k);
  return differ;
}

// ---- Output -----------------------------------------------------------------------------------

double ratio(double a, double b) { return b > 0 ? a / b : 0; }

void printRow(const char* step, const char* what, const Totals& t, int p) {
  std::printf("  %-7s %-24s %10.3f %14.0f %14.0f\n", step, what, t.sec[p] * 1e3,
              t.bytes[kIntra][p], t.bytes[kInter][p]);
}

void printReport(const Args& a, const Ranks& k, size_t shard, const Totals& z3, const Totals& zpp) {
  std::printf("# zero_step_perf: %zu parameters (%s), %d ranks on %d nodes (%d per node), "
              "shard %zu, %d iterations after %d warm-up\n",
              a.params, zcoll::perf::typeName(a.dtype), k.nranks, k.nodes, k.localSize, shard,
              a.iters, a.warmup);
  if (a.device)
    std::printf("# device buffers (--device 1): cudaMalloc'd, calls on a non-blocking stream; time: host "
                "clock around each call + cudaStreamSynchronize\n");
  std::printf("# ZeRO++: forward hpZ with INT%d rail (fills the secondary), backward from the "
              "secondary, gradients qgZ INT%d\n", a.fwdBits, a.gradBits);
  std::printf("# %-7s %-24s %10s %14s %14s\n", "step", "collective", "time(ms)", "intra(B)",
              "inter(B)");
  const Totals* steps[2] = {&z3, &zpp};
  const char* names[2] = {"ZeRO-3", "ZeRO++"};
  for (int s = 0; s < 2; ++s) {
    for (int p = 0; p < kNumPhases; ++p) printRow(names[s], kPhaseNames[p], *steps[s], p);
    printRow(names[s], "step", *steps[s], kNumPhases);
  }
  const int all = kNumPhases;
  std::printf("  %-7s %-24s %10.3f %14.3f %14.3f\n", "ratio", "ZeRO++ / ZeRO-3",
              ratio(zpp.sec[all], z3.sec[all]), ratio(zpp.bytes[kIntra][all], z3.bytes[kIntra][all]),
              ratio(zpp.bytes[kInter][all], z3.bytes[kInter][all]));
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parseArgs(argc, argv);
  int device = -1;
  if (a.device) {  // before init, which binds the communicator to the current device
    std::string why = zcoll::perf::selectDevice(&device);
    if (!why.empty()) {
      std::fprintf(stderr, "%s: --device 1 (device buffers): %s\n", argv[0], why.c_str());
      return 1;
    }
  }
  Ranks k = initRanks();
  if (a.device) {
    zcoll::perf::setDeviceRank(k.rank);
    k.stream = zcoll::perf::createStream();
  }
  Buffers b = makeBuffers(a, k);
  Progress progress(a, k.rank);
  Totals z3 = measure(false, a, k, b, &progress);
  Totals zpp = measure(true, a, k, b, &progress);
  outputsToHost(b);
  const size_t full = b.shard * k.nranks;
  double weightErr =
      relativeError(b.weights.host.data(), b.weights3.host.data(), full, a.dtype, k);
  double gradErr = relativeError(b.gradpp.host.data(), b.grad3.host.data(), b.shard, a.dtype, k);
  int differ = forwardBackwardDiffer(b, k);
  const int all = kNumPhases;
  if (k.rank == 0) {
    printReport(a, k, b.shard, z3, zpp);
    std::printf("# relative error vs ZeRO-3: weights %.3g, gradients %.3g; ZeRO++ forward == "
                "backward: %s\n", weightErr, gradErr, differ ? "NO" : "yes");
    std::printf("zero_step: %d ranks x %d nodes, %zu params %s: inter-node bytes ZeRO++/ZeRO-3 "
                "= %.3f, time ZeRO++/ZeRO-3 = %.3f, gradient rel error %.3g\n",
                k.nranks, k.nodes, a.params, zcoll::perf::typeName(a.dtype),
                ratio(zpp.bytes[kInter][all], z3.bytes[kInter][all]), ratio(zpp.sec[all], z3.sec[all]),
                gradErr);
    std::fflush(stdout);
  }
  check(zcollCommDestroy(k.comm), "zcollCommDestroy", k);
  zcoll::perf::destroyStream(k.stream);
  return differ ? 1 : 0;
}
