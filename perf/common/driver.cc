// The benchmark loop: for each size, each mode (out-of-place, in-place): fill, warm up, time,
// then (with -c 1) refill, run once and verify; combine over ranks; rank 0 prints the row.
#include "common/driver.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "base/dtype.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/registered_buffer.h"
#include "common/table.h"

namespace zcoll {
namespace perf {
namespace {

constexpr size_t kRankLineBytes = 160;

double nowSec() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

using Buffer = HostBuffer;  // common/buffer.h

// Process CPU time (every thread: the caller's and zcoll's progress thread), for -C 1.
double cpuSec() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

RankInfo initRanks(const Options& opt) {
  RankInfo info;
  zcollConfig_t config = ZCOLL_CONFIG_INITIALIZER;
  if (opt.timeoutSec > 0) config.timeoutSec = opt.timeoutSec;  // -T
  checkResult(zcollCommInitFromEnv(&info.comm, &config), "zcollCommInitFromEnv", info);
  zcollComm_t c = info.comm;
  checkResult(zcollCommUserRank(c, &info.rank), "zcollCommUserRank", info);
  checkResult(zcollCommCount(c, &info.nranks), "zcollCommCount", info);
  checkResult(zcollCommNodeCount(c, &info.nodes), "zcollCommNodeCount", info);
  checkResult(zcollCommNodeRank(c, &info.node), "zcollCommNodeRank", info);
  checkResult(zcollCommLocalRank(c, &info.localRank), "zcollCommLocalRank", info);
  checkResult(zcollCommLocalSize(c, &info.localSize), "zcollCommLocalSize", info);
  return info;
}

// Every rank's setup line, gathered to all (only rank 0 prints them).
std::vector<std::string> gatherRankLines(const RankInfo& info) {
  std::vector<char> mine(kRankLineBytes, 0), all(kRankLineBytes * info.nranks, 0);
  std::string line = rankLine(info);
  std::memcpy(mine.data(), line.data(), std::min(line.size(), kRankLineBytes - 1));
  checkResult(zcollAllGather(mine.data(), all.data(), kRankLineBytes, zcollInt8, info.comm,
                             nullptr),
              "zcollAllGather (rank lines)", info);
  std::vector<std::string> lines;
  for (int r = 0; r < info.nranks; ++r) lines.emplace_back(&all[r * kRankLineBytes]);
  return lines;
}

// The buffers of one mode. The values are written and checked in host memory (`host`); with
// --device 1 the call gets device mirrors of the same blocks at the same offsets (`args`), filled from
// the host blocks before a call and read back after it.
struct Layout {
  RunArgs args;  // what the call gets
  RunArgs host;  // the same layout in host memory (== args without --device 1)
  int blocks = 0;                            // 1 (in place) or 2 (send, recv)
  unsigned char* hostBase[2] = {nullptr, nullptr};
  unsigned char* devBase[2] = {nullptr, nullptr};
  size_t bytes[2] = {0, 0};
};

class Bench {
 public:
  Bench(const Collective& coll, const Options& opt, const RankInfo& info, zcollStream_t stream)
      : coll_(coll), opt_(opt), info_(info), typeSize_(dtypeSize(opt.dtype)), stream_(stream) {}

  Row runSize(size_t requestedBytes) {
    Counts c = coll_.counts(requestedBytes / typeSize_, info_.nranks, info_.rank);
    Row row;
    row.bytes = std::max(c.sendElems, c.recvElems) * typeSize_;
    row.count = c.count;
    row.dtype = opt_.dtype;
    row.op = opt_.op;
    row.root = opt_.root;
    row.modes[0] = runMode(c, false, row.bytes);
    if (coll_.inPlace) row.modes[1] = runMode(c, true, row.bytes);
    return row;
  }

 private:
  Measurement runMode(const Counts& c, bool inPlace, size_t bytes) {
    Layout l = layout(c, inPlace);
    Pattern pat{opt_.op, info_.nranks, opt_.root, c.count};
    prepare(l, pat);
    for (int i = 0; i < opt_.warmup; ++i) call(l.args, inPlace, bytes);
    settle(inPlace, bytes, "warm-up");
    Measurement m = timeCalls(l.args, inPlace, bytes);
    for (int i = 0; i < opt_.check; ++i) verify(l, pat, inPlace, bytes, &m);
    combine(&m);
    return m;
  }

