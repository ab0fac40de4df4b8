#include "api/call_check.h"

#include <atomic>
#include <cinttypes>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "coll/coll.h"

namespace zcoll {

namespace {

const char* kindName(uint32_t id) {
  if (id == kBarrierCallCheckId) return "zcollBarrier";
  const Collective* c = collectiveByCallCheckId(id);
  return c != nullptr ? c->apiName : "an unknown collective";
}

// The first field in which `theirs` differs from `mine`, described for both ("" if none).
std::string firstDifference(const CallDescriptor& mine, int me, const CallDescriptor& theirs,
                            int them) {
  auto two = [&](const char* field, std::string a, std::string b) {
    return std::string(field) + ": rank " + std::to_string(them) + " has " + b + ", rank " +
           std::to_string(me) + " " + a;
  };
  auto num = [](uint64_t v) { return std::to_string(v); };
  if (mine.callNumber != theirs.callNumber)
    return two("call number (a rank skipped or added a collective)", num(mine.callNumber),
               num(theirs.callNumber));
  const uint32_t collective = kDeviceBuffers - 1;
  if ((mine.kind & collective) != (theirs.kind & collective))
    return two("collective", kindName(mine.kind & collective), kindName(theirs.kind & collective));
  auto where = [](uint32_t k) {
    return std::string(k & kDeviceBuffers ? "device" : "host") + " buffers";
  };
  if (mine.kind != theirs.kind)
    return two("memory (every rank passes buffers of one kind)", where(mine.kind),
               where(theirs.kind));
  if (mine.dtype != theirs.dtype)
    return two("datatype", dtypeName(static_cast<zcollDataType_t>(mine.dtype)),
               dtypeName(static_cast<zcollDataType_t>(theirs.dtype)));
  if (mine.count != theirs.count) return two("count", num(mine.count), num(theirs.count));
  if (mine.op != theirs.op)
    return two("op", std::to_string(mine.op), std::to_string(theirs.op));
  if (mine.root != theirs.root)
    return two("root", std::to_string(mine.root), std::to_string(theirs.root));
  if (mine.quant != theirs.quant || mine.seed != theirs.seed)
    return two("quantization settings (bits, intraBits, blockSize, mode, rounding, seed, "
               "pipelineDepth)", "another", "one");
  return "";
}

}  // namespace

CallDescriptor describeCall(CollKind kind, zcollDataType_t dtype, size_t count, int op,
                            int root) {
  CallDescriptor d;
  d.kind = collective(kind).callCheckId;
  d.dtype = static_cast<int32_t>(dtype);
  d.count = count;
  d.op = op;
  d.root = root;
  return d;
}

CallDescriptor describeBarrier() {
  CallDescriptor d = describeCall(CollKind::kAllGather, zcollUint8, 0);
  d.kind = kBarrierCallCheckId;
  return d;
}

void addQuantSettings(CallDescriptor* d, const quant::QuantParams& inter, int intraBits,
                      int pipelineDepth) {
  d->quant = uint64_t(inter.bits) | uint64_t(intraBits) << 8 | uint64_t(inter.blockSize) << 16 |
             uint64_t(inter.symmetric ? 0 : 1) << 32 | uint64_t(inter.stochastic ? 1 : 0) << 33 |
             uint64_t(pipelineDepth) << 40;
  d->seed = inter.seed;
}

namespace {

// Takes back, when it ends, the bytes counted in the comm's statistics while it lived: the
// check's exchange runs in the comm's order, so nothing else is counted meanwhile.
class UncountedBytes {
 public:
  explicit UncountedBytes(zcollComm* comm) : comm_(comm) {
    for (int p = 0; p < zcollNumPaths; ++p) {
      sent_[p] = comm->stats.sent[p].load();
      recv_[p] = comm->stats.recv[p].load();
    }
  }
  ~UncountedBytes() {
    for (int p = 0; p < zcollNumPaths; ++p) {
      takeBack(&comm_->stats.sent[p], sent_[p]);
      takeBack(&comm_->stats.recv[p], recv_[p]);
    }
  }
  UncountedBytes(const UncountedBytes&) = delete;
  UncountedBytes& operator=(const UncountedBytes&) = delete;

 private:
  // (A zcollCommResetStats from another thread meanwhile leaves less than before: keep it.)
  static void takeBack(std::atomic<uint64_t>* counter, uint64_t before) {
    uint64_t now = counter->load();
    if (now >= before) counter->fetch_sub(now - before);
  }

  zcollComm* comm_;
  uint64_t sent_[zcollNumPaths];
  uint64_t recv_[zcollNumPaths];
};

}  // namespace

Result checkCallMatches(zcollComm* comm, CallDescriptor d, const Executor& exec, const char* fn) {
  d.callNumber = comm->callNumber++;
  if (exec.memKind() != MemKind::kHost) d.kind |= kDeviceBuffers;
  if (!comm->checkCalls || comm->nranks == 1) return zcollSuccess;
  const int w = comm->nranks;
  std::vector<CallDescriptor> all(w);
  std::vector<size_t> off(w + 1);
  for (int i = 0; i <= w; ++i) off[i] = i * sizeof(CallDescriptor);
  Stage st(comm, hostExecutor());  // the descriptors are host memory
  {
    UncountedBytes uncounted(comm);  // the check's bytes are not the call's (zcollCommGetStats)
    ZCOLL_CHECK(directAllGatherv(st, worldGroup(comm), all.data(), off.data(), &d));
  }
  // Every rank compares every rank against rank 0, so all report the same first difference.
  for (int r = 1; r < w; ++r) {
    std::string diff = firstDifference(all[0], 0, all[r], r);
    if (!diff.empty())
      return fail(zcollInvalidUsage, "%s: mismatched call across ranks, %s", fn, diff.c_str());
  }
  return zcollSuccess;
}

}  // namespace zcoll
