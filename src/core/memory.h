// Where a buffer lives. Host buffers run on the caller's thread; device buffers (CUDA) need
// the device path, which is not implemented yet.
#pragma once

namespace zcoll {

enum class MemKind { kHost, kDevice };

// kHost when built without CUDA, when no GPU is present, or for memory CUDA does not know.
MemKind memoryKind(const void* ptr);

}  // namespace zcoll