  // Out of place: separate buffers. In place: one buffer holding both at the collective's
  // offsets (the larger of the two buffers is reused).
  Layout layout(const Counts& c, bool inPlace) {
    Layout l;
    l.host = RunArgs{nullptr, nullptr, c, opt_.dtype, opt_.op, opt_.root, &info_, nullptr, false,
                     opt_.registered};
    size_t ts = typeSize_;
    int sendBlock = 0, recvBlock = 0;
    size_t sendOffset = 0, recvOffset = 0;
    if (!inPlace) {
      sendBlock = place(&l, 0, c.sendElems * ts);
      recvBlock = place(&l, 1, c.recvElems * ts);
    } else {
      bool recvLarger = c.recvElems >= c.sendElems;
      sendBlock = recvBlock = place(&l, recvLarger ? 1 : 0,
                                    std::max(c.sendElems, c.recvElems) * ts);
      sendOffset = c.sendInPlace * ts;
      recvOffset = c.recvInPlace * ts;
    }
    l.host.send = l.hostBase[sendBlock] + sendOffset;
    l.host.recv = l.hostBase[recvBlock] + recvOffset;
    l.args = l.host;
    if (opt_.device) {
      l.args.send = l.devBase[sendBlock] + sendOffset;
      l.args.recv = l.devBase[recvBlock] + recvOffset;
      l.args.stream = stream_;
      l.args.device = true;
    }
    return l;
  }

  // Adds a block of `bytes` in buffer pair `which` (0: send, 1: recv): host (registered with
  // -R 1), and its device mirror with --device 1; returns its index.
  int place(Layout* l, int which, size_t bytes) {
    int b = l->blocks++;
    l->hostBase[b] = opt_.registered ? registered_[which].ensure(bytes) : host_[which].ensure(bytes);
    if (opt_.device) l->devBase[b] = device_[which].ensure(bytes);
    l->bytes[b] = bytes;
    return b;
  }

  // Poisons the receive buffer, then writes the inputs (in place they may overlap: inputs win);
  // with --device 1 copies the host blocks to the device.
  void prepare(const Layout& l, const Pattern& pat) {
    const RunArgs& a = l.host;
    fillConstant(a.recv, opt_.dtype, a.counts.recvElems, kPoison);
    fillValues(const_cast<void*>(a.send), opt_.dtype, a.counts.sendElems, pat, info_.rank,
               coll_.input);
    if (opt_.device)
      for (int b = 0; b < l.blocks; ++b) copyToDevice(l.devBase[b], l.hostBase[b], l.bytes[b]);
  }

  void call(const RunArgs& a, bool inPlace, size_t bytes) {
    zcollResult_t res = coll_.run(a);
    if (res == zcollSuccess) return;
    checkResult(res, describe(inPlace, bytes).c_str(), info_);
  }

  std::string describe(bool inPlace, size_t bytes) const {
    char what[160];
    std::snprintf(what, sizeof(what), "%s (%s, %zu bytes)", coll_.name.c_str(),
                  inPlace ? "in-place" : "out-of-place", bytes);
    return what;
  }

  // --device 1: waits for the stream, then fails on an error an enqueued call met while it ran.
  // Nothing without --device 1.
  void settle(bool inPlace, size_t bytes, const char* phase) {
    if (!opt_.device) return;
    synchronize(stream_, "cudaStreamSynchronize");
    zcollResult_t async = zcollSuccess;
    checkResult(zcollCommGetAsyncError(info_.comm, &async), "zcollCommGetAsyncError", info_);
    if (async != zcollSuccess)
      checkResult(async, (describe(inPlace, bytes) + ", " + phase).c_str(), info_);
  }

