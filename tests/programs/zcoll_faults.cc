// A rank program that injects one fault for the flight recorder and status tests
// (tests/scripts/status.sh). Links the public library only. Every rank makes 3 all-reduces of
// 1000 floats, then the 4th call is where rank FAULTY misbehaves:
//   zcoll_faults skip FAULTY    FAULTY skips the 4th all-reduce and calls a barrier instead
//   zcoll_faults sleep FAULTY   FAULTY sleeps 60 s before the 4th all-reduce
//   zcoll_faults count FAULTY   FAULTY passes 100000 elements to the 4th all-reduce (another
//                               algorithm than the others' 1000: nothing matches, all wait)
// The other ranks block in it until ZCOLL_TIMEOUT, then exit 4 (timeout) or 3 (a peer failed).
// Exit codes: 0 ok, 2 usage, 3 zcollRemoteError, 4 zcollTimeout, 5 other error.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "zcoll/zcoll.h"

namespace {

int exitCodeFor(zcollResult_t r) {
  if (r == zcollSuccess) return 0;
  if (r == zcollRemoteError) return 3;
  if (r == zcollTimeout) return 4;
  return 5;
}

zcollResult_t allReduce(zcollComm_t comm, size_t count) {
  std::vector<float> buf(count, 1.0f);
  return zcollAllReduce(buf.data(), buf.data(), count, zcollFloat32, zcollSum, comm, nullptr);
}

// Sleeps the whole time even when a signal (a dump request) interrupts the sleep.
void sleepFor(int seconds) {
  const time_t end = time(nullptr) + seconds;
  while (time(nullptr) < end) sleep(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "skip") != 0 && std::strcmp(argv[1], "sleep") != 0 &&
                    std::strcmp(argv[1], "count") != 0)) {
    std::fprintf(stderr, "usage: %s skip|sleep|count FAULTY_RANK\n", argv[0]);
    return 2;
  }
  const int faulty = std::atoi(argv[2]);
  zcollComm_t comm = nullptr;
  zcollResult_t r = zcollCommInitFromEnv(&comm, nullptr);
  if (r != zcollSuccess) {
    std::fprintf(stderr, "init: %s\n", zcollGetLastError(nullptr));
    return exitCodeFor(r);
  }
  int rank = 0;
  zcollCommUserRank(comm, &rank);
  for (int i = 0; i < 3 && r == zcollSuccess; ++i) r = allReduce(comm, 1000);
  if (r == zcollSuccess) {
    const bool me = rank == faulty;
    if (me && std::strcmp(argv[1], "skip") == 0) {
      // The others start waiting first, so their timeouts (and dumps) come before this rank's
      // barrier times out and tells them it failed (under TSan it once came first).
      sleepFor(2);
      r = zcollBarrier(comm, nullptr);
    } else if (me && std::strcmp(argv[1], "sleep") == 0) {
      sleepFor(60);
      r = allReduce(comm, 1000);
    } else {
      r = allReduce(comm, me && std::strcmp(argv[1], "count") == 0 ? 100000 : 1000);
    }
  }
  if (r != zcollSuccess) std::fprintf(stderr, "rank %d: %s\n", rank, zcollGetLastError(comm));
  std::fflush(stderr);
  // Leaves without destroying a broken comm's peers' notion of it: the test reads the dumps.
  if (r == zcollSuccess) zcollCommDestroy(comm);
  return exitCodeFor(r);
}
