// A rank program that keeps going after a rank is SIGKILLed (tests/scripts/shrink.sh; run it by
// hand with tools/zcollrun --keep-going). Links the public library only.
//
//   zcoll_survive VICTIM KILL_STEP STEPS [SHRINK_VICTIM]
//
// Each of STEPS steps is a ZeRO-3 step's communication on exact values: an all-gather of every
// rank's weight shard and a reduce-scatter of the gradients (int32), both checked. At the start
// of step KILL_STEP, rank VICTIM kills itself (SIGKILL: no notice, no cleanup). The others see
// the step's call fail, shrink the communicator without it (zcollCommShrink with
// ZCOLL_SHRINK_ABORT), and run the step again and the rest on the new communicator, checked.
// With SHRINK_VICTIM, that rank SIGKILLs itself as its step fails, before its own shrink, so it
// dies while the others shrink: their shrink fails naming it (zcollRemoteError), and they shrink
// again excluding it.
// The first rank of the new communicator prints one line:
//   survived: error after E ms, shrink took S ms, W ranks, steps K..N-1 exact
// followed, with SHRINK_VICTIM, by " (the first shrink failed after F ms: MESSAGE)".
// Exit codes: 0 ok, 2 usage, 3 the failure was not zcollRemoteError, 4 the shrink failed, 5 a
// wrong value, 6 another error.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "zcoll/zcoll.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kShard = 4096;  // elements per rank

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// One step on `comm` (this rank `rank` of `n`): 0 when both collectives gave the exact values,
// else the failing call's result (negative: a wrong value).
int step(zcollComm_t comm, int rank, int n, int s) {
  std::vector<int32_t> shard(kShard), weights(kShard * n), grads(kShard * n), mine(kShard);
  for (size_t i = 0; i < kShard; ++i) shard[i] = static_cast<int32_t>(s * 100000 + rank * 1000 + i);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<int32_t>(s + rank + i % 7);
  zcollResult_t r = zcollAllGather(shard.data(), weights.data(), kShard, zcollInt32, comm, nullptr);
  if (r != zcollSuccess) return r;
  r = zcollReduceScatter(grads.data(), mine.data(), kShard, zcollInt32, zcollSum, comm, nullptr);
  if (r != zcollSuccess) return r;
  for (int q = 0; q < n; ++q)
    if (weights[q * kShard + 5] != static_cast<int32_t>(s * 100000 + q * 1000 + 5)) return -1;
  const size_t at = rank * kShard + 3;
  if (mine[3] != static_cast<int32_t>(n * (s + at % 7) + n * (n - 1) / 2)) return -1;
  return 0;
}

int fail(const char* what, zcollResult_t r, zcollComm_t comm, int code) {
  std::fprintf(stderr, "%s: %s: %s\n", what, zcollGetErrorString(r), zcollGetLastError(comm));
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: %s VICTIM KILL_STEP STEPS [SHRINK_VICTIM]\n", argv[0]);
    return 2;
  }
  const int victim = std::atoi(argv[1]), killStep = std::atoi(argv[2]), steps = std::atoi(argv[3]);
  const int shrinkVictim = argc == 5 ? std::atoi(argv[4]) : -1;
  zcollComm_t comm = nullptr;
  zcollResult_t r = zcollCommInitFromEnv(&comm, nullptr);
  if (r != zcollSuccess) return fail("init", r, nullptr, 6);
  int rank = 0, n = 0;
  zcollCommUserRank(comm, &rank);
  zcollCommCount(comm, &n);
  int s = 0;
  for (; s < killStep; ++s)
    if (step(comm, rank, n, s) != 0) return fail("step before the kill", zcollInternalError, comm, 5);
  if (rank == victim) raise(SIGKILL);

  const auto failedAt = Clock::now();
  const int res = step(comm, rank, n, s);
  const double errorMs = msSince(failedAt);
  if (res != zcollRemoteError)
    return res < 0 ? 5 : fail("the step with a dead rank", static_cast<zcollResult_t>(res), comm, 3);
  const auto shrinkAt = Clock::now();
  zcollComm_t shrunk = nullptr;
  // Here, as the others start their shrink, not inside its own: a rank killed while UCX creates
  // its worker (its part of the new comm) can leave a /dev/shm name (docs/FAULT_TOLERANCE.md).
  if (rank == shrinkVictim) raise(SIGKILL);
  std::vector<int> excluded{victim};
  r = zcollCommShrink(comm, excluded.data(), 1, &shrunk, nullptr, ZCOLL_SHRINK_ABORT);
  std::string firstFailure;
  if (r == zcollRemoteError && shrinkVictim >= 0) {  // it died during the shrink: again without it
    firstFailure = " (the first shrink failed after " + std::to_string(int(msSince(shrinkAt))) +
                   " ms: " + zcollGetLastError(comm) + ")";
    excluded.push_back(shrinkVictim);
    r = zcollCommShrink(comm, excluded.data(), 2, &shrunk, nullptr, ZCOLL_SHRINK_ABORT);
  }
  const double shrinkMs = msSince(shrinkAt);
  if (r != zcollSuccess) return fail("zcollCommShrink", r, comm, 4);
  zcollCommDestroy(comm);
  int newRank = 0, newN = 0;
  zcollCommUserRank(shrunk, &newRank);
  zcollCommCount(shrunk, &newN);
  for (int t = s; t < steps; ++t) {
    const int rt = step(shrunk, newRank, newN, t);
    if (rt != 0) return rt < 0 ? 5 : fail("a step after the shrink", static_cast<zcollResult_t>(rt), shrunk, 6);
  }
  if (newRank == 0)
    std::printf("survived: error after %.0f ms, shrink took %.0f ms, %d ranks, steps %d..%d "
                "exact%s\n", errorMs, shrinkMs, newN, s, steps - 1, firstFailure.c_str());
  zcollCommDestroy(shrunk);
  return 0;
}