  // The time of n x m calls (-n, -m), back to back: with --device 1 enqueued, then the stream
  // synchronized, all under one host clock (as nccl-tests' default timing); with -z 1 each call
  // is waited for before the next; with -C 1 the process's CPU time instead.
  Measurement timeCalls(const RunArgs& a, bool inPlace, size_t bytes) {
    checkResult(zcollBarrier(info_.comm, nullptr), "zcollBarrier", info_);
    zcollStats_t before = stats();
    const long calls = long(opt_.iters) * opt_.aggIters;
    double start = opt_.cpuTime ? cpuSec() : nowSec();
    for (long i = 0; i < calls; ++i) {
      call(a, inPlace, bytes);
      if (opt_.blocking) settle(inPlace, bytes, "timed calls");
    }
    settle(inPlace, bytes, "timed calls");
    double sec = ((opt_.cpuTime ? cpuSec() : nowSec()) - start) / double(calls);
    Measurement m;
    m.ran = true;
    m.cpuTime = opt_.cpuTime;
    m.bytes = bytes;
    m.timeUs = sec * 1e6;
    if (wantStats()) {
      zcollStats_t after = stats();
      m.interBytes = double(after.bytesSent[zcollPathInter] - before.bytesSent[zcollPathInter]);
      m.wireBytes = m.interBytes +
                    double(after.bytesSent[zcollPathIntra] - before.bytesSent[zcollPathIntra]);
      m.interBytes /= double(calls);
      m.wireBytes /= double(calls);
    }
    return m;
  }

  // One checked call (-c N runs N): its wrong values add to m's, its error raises m's maximum.
  void verify(const Layout& l, const Pattern& pat, bool inPlace, size_t bytes, Measurement* m) {
    prepare(l, pat);
    call(l.args, inPlace, bytes);
    settle(inPlace, bytes, "checked call");
    const RunArgs& a = l.host;
    if (opt_.device)
      copyToHost(a.recv, l.args.recv, a.counts.recvElems * typeSize_);
    if (info_.rank == opt_.corruptRank && a.counts.recvElems > 0)
      spoilValue(a.recv, opt_.dtype, a.counts.recvElems / 2);
    Verdict v = verifyValues(a.recv, opt_.dtype, a.counts.recvElems, pat, info_.rank,
                             coll_.expected,
                             coll_.toleranceFor ? coll_.toleranceFor(opt_.dtype) : coll_.tolerance);
    m->checked = true;
    m->wrong += v.wrong;
    m->maxError = std::max(m->maxError, v.maxError);
    if (coll_.sameOnEveryRank && !sameBitsOnEveryRank(a.recv, a.counts.recvElems * typeSize_)) {
      m->sameBits = false;
      if (info_.rank == 0) ++m->wrong;  // summed over ranks: one wrong value per mismatch
    }
  }

  // True on every rank when every rank's `bytes` bytes at `data` hash (FNV-1a, 64 bits) alike.
  bool sameBitsOnEveryRank(const void* data, size_t bytes) {
    uint64_t h = 1469598103934665603ull;
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
    uint64_t lo = h, hi = h;
    checkResult(zcollAllReduce(&lo, &lo, 1, zcollUint64, zcollMin, info_.comm, nullptr),
                "zcollAllReduce (output hash)", info_);
    checkResult(zcollAllReduce(&hi, &hi, 1, zcollUint64, zcollMax, info_.comm, nullptr),
                "zcollAllReduce (output hash)", info_);
    return lo == hi;
  }

  // The time over ranks as -a says (rank 0's, mean, min or max); max over ranks of the error
  // and wire bytes; sum of the wrong counts.
  void combine(Measurement* m) {
    std::vector<double> times(info_.nranks);
    checkResult(zcollAllGather(&m->timeUs, times.data(), 1, zcollFloat64, info_.comm, nullptr),
                "zcollAllGather (timing)", info_);
    double maxed[4] = {m->timeUs, m->maxError, m->wireBytes, m->interBytes};
    checkResult(zcollAllReduce(maxed, maxed, 4, zcollFloat64, zcollMax, info_.comm, nullptr),
                "zcollAllReduce (timing)", info_);
    switch (opt_.average) {
      case 0: maxed[0] = times[0]; break;
      case 1: {
        double sum = 0;
        for (double t : times) sum += t;
        maxed[0] = sum / info_.nranks;
        break;
      }
      case 2: maxed[0] = *std::min_element(times.begin(), times.end()); break;
      default: break;  // 3: the max, above
    }
    uint64_t wrong = m->wrong;
    checkResult(zcollAllReduce(&wrong, &wrong, 1, zcollUint64, zcollSum, info_.comm, nullptr),
                "zcollAllReduce (wrong count)", info_);
    m->timeUs = maxed[0];
    m->maxError = maxed[1];
    m->wireBytes = maxed[2];
    m->interBytes = maxed[3];
    m->wrong = wrong;
    double sec = m->timeUs * 1e-6;
    m->algBw = sec > 0 ? double(m->bytes) / sec / 1e9 : 0;
    m->busBw = m->algBw * coll_.busFactor(info_.nranks);
  }

