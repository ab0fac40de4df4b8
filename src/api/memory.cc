// Entry points for host memory the ranks of a node read in place (transport/host_memory.h).
#include "api/guard.h"
#include "transport/host_memory.h"

using namespace zcoll;

zcollResult_t zcollMemAllocHost(void** ptr, size_t size) {
  return guarded(nullptr, [&]() -> Result {
    if (ptr == nullptr) return fail(zcollInvalidArgument, "zcollMemAllocHost: ptr is NULL");
    *ptr = nullptr;
    if (size == 0) return fail(zcollInvalidArgument, "zcollMemAllocHost: size is 0");
    return shm::allocHostMemory(size, ptr);
  });
}

zcollResult_t zcollMemFreeHost(void* ptr) {
  return guarded(nullptr, [&]() -> Result { return shm::freeHostMemory(ptr); });
}
