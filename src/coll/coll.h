// Algorithms are written over a Group (an ordered list of comm ranks; the world, a node, a rail)
// and a Stage (one fresh tag sequence, and the call's executor for the data work). Every rank
// runs the same stages in the same order, so a hierarchical algorithm is a sequence of flat ones
// over subgroups, each in its own stage. Algorithms name data operations (st.exec(): copy,
// reduce, quantize, ...) and never the memory kind they run on (exec/executor.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "base/tags.h"
#include "coll/collectives.h"
#include "core/comm.h"
#include "core/progress.h"
#include "exec/executor.h"

namespace zcoll {

struct Group {
  std::vector<int> ranks;  // comm ranks, in group order
  int me = 0;              // this rank's index in `ranks`

  int size() const { return static_cast<int>(ranks.size()); }
  // Comm rank of group index i, taken modulo the group size (so me+1, me-1 work for rings).
  int at(int i) const {
    int n = size();
    return ranks[((i % n) + n) % n];
  }
};

// Group of all ranks of `comm`, or of the given comm ranks (which must include comm->rank).
Group worldGroup(const zcollComm* comm);
Group makeGroup(const zcollComm* comm, std::vector<int> ranks);

// Requests of one step. Capacity is fixed up front (transports keep pointers into it); any
// request still incomplete when the list dies (an error path) is cancelled, so no transport
// is left pointing at freed memory.
class RequestList {
 public:
  explicit RequestList(size_t capacity) : reqs_(capacity) {}
  ~RequestList();
  RequestList(const RequestList&) = delete;
  RequestList& operator=(const RequestList&) = delete;
  Request* next() { return &reqs_.at(used_++); }
  // Request i, for lists filled out of order (the ones before it not handed out stay unposted).
  Request* at(size_t i) {
    if (used_ <= i) used_ = i + 1;
    return &reqs_.at(i);
  }
  Request* data() { return reqs_.data(); }
  size_t size() const { return used_; }
  void clear();  // all must be complete

 private:
  std::vector<Request> reqs_;
  size_t used_ = 0;
};

class Stage {
 public:
  Stage(zcollComm* comm, Executor& exec);
  zcollComm* comm() const { return comm_; }
  Executor& exec() const { return *exec_; }

  // A local copy by the executor, counted as self-path bytes (no-op when dst == src).
  Result copy(void* dst, const void* src, size_t bytes) const;
  // Posts; the bytes are read only after the executor's work issued so far (it may be writing
  // `buf`): a fence the device transport's copies wait for, or a flush (core/progress.h). A
  // device call's bytes take the peer's device route (cuda_ipc or staged).
  Result send(int peer, const void* buf, size_t bytes, uint32_t step, Request* req) const;
  // Posts; the bytes land only after the executor's work issued so far (it may be reading
  // `buf`), as for send.
  Result recv(int peer, void* buf, size_t bytes, uint32_t step, Request* req) const;
  // A small message of the algorithm's own in host memory (a buffer's description, a token),
  // over the peer's host route whatever the call's memory kind, posted once the executor's work
  // issued so far has finished (not merely been ordered): a token sent after reading a peer's
  // memory in place then says this rank's kernels are done with it. The step must carry no
  // data message of the stage.
  Result sendControl(int peer, const void* buf, size_t bytes, uint32_t step, Request* req) const;
  Result recvControl(int peer, void* buf, size_t bytes, uint32_t step, Request* req) const;
  // Waits for the requests: the bytes are then in place, device buffers included.
  Result wait(Request* reqs, size_t n) const;
  Result wait(RequestList& l) const { return wait(l.data(), l.size()); }
  // One send and one receive, then wait for both (the ring step).
  Result exchange(int sendPeer, const void* sbuf, size_t sbytes, int recvPeer, void* rbuf,
                  size_t rbytes, uint32_t step) const;

