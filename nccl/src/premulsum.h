// ncclRedOpCreatePreMulSum / ncclRedOpDestroy: an operator that multiplies each rank's input by
// that rank's scalar, then sums. zcoll serves it by scaling the input into scratch with
// zcollScale (the product rounded once in the data type; host and device give the same bits)
// and running the collective with Sum on it: host scratch for host buffers, device scratch
// (zcollMemAllocAsync) for device buffers, in the call's stream order. The scratch is given back
// after the collective is issued (at the outermost ncclGroupEnd for a call inside a group, which
// zcoll runs there).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <vector>

#include "zcoll/zcoll.h"

namespace zcoll_nccl {

// A call's reduction, resolved: zcoll's op, and for PreMulSum the scalar.
struct ResolvedOp {
  zcollRedOp_t op = zcollSum;
  bool preMul = false;
  unsigned char scalarBytes[8] = {};
  const void* deviceScalar = nullptr;
};

// Resolves `op` for a call on `comm` with `type` (ncclInvalidArgument naming `call` for an op
// that is neither built in nor a live PreMulSum of this comm and type).
ncclResult_t resolveOp(ncclComm_t comm, ncclRedOp_t op, ncclDataType_t type, const char* call,
                       ResolvedOp* out);

// A reducing collective's input: the send buffer, or for a PreMulSum its scaled copy in scratch
// of the buffer's kind, released (deferred to the outermost ncclGroupEnd inside a group) when
// this goes, which is after the collective was issued.
class PreMultiplied {
 public:
  PreMultiplied(ncclComm_t comm, cudaStream_t stream) : comm_(comm), stream_(stream) {}
  ~PreMultiplied();
  PreMultiplied(const PreMultiplied&) = delete;
  PreMultiplied& operator=(const PreMultiplied&) = delete;

  // Scales `count` elements of `src` by op's scalar into scratch when op is a PreMulSum; in().
  ncclResult_t prepare(const ResolvedOp& op, const void* src, size_t count, ncclDataType_t type,
                       const char* call);
  const void* in() const { return in_; }

 private:
  ncclResult_t onHost(const ResolvedOp& op, const void* src, size_t count, ncclDataType_t type,
                      const char* call);
  ncclResult_t onDevice(const ResolvedOp& op, const void* src, size_t count, ncclDataType_t type,
                        const char* call);

  ncclComm_t comm_;
  cudaStream_t stream_;
  const void* in_ = nullptr;
  std::vector<unsigned char> hostScratch_;
  void* deviceScratch_ = nullptr;
};

}  // namespace zcoll_nccl
