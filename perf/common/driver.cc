// The benchmark loop: for each size, each mode (out-of-place, in-place): fill, warm up, time,
// then (with -c 1) refill, run once and verify; combine over ranks; rank 0 prints the row.
#include "common/driver.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/table.h"
#include "core/dtype.h"

namespace zcoll {
namespace perf {
namespace {

constexpr size_t kRankLineBytes = 160;

double nowSec() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A growable buffer, 8-byte aligned, never empty (so no call ever sees a NULL pointer).
class Buffer {
 public:
  unsigned char* ensure(size_t bytes) {
    size_t words = std::max<size_t>(1, (bytes + 7) / 8);
    if (words_.size() < words) words_.resize(words);
    return reinterpret_cast<unsigned char*>(words_.data());
  }

 private:
  std::vector<uint64_t> words_;
};

RankInfo initRanks() {
  RankInfo info;
  checkResult(zcollCommInitFromEnv(&info.comm, nullptr), "zcollCommInitFromEnv", info);
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

class Bench {
 public:
  Bench(const Collective& coll, const Options& opt, const RankInfo& info)
      : coll_(coll), opt_(opt), info_(info), typeSize_(dtypeSize(opt.dtype)) {}

  Row runSize(size_t requestedBytes) {
    Counts c = coll_.counts(requestedBytes / typeSize_, info_.nranks, info_.rank);
    Row row;
    row.bytes = std::max(c.sendElems, c.recvElems) * typeSize_;
    row.count = c.count;
    row.modes[0] = runMode(c, false, row.bytes);
    if (coll_.inPlace) row.modes[1] = runMode(c, true, row.bytes);
    return row;
  }

 private:
  Measurement runMode(const Counts& c, bool inPlace, size_t bytes) {
    RunArgs args = layout(c, inPlace);
    Pattern pat{opt_.op, info_.nranks, opt_.root, c.count};
    prepare(args, pat);
    for (int i = 0; i < opt_.warmup; ++i) call(args, inPlace, bytes);
    Measurement m = timeCalls(args, inPlace, bytes);
    if (opt_.check) verify(args, pat, inPlace, bytes, &m);
    combine(&m);
    return m;
  }

  // Out of place: separate buffers. In place: one buffer holding both at the collective's
  // offsets (the larger of the two buffers is reused).
  RunArgs layout(const Counts& c, bool inPlace) {
    RunArgs a{nullptr, nullptr, c, opt_.dtype, opt_.op, opt_.root, &info_};
    size_t ts = typeSize_;
    if (!inPlace) {
      a.send = send_.ensure(c.sendElems * ts);
      a.recv = recv_.ensure(c.recvElems * ts);
      return a;
    }
    Buffer& shared = c.recvElems >= c.sendElems ? recv_ : send_;
    unsigned char* base = shared.ensure(std::max(c.sendElems, c.recvElems) * ts);
    a.send = base + c.sendInPlace * ts;
    a.recv = base + c.recvInPlace * ts;
    return a;
  }

  // Poisons the receive buffer, then writes the inputs (in place they may overlap: inputs win).
  void prepare(const RunArgs& a, const Pattern& pat) {
    fillConstant(a.recv, opt_.dtype, a.counts.recvElems, kPoison);
    fillValues(const_cast<void*>(a.send), opt_.dtype, a.counts.sendElems, pat, info_.rank,
               coll_.input);
  }

  void call(const RunArgs& a, bool inPlace, size_t bytes) {
    zcollResult_t res = coll_.run(a);
    if (res == zcollSuccess) return;
    char what[160];
    std::snprintf(what, sizeof(what), "%s (%s, %zu bytes)", coll_.name.c_str(),
                  inPlace ? "in-place" : "out-of-place", bytes);
    checkResult(res, what, info_);
  }

  Measurement timeCalls(const RunArgs& a, bool inPlace, size_t bytes) {
    checkResult(zcollBarrier(info_.comm, nullptr), "zcollBarrier", info_);
    zcollStats_t before = stats();
    double start = nowSec();
    for (int i = 0; i < opt_.iters; ++i) call(a, inPlace, bytes);
    double sec = (nowSec() - start) / opt_.iters;
    Measurement m;
    m.ran = true;
    m.bytes = bytes;
    m.timeUs = sec * 1e6;
    if (wantStats()) {
      zcollStats_t after = stats();
      m.interBytes = double(after.bytesSent[zcollPathInter] - before.bytesSent[zcollPathInter]);
      m.wireBytes = m.interBytes +
                    double(after.bytesSent[zcollPathIntra] - before.bytesSent[zcollPathIntra]);
      m.interBytes /= opt_.iters;
      m.wireBytes /= opt_.iters;
    }
    return m;
  }

  void verify(const RunArgs& a, const Pattern& pat, bool inPlace, size_t bytes, Measurement* m) {
    prepare(a, pat);
    call(a, inPlace, bytes);
    if (info_.rank == opt_.corruptRank && a.counts.recvElems > 0)
      spoilValue(a.recv, opt_.dtype, a.counts.recvElems / 2);
    Verdict v = verifyValues(a.recv, opt_.dtype, a.counts.recvElems, pat, info_.rank,
                             coll_.expected,
                             coll_.toleranceFor ? coll_.toleranceFor(opt_.dtype) : coll_.tolerance);
    m->checked = true;
    m->wrong = v.wrong;
    m->maxError = v.maxError;
  }

  // Max over ranks of the time, error and wire bytes; sum of the wrong counts.
  void combine(Measurement* m) {
    double maxed[4] = {m->timeUs, m->maxError, m->wireBytes, m->interBytes};
    checkResult(zcollAllReduce(maxed, maxed, 4, zcollFloat64, zcollMax, info_.comm, nullptr),
                "zcollAllReduce (timing)", info_);
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
  Buffer send_, recv_;
};

// The sweep; returns the number of wrong values over all rows (rank 0 prints as it goes).
uint64_t sweep(const Collective& coll, const Options& opt, const RankInfo& info) {
  Bench bench(coll, opt, info);
  uint64_t wrong = 0;
  double busBwSum = 0;
  int measured = 0;
  for (size_t bytes : sizeList(opt)) {
    Row row = bench.runSize(bytes);
    for (const Measurement& m : row.modes) {
      if (!m.ran) continue;
      wrong += m.wrong;
      busBwSum += m.busBw;
      ++measured;
    }
    if (info.rank == 0) printRow(coll, opt, row);
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
  RankInfo info = initRanks();
  if (coll.rooted && opt.root >= info.nranks) {
    if (info.rank == 0)
      std::fprintf(stderr, "%s: root %d is not a rank (%d ranks)\n", argv[0], opt.root,
                   info.nranks);
    zcollCommDestroy(info.comm);
    return 2;
  }
  std::vector<std::string> lines = gatherRankLines(info);
  if (info.rank == 0) {
    printSetup(coll, opt, info, lines);
    printTableHeader(coll);
  }
  uint64_t wrong = sweep(coll, opt, info);
  checkResult(zcollCommDestroy(info.comm), "zcollCommDestroy", info);
  return wrong ? 1 : 0;
}

Collective allGatherShape(const std::string& name) {
  Collective c;
  c.name = name;
  c.busFactor = [](int n) { return double(n - 1) / n; };
  c.counts = [](size_t elems, int n, int rank) {
    Counts k;
    k.count = elems / n;
    k.sendElems = k.count;
    k.recvElems = k.count * n;
    k.sendInPlace = k.count * rank;  // in place: this rank's slot of the output
    return k;
  };
  c.input = [](const Pattern&, int rank, size_t i) { return movedValue(rank, i); };
  c.expected = [](const Pattern& p, int, size_t i) {
    return movedValue(int(i / p.count), i % p.count);
  };
  return c;
}

Collective reduceScatterShape(const std::string& name) {
  Collective c;
  c.name = name;
  c.reduces = true;
  c.busFactor = [](int n) { return double(n - 1) / n; };
  c.counts = [](size_t elems, int n, int rank) {
    Counts k;
    k.count = elems / n;
    k.sendElems = k.count * n;
    k.recvElems = k.count;
    k.recvInPlace = k.count * rank;  // in place: this rank's slot of the input
    return k;
  };
  c.input = reduceInput;
  c.expected = [](const Pattern& p, int rank, size_t i) {
    return reduceResult(p, size_t(rank) * p.count + i);
  };
  return c;
}

}  // namespace perf
}  // namespace zcoll
