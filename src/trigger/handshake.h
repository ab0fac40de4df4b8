// The values of the stream-triggered calls' flags (trigger/ring.h, trigger/proxy.h): handshakes
// whose values never change, so a call captured into a CUDA graph waits for and writes the right
// ones at every launch. A flag's writer stores kFull ("filled") or kEmpty ("read"); a wait
// passes when the flag has the bit it waits for (Executor::waitBits); an abort stores kReleased,
// which has both.
#pragma once

#include <cstdint>

namespace zcoll {

constexpr uint32_t kFull = 1, kEmpty = 2, kReleased = kFull | kEmpty;

}  // namespace zcoll
