// The NCCL communicator handle of libzcoll_nccl.so: a zcoll communicator and what NCCL's API
// keeps beside it (its init state for non-blocking init, PreMulSum operators, hpZ secondaries,
// the fallback NCCL's communicator).
#pragma once

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "zcoll/zcoll.h"

struct ncclComm {
  static constexpr uint32_t kMagic = 0x7a6e636cu;  // "zncl"
  uint32_t magic = kMagic;
  zcollComm_t z = nullptr;
  // ncclInProgress while a non-blocking (or grouped) init runs on initThread; then its result.
  std::atomic<int> initState{ncclInProgress};
  std::thread initThread;
  std::mutex initMutex;  // joins initThread once
  std::string initError;
  std::mutex mutex;  // guards what follows
  // PreMulSum operators: op ncclNumOps + i is ops[i]: the scalar's bytes (one element of the
  // datatype) read at creation, or where it lives in device memory (ncclScalarDevice with device
  // support: read when each call runs).
  struct PreMulOp {
    unsigned char scalarBytes[8];
    const void* deviceScalar;
    ncclDataType_t datatype;
    bool live;
  };
  std::vector<PreMulOp> preMulOps;
  // hpZ secondaries zcoll keeps, per (output buffer, sendcount, datatype): host memory.
  std::map<std::tuple<const void*, size_t, int>, std::vector<unsigned char>> secondaries;
  // The fallback NCCL's communicator (ZCOLL_NCCL_FALLBACK), or NULL.
  void* fallbackComm = nullptr;
  std::string fallbackError;  // why there is none, when the fallback is configured
  bool suspended = false;  // between ncclCommSuspend and ncclCommResume
  std::map<void*, void*> windowBuffers;  // zcoll window -> the user's buffer
  int nranks = 0;
  int rank = -1;
};

namespace zcoll_nccl {

// Registers a handle as live / forgets it; liveComm() says whether one is.
void addLiveComm(ncclComm_t comm);
void removeLiveComm(ncclComm_t comm);
bool liveComm(ncclComm_t comm);

// The comm's init result, waiting for a non-blocking init to finish. ncclInvalidArgument with a
// last-error text naming `call` for a NULL or dead handle.
ncclResult_t readyComm(ncclComm_t comm, const char* call);

// Builds the zcoll side of `comm` (zcoll init, fallback communicator), blocking.
ncclResult_t initComm(ncclComm_t comm, int nranks, const ncclUniqueId& id, int rank,
                      const char* commName);

// An NCCL handle over an existing zcoll communicator, which it then owns (ncclCommDestroy
// destroys it): the children of split, shrink and grow, and tests that make zcoll comms first.
ncclComm_t adoptComm(zcollComm_t z);

// Frees a handle never given to the caller (its init failed in the call that made it).
void freeComm(ncclComm_t comm);

// Retires a handle the caller had, once its zcoll comm is destroyed or aborted: what it holds is
// freed, the struct itself is kept (a few hundred bytes per communicator), because
// ncclCommAbort may run while another thread is still inside a call on it (torch's watchdog
// does that): that call may read the handle until it returns. A retired handle is not live, so
// later calls on it fail with ncclInvalidArgument.
void retireComm(ncclComm_t comm);

}  // namespace zcoll_nccl