 private:
  zcollComm* comm_;
  Executor* exec_;
  uint32_t seq_;
};

struct QuantSettings;  // coll/zeropp_config.h

struct CollArgs {
  const void* send;
  void* recv;
  size_t count;  // per-rank count as in the public call
  zcollDataType_t dtype;
  zcollRedOp_t op;
  int root;
  // All-to-all-v only: per-peer counts and displacements, in elements.
  const size_t* sendCounts = nullptr;
  const size_t* sendDispls = nullptr;
  const size_t* recvCounts = nullptr;
  const size_t* recvDispls = nullptr;
  // ZeRO++ collectives only: quantization settings (NULL: hpZ unquantized), qgZ's resolved
  // pipeline depth, hpZ's secondary shard (NULL: scratch; the source of FromSecondary is `send`).
  const QuantSettings* quant = nullptr;
  int pipelineDepth = 1;
  void* secondary = nullptr;
  // zcollQuantizedAllReduce with error feedback only (coll/quantized_allreduce.h): the residual
  // sections of the caller's buffer, fp32 (NULL: no feedback).
  float* firstResidual = nullptr;
  float* partialResidual = nullptr;
  float* ownerResidual = nullptr;
  // Who does the data work: the executor for the memory kind of the call's buffers.
  Executor* exec = &hostExecutor();
};

// ---- Byte-level building blocks, reused by hierarchical algorithms --------------------------
// All-gather of variable blocks: block i of group member i lives at recv + offsets[i] with
// offsets[i+1] - offsets[i] bytes. This rank's block is read from `own`; when `own` is not its
// place in recv, it is copied there while the first transfer is in flight.
Result ringAllGatherv(const Stage& st, const Group& g, void* recv, const size_t* offsets,
                      const void* own);
Result directAllGatherv(const Stage& st, const Group& g, void* recv, const size_t* offsets,
                        const void* own);

// Reduce-scatter of variable chunks (elements): chunk i of `send` (offsets[i]..offsets[i+1])
// is reduced over the group into `out` on member i. Partials travel in the accumulator type.
Result ringReduceScatterv(const Stage& st, const Group& g, const void* send, void* out,
                          const size_t* offsets, zcollDataType_t dtype, zcollRedOp_t op);

// `count` elements split into w balanced chunks (any count): chunk i is elem[i]..elem[i+1]
// elements, byte[i]..byte[i+1] bytes. The ring all-reduce and the reduce share it, so they
// reduce the same chunks in the same order.
struct BalancedChunks {
  std::vector<size_t> elem, byte;
};
BalancedChunks balancedChunks(size_t count, int w, size_t elemSize);

// Slices of a block of `units` (elements or bytes) for the pipelined hierarchical algorithms:
// about 1 MiB each, at most 16, and at most `maxSlices` (what the step tags can number).
struct Slices {
  size_t units = 0, count = 1;
  size_t first(size_t k) const { return units * k / count; }
  size_t len(size_t k) const { return first(k + 1) - first(k); }
};
Slices makeSlices(size_t units, size_t unitBytes, size_t maxSlices);

// The world offsets i * bytes (i = 0..W) of an all-gather of a.count elements per rank.
std::vector<size_t> worldAllGatherOffsets(const zcollComm* comm, const CollArgs& a);

// ---- Registry -------------------------------------------------------------------------------
using AlgoFn = Result (*)(zcollComm* comm, const CollArgs& args);

struct Algorithm {
  CollKind kind;
  const char* name;
  AlgoFn run;
  const char* description;  // one line, listed by zcoll_info --algorithms
};

// The algorithm for a call: the one ZCOLL_ALGO_<KIND> named when the comm was created, else
// the default for the size, the comm's layout and the memory kind of the call's buffers.
Result selectAlgorithm(const zcollComm* comm, CollKind kind, size_t bytesPerRank, MemKind mem,
                       const Algorithm** out);
// ZCOLL_ALGO_<KIND> for every CollKind, read from the environment (at comm creation only).
std::vector<std::string> readAlgorithmOverrides();
// The algorithm of `kind` named `name`; NULL when there is none.
const Algorithm* findAlgorithm(CollKind kind, const std::string& name);
const std::vector<Algorithm>& allAlgorithms();
// Selects (as above) and runs the algorithm for a call, and counts it in the stats.
Result runAlgorithm(zcollComm* comm, CollKind kind, const CollArgs& args, size_t bytesPerRank);
// The collective's short name (collectives.h): "allgather".
const char* collKindName(CollKind kind);
// The work of a call that runs `kind` (api/launch.h: CallWork), on the executor it is given.
// It owns copies of what `args` points to besides the buffers (quantization settings,
// all-to-all-v counts), so it may run after the entry point returned. Empty when the call
// moves nothing (count 0; an all-to-all-v always runs: every rank takes part).
std::function<Result(Executor&)> algorithmWork(zcollComm* comm, CollKind kind,
                                               const CollArgs& args, size_t bytesPerRank);

// Algorithms (one file each).
Result allGatherRing(zcollComm* comm, const CollArgs& a);
Result allGatherDirect(zcollComm* comm, const CollArgs& a);
Result allGatherHierarchical(zcollComm* comm, const CollArgs& a);
Result allGatherShmRead(zcollComm* comm, const CollArgs& a);
Result reduceScatterRing(zcollComm* comm, const CollArgs& a);
Result reduceScatterDirect(zcollComm* comm, const CollArgs& a);
Result reduceScatterShmRead(zcollComm* comm, const CollArgs& a);
Result reduceScatterHierarchical(zcollComm* comm, const CollArgs& a);
Result allReduceRing(zcollComm* comm, const CollArgs& a);
Result allReduceRecursiveDoubling(zcollComm* comm, const CollArgs& a);
Result allReduceShmRead(zcollComm* comm, const CollArgs& a);
Result allToAllPairwise(zcollComm* comm, const CollArgs& a);
Result broadcastBinomial(zcollComm* comm, const CollArgs& a);
Result broadcastPipelinedRing(zcollComm* comm, const CollArgs& a);
Result reduceRing(zcollComm* comm, const CollArgs& a);
Result gatherDirect(zcollComm* comm, const CollArgs& a);
Result scatterDirect(zcollComm* comm, const CollArgs& a);
Result allToAllvPairwise(zcollComm* comm, const CollArgs& a);
// ZeRO++ (docs/ZEROPP.md), in qwz_allgather.cc, hpz_allgather.cc, qgz_reducescatter.cc, qgz_flat.cc.
Result quantizedAllGatherRing(zcollComm* comm, const CollArgs& a);
Result allGatherHierRailThenNode(zcollComm* comm, const CollArgs& a);
Result allGatherHierRailThenNodeShmRead(zcollComm* comm, const CollArgs& a);
Result allGatherFromSecondaryNode(zcollComm* comm, const CollArgs& a);
Result allGatherFromSecondaryNodeShmRead(zcollComm* comm, const CollArgs& a);
Result quantizedReduceScatterTwoHop(zcollComm* comm, const CollArgs& a);
Result quantizedReduceScatterTwoHopShmRead(zcollComm* comm, const CollArgs& a);
Result quantizedReduceScatterFlat(zcollComm* comm, const CollArgs& a);
// zcollQuantizedAllReduce (docs/ZEROPP.md "Quantized all-reduce"), in quantized_allreduce.cc.
Result quantizedAllReduceQgzThenQwz(zcollComm* comm, const CollArgs& a);
Result quantizedAllReduceExact(zcollComm* comm, const CollArgs& a);
Result barrierDissemination(zcollComm* comm);

}  // namespace zcoll
