// What every C entry point does around its body: clear the thread's last error, turn any C++
// exception into a result (none crosses the C boundary), refuse a NULL, destroyed, aborted or
// broken communicator with a specific message, and record failures on the communicator for
// zcollGetLastError.
#pragma once

#include <exception>
#include <new>

#include "core/comm.h"

namespace zcoll {

constexpr uint64_t kCommMagic = 0x7a636f6c6c636f6dULL;  // "zcollcom"
constexpr uint64_t kCommDeadMagic = 0xdeadc0111dead;

void recordError(zcollComm* comm);

template <typename F>
zcollResult_t guarded(zcollComm* comm, F&& body) {
  clearThreadLastError();
  Result r;
  try {
    r = body();
  } catch (const std::bad_alloc&) {
    r = fail(zcollSystemError, "out of memory");
  } catch (const std::exception& e) {
    r = fail(zcollInternalError, "unexpected exception: %s", e.what());
  } catch (...) {
    r = fail(zcollInternalError, "unexpected exception");
  }
  if (r != zcollSuccess && comm != nullptr) recordError(comm);
  return r;
}

// Checks `comm` can be used; returns the reason it cannot.
Result checkCommUsable(zcollComm* comm, const char* fn);

// A call that communicates on `comm`: counted as active so zcollCommAbort can wait for it.
template <typename F>
zcollResult_t commCall(zcollComm* comm, const char* fn, F&& body) {
  if (comm == nullptr || comm->magic != kCommMagic)
    return guarded(nullptr, [&] { return checkCommUsable(comm, fn); });
  comm->activeCalls.fetch_add(1);
  zcollResult_t r = guarded(comm, [&]() -> Result {
    ZCOLL_CHECK(checkCommUsable(comm, fn));
    return body();
  });
  comm->activeCalls.fetch_sub(1);
  return r;
}

}  // namespace zcoll
