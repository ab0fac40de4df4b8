// What every part of zcoll's torch backend shares: zcoll errors as DistBackendError (argument
// errors as ValueError / TypeError, which fault-tolerance code does not take for a failed
// backend), dtype and reduction mapping, tensor checks, and releasing the GIL where a thread
// may wait.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/utils/pybind.h>

#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "zcoll/zcoll.h"

// The extension's own types stay inside it (as pybind11's are): no visibility warnings.
#define ZCOLL_TORCH_HIDDEN __attribute__((visibility("hidden")))

namespace zcoll_torch ZCOLL_TORCH_HIDDEN {

// zcoll's message about the call that failed: the communicator's, else the calling thread's
// (where calls without a communicator, zcollCommInit* and zcollGetUniqueId included, leave it).
std::string lastError(zcollComm_t comm);

// "zcoll <what> failed: <result> (<code>): <message>" as a DistBackendError, or as a ValueError
// for zcollInvalidArgument (an argument the caller can fix; the group stays usable).
std::exception_ptr zcollError(zcollResult_t rc, zcollComm_t comm, const char* what);
[[noreturn]] void throwZcoll(zcollResult_t rc, zcollComm_t comm, const char* what);
inline void check(zcollResult_t rc, zcollComm_t comm, const char* what) {
  if (rc != zcollSuccess) throwZcoll(rc, comm, what);
}

// torch's name of a dtype, as Python prints it: "torch.int32", "torch.bfloat16".
std::string dtypeName(at::ScalarType t);
// torch's name of a reduction: "ReduceOp.MAX".
std::string reduceOpName(const c10d::ReduceOp& op);

// zcoll's type of t; TypeError (naming torch's dtypes) for one zcoll does not carry.
zcollDataType_t toZcollType(const at::Tensor& t);
// TypeError unless t is a type the quantized collectives take (float32, float16, bfloat16).
void checkQuantizable(const at::Tensor& t, const char* what);

// A torch reduction as zcoll runs it: zcoll's op, and for PREMUL_SUM (FSDP2's gradient divide
// factor) the factor each rank's input is multiplied by before the sum, as NCCL and gloo do.
struct Reduction {
  zcollRedOp_t op = zcollSum;
  std::optional<double> factor;
  at::Tensor tensorFactor;  // PREMUL_SUM given a one-element tensor
  bool scales() const { return factor.has_value() || tensorFactor.defined(); }
  // factor * t as a new tensor of t's dtype and device (t itself without a factor).
  at::Tensor scaled(const at::Tensor& t) const;
};
Reduction toReduction(const c10d::ReduceOp& op, const at::Tensor& t);

bool zcollTakesDeviceBuffers();
void checkTensor(const at::Tensor& t);
// The one device of an operation's tensors (CPU when it has none, like a barrier).
c10::Device deviceOf(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b);

// Whether ZCOLL_TIMEOUT is set: zcoll's own setting then governs every wait (python/README.md).
bool zcollTimeoutFromEnv();

// ZCOLL_TORCH_ASYNC_ERROR_HANDLING: 0 (unset or empty), 1, 2 or 3 (python/README.md, "Failures
// and the watchdog"); a ValueError naming the variable for anything else.
int asyncErrorHandlingFromEnv();

// Whether zcoll's device calls on CUDA return complete: ZCOLL_DEVICE_CALLS unset, auto or sync
// (zcoll.h: auto is sync on CUDA until queued calls have passed the GPU kit); async queues.
bool deviceCallsReturnCompleteFromEnv();

// Releases the GIL for its scope if this thread holds it (torch's bindings often released it
// already). Every wait that zcoll's progress thread may have to end goes without the GIL: a
// completion callback there may need it (to drop the last reference of a Python-owned tensor,
// or to run a Python future callback).
class MaybeReleaseGil {
 public:
  MaybeReleaseGil() {
    if (Py_IsInitialized() && PyGILState_Check()) release_.emplace();
  }

 private:
  std::optional<pybind11::gil_scoped_release> release_;
};

}  // namespace zcoll_torch
