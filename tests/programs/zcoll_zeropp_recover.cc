// A ZeRO++ training loop that keeps going after a rank is SIGKILLed at a random point, with
// its weights and optimizer state rebuilt from the others' copies, no checkpoint
// (tests/scripts/zeropp_recover.sh; run it by hand with tools/zcollrun --keep-going -n 4
// --nodes 2). Links the public library only.
//
//   zcoll_zeropp_recover VICTIM KILL_MS STEPS_AFTER [TOTAL]
//
// The model is a flat vector of TOTAL weights (default 24000), sharded over the ranks (C per rank), and one
// optimizer-state tensor shaped like it (a momentum). Step v, on exact integer data chosen so
// that every quantization is exact (every block holds an element of the largest magnitude and
// only multiples of its scale), so every value is checked bit for bit against a reference every
// rank computes alone:
//   1. the state is buddy-copied to the next node (zcollBuddyCopy), kept as version v;
//   2. forward gather: hpZ (zcollAllGatherHier, INT8 rail) into the secondary of version v on
//      an even layout, qwZ (zcollQuantizedAllGather, INT8) on an uneven one;
//   3. backward gather: hpZ from the secondary (zcollAllGatherFromSecondary), or qwZ again;
//   4. gradients: qgZ (zcollQuantizedReduceScatter, INT4 both hops; flat on an uneven layout);
//   5. the update of this rank's weight and state shards.
// Secondaries, gathered vectors and state copies are kept for the last two versions in turn.
// Rank VICTIM SIGKILLs itself KILL_MS after its first step (printing "killed at NS" first).
// The others: the failing call's return time, zcollCommShrink without it, the version every
// survivor still holds (the smallest last good forward, by an all-reduce), the weights rebuilt
// from hpZ's secondaries (zcollRebuildFromSecondary) and the state from the buddy copies
// (zcollRebuildFromBuddy) over the new world size, both checked bit-identical to the copy taken
// before the kill, then STEPS_AFTER more steps from that version on the new communicator (its
// layout uneven: qwZ and flat qgZ), each checked. The first rank of the new comm prints:
//   recovered: failed at NS,NS,NS shrink_ms A,B,C rebuild_ms D,E,F version V (step S) ranks 3
//   steps V..V+K-1 exact, weights and state bit-identical
// Exit codes: 0 ok, 2 usage, 3 a failure other than zcollRemoteError, 4 the recovery failed,
// 5 a wrong value, 6 the victim never died.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "zcoll/zcoll.h"

namespace {

using Clock = std::chrono::steady_clock;
size_t kTotal = 24000;  // the parameters (TOTAL); shards pad to 4 x 6144 and 3 x 8192
constexpr long kMaxSteps = 100000;

int64_t wallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}
double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// ---- The data: integers that every quantization carries exactly -------------------------------

bool anchor(size_t p) { return p % 32 == 0; }  // one in every block of 32: the block's max
float anchorWeight(size_t p) { return (p / 32) % 2 ? 127.0f : -127.0f; }  // INT8 scale 1
long wrap(long x, long lo, long hi) {
  const long span = hi - lo + 1;
  return ((x - lo) % span + span) % span + lo;
}
float initialWeight(size_t p) {
  return anchor(p) ? anchorWeight(p) : static_cast<float>(long(p * 7) % 253 - 126);
}
float initialState(size_t p) { return static_cast<float>(long(p % 11) - 5); }
// The gradient direction at step v: in [-7, 7], 7 at the anchors (INT4 scale = the rank's
// factor, so every hop is exact).
long direction(long v, float w, size_t p) {
  return anchor(p) ? 7 : wrap(long(w) * 3 + v * 7 + long(p), 0, 14) - 7;
}
int factor(int rank) { return rank % 2 + 1; }  // rank r's gradient is factor(r) * direction
int factorSum(int n) {
  int s = 0;
  for (int r = 0; r < n; ++r) s += factor(r);
  return s;
}
float updatedWeight(float w, float g, size_t p) {
  return anchor(p) ? w : static_cast<float>(wrap(long(w) - long(g), -126, 126));
}
float updatedState(float m, float g) {
  return static_cast<float>(wrap(long(m) + long(g), -1000, 1000));
}

// ---- One rank's training state ---------------------------------------------------------------

