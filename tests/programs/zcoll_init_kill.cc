// A rank SIGKILLed while the job initializes (tests/scripts/init_kill.sh; run it by hand with
// tools/zcollrun --keep-going). Links the public library only.
//
//   zcoll_init_kill VICTIM KILL_MS LATE_MS
//
// Rank VICTIM starts zcollCommInitFromEnv at once and SIGKILLs itself KILL_MS after the program
// started (no notice, no cleanup), or with KILL_MS -1 as soon as its init returns; rank 0 (which
// serves the rendezvous) also starts at once, the other ranks LATE_MS after the program started.
// With KILL_MS < LATE_MS the victim dies inside init, before the late ones arrive: at the
// rendezvous, or before it reached it. The others must fail (never hang) with a message that
// names the victim; each prints one line:
//   init failed after T ms: CODE: MESSAGE
// or, when init completed before the victim died (it then waits for its kill), runs an
// all-reduce:
//   first collective failed after T ms: CODE: MESSAGE
// Exit codes: 3 init failed, 4 the collective failed, 0 everything worked (the victim was not
// needed: a wrong test), 2 usage.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "zcoll/zcoll.h"

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

int report(const char* what, zcollResult_t r, Clock::time_point since, int code) {
  std::printf("%s after %.0f ms: %s: %s\n", what, msSince(since), zcollGetErrorString(r),
              zcollGetLastError(nullptr));
  std::fflush(stdout);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  const char* rankText = std::getenv("RANK");
  if (argc != 4 || rankText == nullptr) {
    std::fprintf(stderr, "usage: RANK=r %s VICTIM KILL_MS LATE_MS (under zcollrun)\n", argv[0]);
    return 2;
  }
  const int victim = std::atoi(argv[1]), killMs = std::atoi(argv[2]), lateMs = std::atoi(argv[3]);
  const int rank = std::atoi(rankText);
  if (rank == victim && killMs >= 0) {
    std::thread([killMs] {
      std::this_thread::sleep_for(std::chrono::milliseconds(killMs));
      raise(SIGKILL);
    }).detach();
  } else if (rank != victim && rank != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(lateMs));
  }
  const auto initAt = Clock::now();
  zcollComm_t comm = nullptr;
  zcollResult_t r = zcollCommInitFromEnv(&comm, nullptr);
  if (r != zcollSuccess) return report("init failed", r, initAt, 3);
  if (rank == victim && killMs < 0) raise(SIGKILL);  // as init returns
  if (rank == victim) pause();  // init was faster than KILL_MS: the others meet a dead rank
  const auto callAt = Clock::now();
  std::vector<float> x(1 << 16, 1.0f);
  r = zcollAllReduce(x.data(), x.data(), x.size(), zcollFloat32, zcollSum, comm, nullptr);
  if (r != zcollSuccess) {
    const int code = report("first collective failed", r, callAt, 4);
    std::printf("  (comm message: %s)\n", zcollGetLastError(comm));
    zcollCommDestroy(comm);
    return code;
  }
  zcollCommDestroy(comm);
  return 0;
}
