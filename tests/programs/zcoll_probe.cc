// A rank program for process-level tests (tests/process_test.cc). Links the public library
// only. Initializes from the environment, then acts out a scenario:
//   zcoll_probe ok              all-reduce and qgZ a few times, check the results, exit 0
//   zcoll_probe die RANK        RANK kills itself (SIGKILL) mid-way; the others must get
//                               zcollRemoteError (exit 3) and never hang
//   zcoll_probe destroy RANK    RANK destroys its comm mid-way and stays alive 5 s; the
//                               others must get zcollRemoteError (exit 3) at once
//   zcoll_probe exit RANK       RANK destroys its comm mid-way and exits 0 at once
//   zcoll_probe abort RANK      RANK aborts its comm mid-way and stays alive 5 s
//   zcoll_probe info            print "rank R size S nodes N node K local L/LS" and exit 0
// Exit codes: 0 ok, 2 usage, 3 zcollRemoteError, 4 zcollTimeout, 5 other error, 6 wrong data.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "zcoll/zcoll.h"

namespace {

int exitCodeFor(zcollResult_t r) {
  if (r == zcollRemoteError) return 3;
  if (r == zcollTimeout) return 4;
  return 5;
}

int report(const char* what, zcollResult_t r, zcollComm_t comm) {
  std::fprintf(stderr, "probe: %s: %s | %s\n", what, zcollGetErrorString(r),
               zcollGetLastError(comm));
  return exitCodeFor(r);
}

enum class Leave { kKill, kDestroy, kExit, kAbort };

// How `rank` leaves mid-way; returns the exit code, or -1 for the kill (never returns).
int leave(zcollComm_t comm, Leave how) {
  if (how == Leave::kKill) raise(SIGKILL);
  zcollResult_t r = how == Leave::kAbort ? zcollCommAbort(comm) : zcollCommDestroy(comm);
  if (r != zcollSuccess) return 5;
  if (how != Leave::kExit) sleep(5);
  std::fflush(stderr);
  _exit(0);
}

// All-reduce of every rank's rank+1: each element must be the exact sum.
int allReduceOnce(zcollComm_t comm, int rank, int nranks, int iter) {
  std::vector<float> buf(1 << 16, float(rank + 1));
  zcollResult_t r = zcollAllReduce(buf.data(), buf.data(), buf.size(), zcollFloat32, zcollSum,
                                   comm, nullptr);
  if (r != zcollSuccess) return report("all-reduce", r, comm);
  const float want = float(nranks * (nranks + 1) / 2);
  for (size_t i = 0; i < buf.size(); ++i) {
    if (buf[i] == want) continue;
    std::fprintf(stderr, "probe: all-reduce %d returned success but element %zu is %g, not %g\n",
                 iter, i, double(buf[i]), double(want));
    return 6;
  }
  return 0;
}

// qgZ of every rank's rank+1 (over shm its intra-node hop reads the peers' windows in place):
// each element within INT4's bound of the sum (docs/ZEROPP.md: F = 0.148 on both hops).
int quantizedReduceScatterOnce(zcollComm_t comm, int rank, int nranks, int iter) {
  const size_t count = 1 << 15;
  std::vector<float> in(count * nranks, float(rank + 1)), out(count);
  zcollResult_t r = zcollQuantizedReduceScatter(in.data(), out.data(), count, zcollFloat32,
                                                zcollSum, nullptr, comm, nullptr);
  if (r != zcollSuccess) return report("quantized reduce-scatter", r, comm);
  const double want = nranks * (nranks + 1) / 2.0;
  for (size_t i = 0; i < count; ++i) {
    if (out[i] >= 0.85 * want && out[i] <= 1.15 * want) continue;
    std::fprintf(stderr, "probe: qgZ %d returned success but element %zu is %g, not about %g\n",
                 iter, i, double(out[i]), want);
    return 6;
  }
  return 0;
}

int collectivesLoop(zcollComm_t comm, int rank, int nranks, int dieRank, Leave how) {
  for (int iter = 0; iter < 50; ++iter) {
    if (rank == dieRank && iter == 5) return leave(comm, how);
    int code = allReduceOnce(comm, rank, nranks, iter);
    if (code == 0) code = quantizedReduceScatterOnce(comm, rank, nranks, iter);
    if (code != 0) return code;
  }
  return 0;
}

int printInfo(zcollComm_t comm) {
  int rank, size, nodes, node, local, localSize;
  zcollCommUserRank(comm, &rank);
  zcollCommCount(comm, &size);
  zcollCommNodeCount(comm, &nodes);
  zcollCommNodeRank(comm, &node);
  zcollCommLocalRank(comm, &local);
  zcollCommLocalSize(comm, &localSize);
  std::printf("rank %d size %d nodes %d node %d local %d/%d\n", rank, size, nodes, node, local,
              localSize);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s ok|die RANK|destroy RANK|exit RANK|abort RANK|info\n", argv[0]);
    return 2;
  }
  zcollComm_t comm = nullptr;
  zcollResult_t r = zcollCommInitFromEnv(&comm, nullptr);
  if (r != zcollSuccess) return report("init", r, nullptr);
  int rank = 0, nranks = 0;
  zcollCommUserRank(comm, &rank);
  zcollCommCount(comm, &nranks);
  int code = 2;
  const char* mode = argv[1];
  int victim = argc > 2 ? std::atoi(argv[2]) : -1;
  if (std::strcmp(mode, "ok") == 0) code = collectivesLoop(comm, rank, nranks, -1, Leave::kKill);
  else if (std::strcmp(mode, "die") == 0 && argc > 2)
    code = collectivesLoop(comm, rank, nranks, victim, Leave::kKill);
  else if (std::strcmp(mode, "destroy") == 0 && argc > 2)
    code = collectivesLoop(comm, rank, nranks, victim, Leave::kDestroy);
  else if (std::strcmp(mode, "exit") == 0 && argc > 2)
    code = collectivesLoop(comm, rank, nranks, victim, Leave::kExit);
  else if (std::strcmp(mode, "abort") == 0 && argc > 2)
    code = collectivesLoop(comm, rank, nranks, victim, Leave::kAbort);
  else if (std::strcmp(argv[1], "info") == 0) code = printInfo(comm);
  zcollCommDestroy(comm);
  return code;
}
