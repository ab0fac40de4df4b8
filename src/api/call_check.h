// Mismatched-call detection. With ZCOLL_CHECK_CALLS=on every collective first exchanges a small
// descriptor of the call (kind, count, dtype, op, root, quantization settings, call number) among
// all ranks (one direct all-gather of 48 bytes), so a call whose arguments differ between ranks
// fails on EVERY rank with zcollInvalidUsage naming the first differing field and rank, before
// any data moves, instead of one side failing and the other returning a stale buffer.
#pragma once

#include <cstdint>

#include "coll/collectives.h"
#include "core/comm.h"
#include "exec/executor.h"
#include "quant/quant.h"

namespace zcoll {

struct CallDescriptor {
  uint32_t kind = 0;  // the collective's callCheckId (coll/collectives.h), | kDeviceBuffers for a call on device buffers
  int32_t dtype = -1;
  uint64_t count = 0;
  int32_t op = -1;    // -1: the call has no reduction
  int32_t root = -1;  // -1: the call has no root
  uint64_t quant = 0;  // packed bits, intra bits, block size, mode, rounding, depth (0: none)
  uint64_t seed = 0;
  uint64_t callNumber = 0;  // collectives this rank called on the comm before this one
};
constexpr uint32_t kDeviceBuffers = 1u << 16;
static_assert(sizeof(CallDescriptor) == 48, "descriptor layout is part of the wire protocol");

CallDescriptor describeCall(CollKind kind, zcollDataType_t dtype, size_t count, int op = -1,
                            int root = -1);
// zcollBarrier's descriptor (it runs no registry algorithm: kBarrierCallCheckId).
CallDescriptor describeBarrier();
// Adds the settings of a quantized call (intra bits and depth where the collective has them).
void addQuantSettings(CallDescriptor* d, const quant::QuantParams& inter, int intraBits,
                      int pipelineDepth);

// With the check on (comm->checkCalls), exchanges `d` with every rank and fails with
// zcollInvalidUsage when any rank's descriptor differs: "zcollAllGather: mismatched call across
// ranks, count: rank 1 has 200, rank 0 100"; a quantization setting is named with both values
// ("quantization settings (bits): rank 1 has 4, rank 0 8"). Always counts the call. `fn` names
// the public function.
// `exec` gives the kind of the call's buffers, which must match too (host or device).
Result checkCallMatches(zcollComm* comm, CallDescriptor d, const Executor& exec, const char* fn);

}  // namespace zcoll