  bool wantStats() const { return !coll_.extraColumns.empty(); }

  zcollStats_t stats() const {
    zcollStats_t s;
    std::memset(&s, 0, sizeof(s));
    s.size = sizeof(s);
    if (wantStats()) checkResult(zcollCommGetStats(info_.comm, &s), "zcollCommGetStats", info_);
    return s;
  }

  const Collective& coll_;
  const Options& opt_;
  const RankInfo& info_;
  size_t typeSize_;
  zcollStream_t stream_;
  Buffer host_[2];                       // send, recv
  RegisteredHostBuffer registered_[2];   // -R 1 only
  DeviceBuffer device_[2];               // --device 1 only
};

// The sweep of every run (-d/-o/-r all: one per type, op or root), -N times (0: until
// stopped); returns the number of wrong values over all rows (rank 0 prints as it goes, and
// rewrites -J's file after each cycle).
uint64_t sweep(const Collective& coll, const Options& opt, const RankInfo& info,
               zcollStream_t stream) {
  const std::vector<Options> runs = expandRuns(opt, coll, info.nranks);
  uint64_t wrong = 0;
  double busBwSum = 0;
  int measured = 0;
  std::vector<Row> rows;
  for (int cycle = 0; opt.cycles == 0 || cycle < opt.cycles; ++cycle) {
    for (const Options& run : runs) {
      Bench bench(coll, run, info, stream);  // buffers sized for this run's type
      for (size_t bytes : sizeList(run)) {
        Row row = bench.runSize(bytes);
        row.cycle = cycle;
        for (const Measurement& m : row.modes) {
          if (!m.ran) continue;
          wrong += m.wrong;
          busBwSum += m.busBw;
          ++measured;
        }
        if (info.rank == 0) printRow(coll, run, row);
        if (info.rank == 0 && !opt.outputFile.empty()) rows.push_back(row);
      }
    }
    if (info.rank == 0 && !opt.outputFile.empty() &&
        !writeResults(coll, opt, info.nranks, info.nodes, rows))
      ++wrong;  // the message is printed; the run fails
  }
  if (info.rank == 0) printSummary(wrong, measured ? busBwSum / measured : 0);
  return wrong;
}

}  // namespace

void checkResult(zcollResult_t res, const char* what, const RankInfo& info) {
  if (res == zcollSuccess) return;
  std::fprintf(stderr, "rank %d: %s failed: %s: %s\n", info.rank, what, zcollGetErrorString(res),
               zcollGetLastError(info.comm));
  std::fflush(stdout);
  std::exit(1);
}

int perfMain(int argc, char** argv, const Collective& coll) {
  Options opt;
  int rc = parseOptions(argc, argv, coll, &opt);
  if (rc >= 0) return rc;
  // --device 1: the device is chosen before init, which binds the communicator to it.
  int device = -1;
  if (opt.device) {
    std::string why = selectDevice(&device);
    if (!why.empty()) {
      std::fprintf(stderr, "%s: --device 1 (device buffers): %s\n", argv[0], why.c_str());
      return 1;
    }
  }
  RankInfo info = initRanks(opt);
  if (coll.rooted && !opt.allRoots && opt.root >= info.nranks) {
    if (info.rank == 0)
      std::fprintf(stderr, "%s: root %d is not a rank (%d ranks)\n", argv[0], opt.root,
                   info.nranks);
    zcollCommDestroy(info.comm);
    return 2;
  }
  zcollStream_t stream = nullptr;
  if (opt.device) {
    setDeviceRank(info.rank);
    info.memory = describeDevice(device);
    if (!opt.streamNull) stream = createStream();  // -y 1: CUDA's default stream (NULL)
  }
  std::vector<std::string> lines = gatherRankLines(info);
  if (info.rank == 0) {
    printSetup(coll, opt, info, lines);
    printTableHeader(coll, opt.cpuTime);
  }
  uint64_t wrong = sweep(coll, opt, info, stream);
  checkResult(zcollCommDestroy(info.comm), "zcollCommDestroy", info);
  destroyStream(stream);
  return wrong ? 1 : 0;
}

}  // namespace perf
}  // namespace zcoll