struct Job {
  zcollComm_t comm = nullptr;
  int rank = 0, n = 0;
  size_t count = 0;  // shard elements
  bool even = false;  // same ranks on every node: hpZ runs
  std::vector<float> w, m;  // this rank's weight and state shards
  std::vector<float> secondary[2], gathered[2], savedState[2], stateCopy[2];  // by version % 2
  long lastGood = -1;  // the last version whose forward gather succeeded here
  // The reference: the whole vector every rank must see, and its copies by version.
  std::vector<float> refW, refM, refWAt[2], refMAt[2];
};

int wrong(const char* what, long v, size_t at) {
  std::fprintf(stderr, "wrong value: %s at step %ld, element %zu\n", what, v, at);
  return -1;
}

// The first position where `got` (covering V from `first`) differs from the reference, or -1.
long firstDifference(const std::vector<float>& got, size_t first, const std::vector<float>& ref) {
  for (size_t i = 0; i < got.size(); ++i) {
    const size_t p = first + i;
    const float want = p < kTotal ? ref[p] : 0.0f;
    if (std::memcmp(&got[i], &want, sizeof(float)) != 0) return static_cast<long>(i);
  }
  return -1;
}

// Sizes this rank's buffers for `comm` and takes its shards of the reference vectors.
int attach(Job& j, zcollComm_t comm) {
  j.comm = comm;
  zcollCommUserRank(comm, &j.rank);
  zcollCommCount(comm, &j.n);
  j.count = (kTotal + j.n - 1) / j.n;
  j.count = (j.count + 255) / 256 * 256;  // whole quantization blocks per shard
  int local = 0, lo = 0, hi = 0;
  zcollCommLocalSize(comm, &local);
  if (zcollAllReduce(&local, &lo, 1, zcollInt32, zcollMin, comm, nullptr) != zcollSuccess ||
      zcollAllReduce(&local, &hi, 1, zcollInt32, zcollMax, comm, nullptr) != zcollSuccess)
    return 4;
  j.even = lo == hi;
  size_t secondaryCount = 0, copyCount = 0;
  zcollSecondaryShardCount(comm, j.count, &secondaryCount);
  zcollBuddyCopyCount(comm, j.count, &copyCount);
  for (int k = 0; k < 2; ++k) {
    j.secondary[k].assign(secondaryCount, 0.0f);
    j.gathered[k].assign(j.count * j.n, 0.0f);
    j.stateCopy[k].assign(copyCount, 0.0f);
  }
  j.w.resize(j.count);
  j.m.resize(j.count);
  for (size_t i = 0; i < j.count; ++i) {
    const size_t p = j.rank * j.count + i;
    j.w[i] = p < kTotal ? j.refW[p] : 0.0f;
    j.m[i] = p < kTotal ? j.refM[p] : 0.0f;
  }
  return 0;
}

// The reference's step v over the whole vector, with the gradient of an n-rank comm.
void referenceStep(Job& j, long v) {
  const int s = factorSum(j.n);
  for (size_t p = 0; p < kTotal; ++p) {
    const float g = static_cast<float>(s * direction(v, j.refW[p], p));
    j.refW[p] = updatedWeight(j.refW[p], g, p);
    j.refM[p] = updatedState(j.refM[p], g);
  }
}

// The forward or backward gather of version v into `out`.
zcollResult_t gather(Job& j, long v, bool forward, std::vector<float>* out) {
  zcollQuantConfig_t int8 = ZCOLL_QUANT_CONFIG_INITIALIZER;
  int8.bits = 8;
  std::vector<float>& sec = j.secondary[v % 2];
  if (!j.even)
    return zcollQuantizedAllGather(j.w.data(), out->data(), j.count, zcollFloat32, &int8, j.comm,
                                   nullptr);
  if (forward)
    return zcollAllGatherHier(j.w.data(), out->data(), sec.data(), j.count, zcollFloat32, &int8,
                              j.comm, nullptr);
  return zcollAllGatherFromSecondary(sec.data(), out->data(), j.count, zcollFloat32, j.comm,
                                     nullptr);
}

