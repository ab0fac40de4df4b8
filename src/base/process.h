// Processes of this machine: whether one is still alive (how a rank learns that a peer on its
// node died without a word: shared memory has no connection to break), and which one this is.
#pragma once

#include <cstdint>

namespace zcoll {

// A random 64-bit number naming this process, the same for all its threads and new in a forked
// child. Unlike a pid it tells two processes apart across pid namespaces (containers on one
// node can run peers with equal pids), so memory a handle names is taken as this process's own
// only when the handle carries this token (cuda_ipc).
uint64_t processToken();

// Whether process `pid` (on this machine) is gone, or a zombie nobody reaped yet (kill()
// still succeeds on those).
bool processGone(int pid);

}  // namespace zcoll
