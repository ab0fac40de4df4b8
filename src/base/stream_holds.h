// The streams zcoll holds from the host, process-wide, and the device operations that must wait
// until none is held.
//
// A queued device call holds its caller's stream with a stream memory wait until the progress
// thread stores the call's word (api/launch.h). CUDA documents that allocating or freeing device
// memory or page-locked host memory synchronizes implicitly: "two commands from different
// streams cannot run concurrently if ... a page-locked host memory allocation, a device memory
// allocation ... is issued in-between them by the host thread" (programming guide, Implicit
// Synchronization), and "managing memory allocations using cudaMalloc and cudaFree causes the GPU
// to synchronize across all executing CUDA streams" (stream-ordered allocator chapter). Mapping
// and unmapping another process's memory (cudaIpcOpenMemHandle/CloseMemHandle) is treated alike.
// Issued while a stream waits for the host, such an operation puts every command issued after it
// behind that wait, among them the very work whose end releases it: a deadlock that no timeout
// or abort can break (the user's `.item()` then hangs too).
//
// So zcoll counts the stream waits it has queued and not yet released, and runs such operations
// only while that count is zero, holding new waits back while one runs. A stream-ordered
// allocation (cudaMallocAsync) is not one of them: it is ordered with the work of its stream.
// Tests: the stand-in device records any such operation issued while one of its stream memory
// waits is not yet released (tests/support/fake_device.h, FakeHardware::implicitSync).
#pragma once

#include <functional>

#include "base/result.h"

namespace zcoll::streams {

// A stream memory wait is about to be queued: one more held stream. Waits while an operation run
// by whenNoneHeld or a deferred one is under way (they are short).
void hold();
// Its word was stored: one fewer. When none is left held, runs the operations deferred meanwhile,
// on the calling thread, before returning.
void release();
// Runs `op` once no stream is held, holding new waits back while it runs; zcollTimeout (naming
// `what`) when streams are still held after `waitMs`. Never call it from work that a held stream
// waits for: it would wait out its timeout.
Result whenNoneHeld(int waitMs, const char* what, const std::function<Result()>& op);
// Runs `op` now when no stream is held (new waits held back meanwhile) and returns true; false,
// without running it, otherwise. Another such operation under way on another thread is waited
// out first (they are short and touch nothing but this process): two ranks of one process
// mapping each other's buffers at once both map, instead of one falling back.
bool ifNoneHeld(const std::function<void()>& op);
// Runs `op` now when no stream is held, else as soon as none is (in release()). Used for frees:
// they may come later, never earlier.
void deferUntilNoneHeld(std::function<void()> op);
// Stream waits queued and not yet released, process-wide.
int held();

}  // namespace zcoll::streams