// Step v: 0, the failing call's result, or -1 for a wrong value.
int step(Job& j, long v) {
  const int k = v % 2;
  j.refWAt[k] = j.refW;
  j.refMAt[k] = j.refM;
  j.savedState[k] = j.m;
  zcollResult_t r = zcollBuddyCopy(j.m.data(), j.stateCopy[k].data(), j.count, zcollFloat32,
                                   j.comm, nullptr);
  if (r != zcollSuccess) return r;
  if ((r = gather(j, v, true, &j.gathered[k])) != zcollSuccess) return r;
  if (long at = firstDifference(j.gathered[k], 0, j.refW); at >= 0)
    return wrong("forward gather", v, at);
  j.lastGood = v;
  std::vector<float> backward(j.count * j.n);
  if ((r = gather(j, v, false, &backward)) != zcollSuccess) return r;
  if (long at = firstDifference(backward, 0, j.refW); at >= 0)
    return wrong("backward gather", v, at);
  std::vector<float> grads(j.count * j.n, 0.0f), mine(j.count);
  for (size_t p = 0; p < kTotal; ++p)
    grads[p] = static_cast<float>(factor(j.rank) * direction(v, backward[p], p));
  r = zcollQuantizedReduceScatter(grads.data(), mine.data(), j.count, zcollFloat32, zcollSum,
                                  nullptr, j.comm, nullptr);
  if (r != zcollSuccess) return r;
  const int s = factorSum(j.n);
  for (size_t i = 0; i < j.count; ++i) {
    const size_t p = j.rank * j.count + i;
    const float want = p < kTotal ? static_cast<float>(s * direction(v, j.refW[p], p)) : 0.0f;
    if (mine[i] != want) return wrong("reduce-scatter", v, p);
    if (p >= kTotal) continue;
    j.w[i] = updatedWeight(j.w[i], mine[i], p);
    j.m[i] = updatedState(j.m[i], mine[i]);
  }
  referenceStep(j, v);
  if (long at = firstDifference(j.w, j.rank * j.count, j.refW); at >= 0)
    return wrong("updated weights", v, at);
  return 0;
}

int fail(const char* what, zcollResult_t r, zcollComm_t comm, int code) {
  std::fprintf(stderr, "%s: %s: %s\n", what, zcollGetErrorString(r), zcollGetLastError(comm));
  return code;
}

// Gathers `mine` (newCount per rank) over `comm` and compares it with `expected` bit for bit.
bool gatheredEquals(zcollComm_t comm, int n, const std::vector<float>& mine,
                    const std::vector<float>& expected) {
  std::vector<float> all(mine.size() * n);
  if (zcollAllGather(mine.data(), all.data(), mine.size(), zcollFloat32, comm, nullptr) !=
      zcollSuccess)
    return false;
  return firstDifference(all, 0, expected) < 0;
}

struct Recovery {
  int64_t failedNs = 0;
  double shrinkMs = 0, rebuildMs = 0;
  long version = -1;
};

// After a failed step: shrink without the victim, agree on the version, rebuild weights and
// state over the new world, check them, and move the job onto the new comm.
int recover(Job& j, int victim, Recovery* out) {
  out->failedNs = wallNs();
  const auto shrinkAt = Clock::now();
  zcollComm_t shrunk = nullptr;
  zcollResult_t r = zcollCommShrink(j.comm, &victim, 1, &shrunk, nullptr, ZCOLL_SHRINK_ABORT);
  out->shrinkMs = msSince(shrinkAt);
  if (r != zcollSuccess) return fail("zcollCommShrink", r, j.comm, 4);
  int64_t mine = j.lastGood, agreed = -1;
  r = zcollAllReduce(&mine, &agreed, 1, zcollInt64, zcollMin, shrunk, nullptr);
  if (r != zcollSuccess) return fail("agreeing on the version", r, shrunk, 4);
  out->version = agreed;
  const int k = agreed % 2;
  int newN = 0;
  zcollCommCount(shrunk, &newN);
  size_t newCount = (kTotal + newN - 1) / newN;
  newCount = (newCount + 255) / 256 * 256;
  std::vector<float> w2(newCount), m2(newCount);
  const auto rebuildAt = Clock::now();
  r = zcollRebuildFromSecondary(nullptr, j.secondary[k].data(), j.count, w2.data(), newCount,
                                kTotal, zcollFloat32, j.comm, shrunk, nullptr);
  if (r == zcollSuccess)
    r = zcollRebuildFromBuddy(j.savedState[k].data(), j.stateCopy[k].data(), j.count, m2.data(),
                              newCount, kTotal, zcollFloat32, j.comm, shrunk, nullptr);
  out->rebuildMs = msSince(rebuildAt);
  if (r != zcollSuccess) return fail("the rebuild", r, shrunk, 4);
  // Bit-identical to the copy taken before the kill: this rank's gathered vector of that
  // version, and the reference state of that version.
  if (!gatheredEquals(shrunk, newN, w2, j.gathered[k]) ||
      !gatheredEquals(shrunk, newN, w2, j.refWAt[k]) ||
      !gatheredEquals(shrunk, newN, m2, j.refMAt[k])) {
    wrong("the rebuilt weights or state", agreed, 0);
    return 5;
  }
  zcollCommDestroy(j.comm);
  j.refW = j.refWAt[k];
  j.refM = j.refMAt[k];
  if (int a = attach(j, shrunk); a != 0) return a;
  j.w = w2;  // the rebuilt shards, the same as attach took from the reference (checked above)
  j.m = m2;
  j.lastGood = agreed - 1;
  return 0;
}

