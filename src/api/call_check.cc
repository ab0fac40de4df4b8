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

// One field of CallDescriptor::quant (the packing of addQuantSettings), with its public name.
struct QuantField {
  const char* name;  // as in zcollQuantConfig_t
  int shift;
  uint64_t mask;
  const char* const* valueNames;  // nullptr: the number itself
};

const char* const kModeNames[] = {"symmetric", "asymmetric"};
const char* const kRoundingNames[] = {"nearest-even", "stochastic"};
const QuantField kQuantFields[] = {
    {"bits", 0, 0xff, nullptr},        {"intraBits", 8, 0xff, nullptr},
    {"blockSize", 16, 0xffff, nullptr}, {"mode", 32, 1, kModeNames},
    {"rounding", 33, 1, kRoundingNames}, {"pipelineDepth", 40, 0xffffff, nullptr}};

std::string quantValue(const QuantField& f, uint64_t packed) {
  uint64_t v = (packed >> f.shift) & f.mask;
  return f.valueNames != nullptr ? f.valueNames[v] : std::to_string(v);
}

// The first quantization setting in which two descriptors differ, as "(NAME)" and both values
// (false when they agree). A call without quantization (packed 0) reads "none (exact)".
bool quantDifference(const CallDescriptor& mine, const CallDescriptor& theirs,
                     std::string* field, std::string* a, std::string* b) {
  if ((mine.quant == 0) != (theirs.quant == 0)) {
    *field = "quantization settings";
    *a = mine.quant == 0 ? "none (exact)" : "quantized";
    *b = theirs.quant == 0 ? "none (exact)" : "quantized";
    return true;
  }
  for (const QuantField& f : kQuantFields) {
    *a = quantValue(f, mine.quant);
    *b = quantValue(f, theirs.quant);
    if (*a != *b) {
      *field = std::string("quantization settings (") + f.name + ")";
      return true;
    }
  }
  if (mine.seed == theirs.seed) return false;
  *field = "quantization settings (seed)";
  *a = std::to_string(mine.seed);
  *b = std::to_string(theirs.seed);
  return true;
}

std::string opText(int32_t op) {
  return op < 0 ? "none" : opName(static_cast<zcollRedOp_t>(op));
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
  if (mine.op != theirs.op) return two("op", opText(mine.op), opText(theirs.op));
  if (mine.root != theirs.root)
    return two("root", std::to_string(mine.root), std::to_string(theirs.root));
  std::string field, a, b;
  if (quantDifference(mine, theirs, &field, &a, &b)) return two(field.c_str(), a, b);
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
