// The shared nccl-tests-style driver. A binary describes its collective as a Collective (name,
// bus-bandwidth factor, count math, run function, input/expected values, optional extra
// columns) and calls perfMain; the driver does the rest: options, communicator from the
// environment, the size sweep, timing (max over ranks), verification and the output table.
//
// Extension point (quantized collectives and the like): a run function may capture state,
// `tolerance` admits approximate results, and `extraColumns` append columns (wire bytes from
// zcollCommGetStats, max error) to both the out-of-place and in-place halves of the table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/data.h"
#include "common/options.h"
#include "zcoll/zcoll.h"

namespace zcoll {
namespace perf {

// Element counts of one call, derived from the requested size.
struct Counts {
  size_t count = 0;        // the count argument of the call: the table's "count" column
  size_t sendElems = 0;    // elements of the send buffer
  size_t recvElems = 0;    // elements of the receive buffer
  size_t sendInPlace = 0;  // in place: offsets of the send and receive buffers (in elements)
  size_t recvInPlace = 0;  //   within one shared buffer of max(sendElems, recvElems)
};

// The rank this process is, from the communicator.
struct RankInfo {
  zcollComm_t comm = nullptr;
  int rank = 0, nranks = 1, nodes = 1, node = 0, localRank = 0, localSize = 1;
  std::string memory = "host";  // where the buffers are: "host", or the CUDA device (--device 1)
};

// Everything one call needs. With --device 1 the buffers are device memory and `stream` is the
// benchmark's non-blocking CUDA stream (pass it to the call); else host memory and NULL.
struct RunArgs {
  const void* send;
  void* recv;
  Counts counts;
  zcollDataType_t dtype;
  zcollRedOp_t op;
  int root;
  const RankInfo* info;
  zcollStream_t stream;
  bool device;  // --device 1: any extra buffer the call takes must be device memory too
  bool registered = false;  // -R 1: host buffers from zcollMemAllocHost (extra ones too)
};

// Result of one size in one mode (out-of-place or in-place), already combined over ranks.
struct Measurement {
  bool ran = false;        // false: the mode does not exist for this collective (N/A)
  bool checked = false;    // -c 1: wrong/maxError are meaningful
  bool cpuTime = false;    // -C 1: timeUs is CPU time
  size_t bytes = 0;        // the size column
  double timeUs = 0;       // per call, max over ranks
  double algBw = 0, busBw = 0;  // GB/s
  uint64_t wrong = 0;      // sum over ranks
  double maxError = 0;     // max over ranks
  double wireBytes = 0;    // bytes sent to other ranks per call, max over ranks (extra columns)
  double interBytes = 0;   // the part of wireBytes that crossed nodes
  // Collective::sameOnEveryRank and checked: every rank's output of the checked call(s) held the
  // same bits (their FNV-1a hashes agreed); false otherwise.
  bool sameBits = true;
};

struct ExtraColumn {
  std::string title;  // first header line, e.g. "wire"
  std::string unit;   // second header line, e.g. "(B)"
  int width;
  std::function<std::string(const Measurement&)> format;
};

struct Collective {
  std::string name;      // e.g. "all_gather": printed in the header
  bool reduces = false;  // takes -o; the redop column shows it
  bool rooted = false;   // takes -r; the root column shows it
  bool inPlace = true;   // has an in-place variant (else its columns read N/A)
  // Its ring algorithm carries fp16/bf16 partial sums as ZCOLL_REDUCE_PARTIALS says: the header
  // of a 16-bit run names the mode (zcoll's default moves about twice NCCL's bytes there).
  bool ringPartials = false;
  // The -d and -o values the collective takes (empty: every one); -d all / -o all run these,
  // any other value is refused at parse time with this list.
  std::vector<zcollDataType_t> types;
  std::vector<zcollRedOp_t> ops;
  std::function<double(int nranks)> busFactor;
  // Counts for a request of `elems` elements (requested bytes / type size).
  std::function<Counts(size_t elems, int nranks, int rank)> counts;
  std::function<zcollResult_t(const RunArgs&)> run;
  ValueFn input;     // send-buffer element i of a rank
  ValueFn expected;  // receive-buffer element i of a rank after the call
  double tolerance = 0;  // 0: exact
  // When set, replaces `tolerance` for the run's dtype (a bound that depends on the output
  // type's rounding, as for the quantized collectives).
  std::function<double(zcollDataType_t)> toleranceFor;
  std::vector<ExtraColumn> extraColumns;
  // Every rank's receive buffer must hold the same bits after a checked call (the quantized
  // all-reduce's promise): the checked call's output is hashed and the hashes compared over the
  // ranks; a mismatch sets Measurement::sameBits false and counts one wrong value.
  bool sameOnEveryRank = false;
  std::vector<std::string> notes;  // extra setup lines rank 0 prints (each starts with "# ")
  // Lines `-h` adds for the binary's own flags (e.g. the quantized ones' --bits).
  std::vector<std::string> usage;
  // What `-h` says the benchmark runs over.
  std::string over = "zcoll; ranks from zcollCommInitFromEnv";
};

// The shapes of the standard collectives (common/shapes.cc; shared with the NCCL peer,
// perf/peers/nccl_coll_bench.cc): name, bus factor, count math, inputs and expected values.
// Callers add `run` and any extra columns or tolerance.
//  - gathering (size = whole output; each rank contributes size/n; in place at its own slot;
//    bus factor (n-1)/n; checked on moved values);
//  - reduce-scatter (size = whole input; each rank gets size/n; in place at its own input slot;
//    checked against the reduction);
//  - all-reduce (size = one rank's buffer; in place send = recv; bus factor 2(n-1)/n);
//  - all-to-all (size = one rank's whole send buffer, n chunks; no in-place variant);
//  - send/recv ring shift r -> r+1 (size = the buffer; bus factor 1; no in-place variant).
Collective allGatherShape(const std::string& name);
Collective reduceScatterShape(const std::string& name);
Collective allReduceShape(const std::string& name);
Collective allToAllShape(const std::string& name);
Collective sendRecvShape(const std::string& name);

// Runs the benchmark. Returns the process exit code: 0 when every call succeeded and no
// wrong value was found anywhere, 1 otherwise, 2 on a usage error.
int perfMain(int argc, char** argv, const Collective& coll);

// Prints "<what> failed: <error string>: <last error>" with the rank and exits with 1 unless
// res is zcollSuccess.
void checkResult(zcollResult_t res, const char* what, const RankInfo& info);

}  // namespace perf
}  // namespace zcoll