void killSelfIn(int ms) {
  std::thread([ms] {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    std::printf("killed at %lld\n", static_cast<long long>(wallNs()));
    std::fflush(stdout);
    raise(SIGKILL);
  }).detach();
}

std::string joined(const std::vector<double>& xs, const char* fmt) {
  std::string s;
  char buf[64];
  for (size_t i = 0; i < xs.size(); ++i) {
    std::snprintf(buf, sizeof(buf), fmt, xs[i]);
    s += (i ? "," : "") + std::string(buf);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: %s VICTIM KILL_MS STEPS_AFTER [TOTAL]\n", argv[0]);
    return 2;
  }
  if (argc == 5) kTotal = std::strtoull(argv[4], nullptr, 10);
  const int victim = std::atoi(argv[1]), killMs = std::atoi(argv[2]);
  const long stepsAfter = std::atol(argv[3]);
  zcollComm_t comm = nullptr;
  zcollResult_t r = zcollCommInitFromEnv(&comm, nullptr);
  if (r != zcollSuccess) return fail("init", r, nullptr, 4);
  Job j;
  j.refW.resize(kTotal);
  j.refM.resize(kTotal);
  for (size_t p = 0; p < kTotal; ++p) {
    j.refW[p] = initialWeight(p);
    j.refM[p] = initialState(p);
  }
  if (int a = attach(j, comm); a != 0) return a;
  long v = 0;
  int res = 0;
  for (; v < kMaxSteps && (res = step(j, v)) == 0; ++v)
    if (v == 0 && j.rank == victim) killSelfIn(killMs);
  if (res < 0) return 5;
  if (res == 0) return fail("the victim never died", zcollInternalError, j.comm, 6);
  if (res != zcollRemoteError)
    return fail("the step with a dead rank", static_cast<zcollResult_t>(res), j.comm, 3);
  const long failedStep = v;
  Recovery rec;
  if (int a = recover(j, victim, &rec); a != 0) return a;
  for (v = rec.version; v < rec.version + stepsAfter; ++v) {
    res = step(j, v);
    if (res < 0) return 5;
    if (res != 0)
      return fail("a step after the recovery", static_cast<zcollResult_t>(res), j.comm, 4);
  }
  double mineTimes[3] = {static_cast<double>(rec.failedNs), rec.shrinkMs, rec.rebuildMs};
  std::vector<double> all(3 * j.n);
  r = zcollAllGather(mineTimes, all.data(), 3, zcollFloat64, j.comm, nullptr);
  if (r != zcollSuccess) return fail("gathering the timings", r, j.comm, 4);
  if (j.rank == 0) {
    std::vector<double> failed, shrink, rebuild;
    for (int q = 0; q < j.n; ++q) {
      failed.push_back(all[3 * q]);
      shrink.push_back(all[3 * q + 1]);
      rebuild.push_back(all[3 * q + 2]);
    }
    std::printf("recovered: failed at %s shrink_ms %s rebuild_ms %s version %ld (step %ld) "
                "ranks %d steps %ld..%ld exact, weights and state bit-identical\n",
                joined(failed, "%.0f").c_str(), joined(shrink, "%.1f").c_str(),
                joined(rebuild, "%.1f").c_str(), rec.version, failedStep, j.n, rec.version,
                rec.version + stepsAfter - 1);
  }
  zcollCommDestroy(j.comm);
  return 0;
}
