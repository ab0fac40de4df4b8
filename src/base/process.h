// Whether a process of this machine is still alive: how a rank learns that a peer on its node died
// without a word (shared memory has no connection to break).
#pragma once

namespace zcoll {

// Whether process `pid` (on this machine) is gone, or a zombie nobody reaped yet (kill()
// still succeeds on those).
bool processGone(int pid);

}  // namespace zcoll
