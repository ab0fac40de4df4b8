// The measurement of zcoll's device perf binaries (--device 1), over NCCL, so perf/peers/device.sh can
// put both side by side on one GPU:
//   nccl_coll_bench COLL --id-dir DIR [the perf binaries' flags: -b -e -i -f -n -w -c -d -o]
//   COLL: all_gather | reduce_scatter | all_reduce | alltoall (grouped ncclSend/ncclRecv to every
//         rank) | sendrecv (ring shift r -> r+1 in one group)
// Ranks come from the environment: RANK / WORLD_SIZE / LOCAL_RANK (tools/zcollrun, torchrun),
// else OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK (mpirun). Device: local rank % device count.
// The ncclUniqueId travels through a file: rank 0 writes DIR/nccl_unique_id (written to a
// temporary name, then renamed, so no rank reads half of it), the others wait for it (up to
// 120 s). DIR (--id-dir, else NCCL_BENCH_ID_DIR) must be shared by the ranks and fresh for each
// job: rank 0 refuses one that already holds an id.
//
// Same sizes, buffers, inputs, check and table as the zcoll binaries (perf/common: shapes.cc,
// data.cc, table.cc; nothing of zcoll is linked): cudaMalloc'd buffers filled from the host,
// calls on a non-blocking stream, time = host clock around -n enqueued calls +
// cudaStreamSynchronize (max over ranks), then (with -c 1) one more call checked on the host.
// Exit: 0 ok, 1 a wrong value or a failure (one line: "rank R: WHAT failed: ..."), 2 usage.
// Without a CUDA device: one line "nccl_coll_bench: no CUDA device (...)" and exit 1.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/dtype.h"
#include "common/buffer.h"
#include "common/cuda_device_name.h"
#include "common/driver.h"
#include "common/table.h"

namespace zp = zcoll::perf;

namespace {

constexpr size_t kRankLineBytes = 160;
constexpr const char* kIdFile = "nccl_unique_id";
constexpr int kIdWaitSec = 120;

struct Job {
  int rank = 0, nranks = 1, localRank = 0, localSize = 1, device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

Job gJob;  // for the failure messages

int envInt(const char* a, const char* b, int fallback) {
  for (const char* name : {a, b}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    long x = std::strtol(v, &end, 10);
    if (*end == '\0' && x >= 0 && x < (1 << 24)) return int(x);
  }
  return fallback;
}

[[noreturn]] void die(const char* what, const std::string& why) {
  std::fprintf(stderr, "rank %d: %s failed: %s\n", gJob.rank, what, why.c_str());
  std::fflush(stdout);
  std::exit(1);
}

void cudaCheck(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    die(what, std::string("CUDA error ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

void ncclCheck(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return;
  std::string why = ncclGetErrorString(r);
  const char* last = ncclGetLastError(gJob.comm);
  if (last && *last) why += std::string(": ") + last;
  die(what, why);
}

ncclDataType_t ncclType(zcollDataType_t t) {
  switch (t) {
    case zcollInt8: return ncclInt8;
    case zcollUint8: return ncclUint8;
    case zcollInt32: return ncclInt32;
    case zcollUint32: return ncclUint32;
    case zcollInt64: return ncclInt64;
    case zcollUint64: return ncclUint64;
    case zcollFloat16: return ncclFloat16;
    case zcollFloat64: return ncclFloat64;
    case zcollBfloat16: return ncclBfloat16;
    default: return ncclFloat32;
  }
}

ncclRedOp_t ncclOp(zcollRedOp_t op) {
  switch (op) {
    case zcollProd: return ncclProd;
    case zcollMax: return ncclMax;
    case zcollMin: return ncclMin;
    case zcollAvg: return ncclAvg;
    default: return ncclSum;
  }
}

// ---- The unique id, through a file in a shared directory ---------------------------------------

ncclUniqueId exchangeId(const std::string& dir) {
  ncclUniqueId id;
  const std::string path = dir + "/" + kIdFile;
  if (gJob.rank == 0) {
    if (access(path.c_str(), F_OK) == 0)
      die("the unique id exchange", path + " exists already (a stale id: give a fresh --id-dir)");
    ncclCheck(ncclGetUniqueId(&id), "ncclGetUniqueId");
    const std::string tmp = path + ".tmp." + std::to_string(getpid());
    FILE* f = std::fopen(tmp.c_str(), "wb");
    bool ok = f && std::fwrite(&id, sizeof(id), 1, f) == 1;
    ok = (f && std::fclose(f) == 0) && ok;
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0)
      die("the unique id exchange", "cannot write " + path + ": " + std::strerror(errno));
    return id;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kIdWaitSec);
  while (std::chrono::steady_clock::now() < deadline) {
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
      bool ok = std::fread(&id, sizeof(id), 1, f) == 1;
      std::fclose(f);
      if (ok) return id;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  die("the unique id exchange", "no " + path + " from rank 0 within " +
                                    std::to_string(kIdWaitSec) + " s");
}

// ---- Buffers: host blocks with device mirrors, as the zcoll driver lays them out ---------------

using zp::HostBuffer;  // common/buffer.h

class DeviceBuffer {
 public:
  ~DeviceBuffer() {
    if (ptr_) (void)cudaFree(ptr_);
  }
  unsigned char* ensure(size_t bytes) {
    bytes = std::max<size_t>(256, (bytes + 255) / 256 * 256);
    if (bytes <= bytes_) return ptr_;
    if (ptr_) cudaCheck(cudaFree(ptr_), "cudaFree");
    ptr_ = nullptr;
    bytes_ = 0;
    void* p = nullptr;
    cudaCheck(cudaMalloc(&p, bytes), "cudaMalloc");
    ptr_ = static_cast<unsigned char*>(p);
    bytes_ = bytes;
    return ptr_;
  }

 private:
  unsigned char* ptr_ = nullptr;
  size_t bytes_ = 0;
};

struct Layout {
  zp::Counts counts;
  void* hostSend = nullptr;
  void* hostRecv = nullptr;
  void* send = nullptr;  // device
  void* recv = nullptr;
  int blocks = 0;
  unsigned char* hostBase[2] = {nullptr, nullptr};
  unsigned char* devBase[2] = {nullptr, nullptr};
  size_t bytes[2] = {0, 0};
};

double nowSec() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ---- The collectives -------------------------------------------------------------------------

using Run = void (*)(const Layout&, const zp::Options&);

void runAllGather(const Layout& l, const zp::Options& o) {
  ncclCheck(ncclAllGather(l.send, l.recv, l.counts.count, ncclType(o.dtype), gJob.comm,
                          gJob.stream),
            "ncclAllGather");
}

void runReduceScatter(const Layout& l, const zp::Options& o) {
  ncclCheck(ncclReduceScatter(l.send, l.recv, l.counts.count, ncclType(o.dtype), ncclOp(o.op),
                              gJob.comm, gJob.stream),
            "ncclReduceScatter");
}

void runAllReduce(const Layout& l, const zp::Options& o) {
  ncclCheck(ncclAllReduce(l.send, l.recv, l.counts.count, ncclType(o.dtype), ncclOp(o.op),
                          gJob.comm, gJob.stream),
            "ncclAllReduce");
}

void runAllToAll(const Layout& l, const zp::Options& o) {
  const size_t chunk = l.counts.count * zcoll::dtypeSize(o.dtype);
  const ncclDataType_t t = ncclType(o.dtype);
  ncclCheck(ncclGroupStart(), "ncclGroupStart");
  for (int p = 0; p < gJob.nranks; ++p) {
    ncclCheck(ncclSend(static_cast<const char*>(l.send) + p * chunk, l.counts.count, t, p,
                       gJob.comm, gJob.stream),
              "ncclSend");
    ncclCheck(ncclRecv(static_cast<char*>(l.recv) + p * chunk, l.counts.count, t, p, gJob.comm,
                       gJob.stream),
              "ncclRecv");
  }
  ncclCheck(ncclGroupEnd(), "ncclGroupEnd");
}

void runSendRecv(const Layout& l, const zp::Options& o) {
  const int n = gJob.nranks, r = gJob.rank;
  const ncclDataType_t t = ncclType(o.dtype);
  ncclCheck(ncclGroupStart(), "ncclGroupStart");
  ncclCheck(ncclSend(l.send, l.counts.count, t, (r + 1) % n, gJob.comm, gJob.stream), "ncclSend");
  ncclCheck(ncclRecv(l.recv, l.counts.count, t, (r - 1 + n) % n, gJob.comm, gJob.stream),
            "ncclRecv");
  ncclCheck(ncclGroupEnd(), "ncclGroupEnd");
}

struct Kind {
  const char* name;
  zp::Collective (*shape)(const std::string&);
  Run run;
};

const Kind kKinds[] = {
    {"all_gather", zp::allGatherShape, runAllGather},
    {"reduce_scatter", zp::reduceScatterShape, runReduceScatter},
    {"all_reduce", zp::allReduceShape, runAllReduce},
    {"alltoall", zp::allToAllShape, runAllToAll},
    {"sendrecv", zp::sendRecvShape, runSendRecv},
};

// ---- The loop --------------------------------------------------------------------------------

class Bench {
 public:
  Bench(const zp::Collective& coll, const zp::Options& opt, Run run)
      : coll_(coll), opt_(opt), run_(run), typeSize_(zcoll::dtypeSize(opt.dtype)) {}

  zp::Row runSize(size_t requestedBytes) {
    zp::Counts c = coll_.counts(requestedBytes / typeSize_, gJob.nranks, gJob.rank);
    zp::Row row;
    row.bytes = std::max(c.sendElems, c.recvElems) * typeSize_;
    row.count = c.count;
    row.dtype = opt_.dtype;
    row.op = opt_.op;
    row.root = opt_.root;
    row.modes[0] = runMode(c, false, row.bytes);
    if (coll_.inPlace) row.modes[1] = runMode(c, true, row.bytes);
    return row;
  }

  // A barrier: a one-element all-reduce, waited for.
  void barrier() {
    ncclCheck(ncclAllReduce(scratch_.ensure(8), scratch_.ensure(8), 1, ncclFloat64, ncclSum,
                            gJob.comm, gJob.stream),
              "ncclAllReduce (barrier)");
    settle("barrier");
  }

  // The setup lines of every rank, gathered to all.
  std::vector<std::string> gatherLines(const std::string& line) {
    std::vector<char> all(kRankLineBytes * gJob.nranks, 0), mine(kRankLineBytes, 0);
    std::memcpy(mine.data(), line.data(), std::min(line.size(), kRankLineBytes - 1));
    unsigned char* d = scratch_.ensure(all.size() + kRankLineBytes);
    cudaCheck(cudaMemcpy(d + all.size(), mine.data(), kRankLineBytes, cudaMemcpyHostToDevice),
              "cudaMemcpy");
    ncclCheck(ncclAllGather(d + all.size(), d, kRankLineBytes, ncclInt8, gJob.comm, gJob.stream),
              "ncclAllGather (rank lines)");
    settle("ncclAllGather (rank lines)");
    cudaCheck(cudaMemcpy(all.data(), d, all.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
    std::vector<std::string> lines;
    for (int r = 0; r < gJob.nranks; ++r) lines.emplace_back(&all[r * kRankLineBytes]);
    return lines;
  }

 private:
  zp::Measurement runMode(const zp::Counts& c, bool inPlace, size_t bytes) {
    Layout l = layout(c, inPlace);
    zp::Pattern pat{opt_.op, gJob.nranks, opt_.root, c.count};
    prepare(l, pat);
    for (int i = 0; i < opt_.warmup; ++i) run_(l, opt_);
    settle(coll_.name.c_str());
    barrier();
    zp::Measurement m;
    double start = nowSec();
    for (int i = 0; i < opt_.iters; ++i) run_(l, opt_);
    settle(coll_.name.c_str());
    m.timeUs = (nowSec() - start) / opt_.iters * 1e6;
    m.ran = true;
    m.bytes = bytes;
    for (int i = 0; i < opt_.check; ++i) {  // -c N: N checked calls
      prepare(l, pat);
      run_(l, opt_);
      settle(coll_.name.c_str());
      cudaCheck(cudaMemcpy(l.hostRecv, l.recv, c.recvElems * typeSize_, cudaMemcpyDeviceToHost),
                "cudaMemcpy (to host)");
      if (gJob.rank == opt_.corruptRank && c.recvElems > 0)
        zp::spoilValue(l.hostRecv, opt_.dtype, c.recvElems / 2);
      zp::Verdict v = zp::verifyValues(l.hostRecv, opt_.dtype, c.recvElems, pat, gJob.rank,
                                       coll_.expected, coll_.tolerance);
      m.checked = true;
      m.wrong += v.wrong;
      m.maxError = std::max(m.maxError, v.maxError);
    }
    combine(&m);
    return m;
  }

  Layout layout(const zp::Counts& c, bool inPlace) {
    Layout l;
    l.counts = c;
    const size_t ts = typeSize_;
    int sb = 0, rb = 0;
    size_t so = 0, ro = 0;
    if (!inPlace) {
      sb = place(&l, send_, devSend_, c.sendElems * ts);
      rb = place(&l, recv_, devRecv_, c.recvElems * ts);
    } else {
      bool recvLarger = c.recvElems >= c.sendElems;
      sb = rb = place(&l, recvLarger ? recv_ : send_, recvLarger ? devRecv_ : devSend_,
                      std::max(c.sendElems, c.recvElems) * ts);
      so = c.sendInPlace * ts;
      ro = c.recvInPlace * ts;
    }
    l.hostSend = l.hostBase[sb] + so;
    l.hostRecv = l.hostBase[rb] + ro;
    l.send = l.devBase[sb] + so;
    l.recv = l.devBase[rb] + ro;
    return l;
  }

  int place(Layout* l, HostBuffer& host, DeviceBuffer& dev, size_t bytes) {
    int b = l->blocks++;
    l->hostBase[b] = host.ensure(bytes);
    l->devBase[b] = dev.ensure(bytes);
    l->bytes[b] = bytes;
    return b;
  }

  // Poisons the output, writes the inputs (in place: inputs win), copies the blocks to the device.
  void prepare(const Layout& l, const zp::Pattern& pat) {
    zp::fillConstant(l.hostRecv, opt_.dtype, l.counts.recvElems, zp::kPoison);
    zp::fillValues(l.hostSend, opt_.dtype, l.counts.sendElems, pat, gJob.rank, coll_.input);
    for (int b = 0; b < l.blocks; ++b)
      if (l.bytes[b])
        cudaCheck(cudaMemcpy(l.devBase[b], l.hostBase[b], l.bytes[b], cudaMemcpyHostToDevice),
                  "cudaMemcpy (to device)");
  }

  void settle(const char* what) {
    cudaCheck(cudaStreamSynchronize(gJob.stream), "cudaStreamSynchronize");
    ncclResult_t async = ncclSuccess;
    ncclCheck(ncclCommGetAsyncError(gJob.comm, &async), "ncclCommGetAsyncError");
    ncclCheck(async, what);
  }

  // Max over ranks of the time; sum of the wrong counts.
  void combine(zp::Measurement* m) {
    double host[2] = {m->timeUs, m->maxError};
    uint64_t wrong = m->wrong;
    unsigned char* d = scratch_.ensure(3 * sizeof(double));
    cudaCheck(cudaMemcpy(d, host, sizeof(host), cudaMemcpyHostToDevice), "cudaMemcpy");
    cudaCheck(cudaMemcpy(d + 2 * sizeof(double), &wrong, sizeof(wrong), cudaMemcpyHostToDevice),
              "cudaMemcpy");
    ncclCheck(ncclAllReduce(d, d, 2, ncclFloat64, ncclMax, gJob.comm, gJob.stream),
              "ncclAllReduce (timing)");
    ncclCheck(ncclAllReduce(d + 2 * sizeof(double), d + 2 * sizeof(double), 1, ncclUint64, ncclSum,
                            gJob.comm, gJob.stream),
              "ncclAllReduce (wrong count)");
    settle("combine");
    cudaCheck(cudaMemcpy(host, d, sizeof(host), cudaMemcpyDeviceToHost), "cudaMemcpy");
    cudaCheck(cudaMemcpy(&wrong, d + 2 * sizeof(double), sizeof(wrong), cudaMemcpyDeviceToHost),
              "cudaMemcpy");
    m->timeUs = host[0];
    m->maxError = host[1];
    m->wrong = wrong;
    double sec = m->timeUs * 1e-6;
    m->algBw = sec > 0 ? double(m->bytes) / sec / 1e9 : 0;
    m->busBw = m->algBw * coll_.busFactor(gJob.nranks);
  }

  const zp::Collective& coll_;
  const zp::Options& opt_;
  Run run_;
  size_t typeSize_;
  HostBuffer send_, recv_;
  DeviceBuffer devSend_, devRecv_, scratch_;
};

void usage(FILE* out, const char* prog) {
  std::fprintf(out,
               "usage: %s all_gather|reduce_scatter|all_reduce|alltoall|sendrecv --id-dir DIR "
               "[options]\n"
               "  --id-dir DIR   a fresh directory shared by the ranks (or NCCL_BENCH_ID_DIR): "
               "rank 0 writes the ncclUniqueId there\n"
               "  options: those of the zcoll perf binaries (-b -e -i -f -n -w -c -d -o,\n"
               "  --test-corrupt R); run '%s all_gather -h' for them. Buffers are always\n"
               "  on the device (--device is ignored).\n",
               prog, prog);
}

}  // namespace

int main(int argc, char** argv) {
  const char* prog = argv[0];
  if (argc < 2 || std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0) {
    usage(argc < 2 ? stderr : stdout, prog);
    return argc < 2 ? 2 : 0;
  }
  const Kind* kind = nullptr;
  for (const Kind& k : kKinds)
    if (std::strcmp(argv[1], k.name) == 0) kind = &k;
  if (kind == nullptr) {
    std::fprintf(stderr, "%s: unknown collective '%s'\n", prog, argv[1]);
    usage(stderr, prog);
    return 2;
  }
  // Takes the collective and --id-dir off argv; the rest are the perf binaries' flags.
  const char* idDir = std::getenv("NCCL_BENCH_ID_DIR");
  int out = 1;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--id-dir") == 0) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: --id-dir needs a directory\n", prog);
        return 2;
      }
      idDir = argv[++i];
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  argv[argc] = nullptr;
  zp::Collective coll = kind->shape(kind->name);
  coll.over = "NCCL; ranks from RANK/WORLD_SIZE/LOCAL_RANK or OMPI_COMM_WORLD_*";
  zp::Options opt;
  int rc = zp::parseOptions(argc, argv, coll, &opt);
  if (rc >= 0) return rc;
  opt.device = true;
  if (opt.allTypes || opt.allOps || opt.allRoots) {
    std::fprintf(stderr, "%s: -d/-o/-r all: the NCCL peer runs one type and op per call\n", prog);
    return 2;
  }
  if (idDir == nullptr || *idDir == '\0') {
    std::fprintf(stderr, "%s: no --id-dir (or NCCL_BENCH_ID_DIR): the ranks meet there\n", prog);
    return 2;
  }

  gJob.rank = envInt("RANK", "OMPI_COMM_WORLD_RANK", 0);
  gJob.nranks = envInt("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", 1);
  gJob.localRank = envInt("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", 0);
  gJob.localSize = envInt("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", gJob.nranks);
  if (gJob.nranks < 1 || gJob.rank >= gJob.nranks) {
    std::fprintf(stderr, "%s: rank %d of %d: bad RANK/WORLD_SIZE\n", prog, gJob.rank, gJob.nranks);
    return 2;
  }
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count <= 0) {
    std::string why = e != cudaSuccess ? std::string(cudaGetErrorName(e)) + ": " +
                                             cudaGetErrorString(e)
                                       : "cudaGetDeviceCount gives 0";
    std::fprintf(stderr, "%s: no CUDA device (%s)\n", prog, why.c_str());
    return 1;
  }
  gJob.device = gJob.localRank % count;
  cudaCheck(cudaSetDevice(gJob.device), "cudaSetDevice");
  if (!opt.streamNull)  // -y 1: CUDA's default stream (NULL)
    cudaCheck(cudaStreamCreateWithFlags(&gJob.stream, cudaStreamNonBlocking),
              "cudaStreamCreateWithFlags");

  ncclUniqueId id = exchangeId(idDir);
  ncclResult_t init = ncclCommInitRank(&gJob.comm, gJob.nranks, id, gJob.rank);
  if (init != ncclSuccess && gJob.localSize > count)
    std::fprintf(stderr,
                 "rank %d: %d local ranks on %d device(s): several ranks on one GPU need an NCCL "
                 "that allows it (2.30.3 or later with NCCL_MULTI_RANK_GPU_ENABLE=1; "
                 "perf/README.md)\n",
                 gJob.rank, gJob.localSize, count);
  ncclCheck(init, "ncclCommInitRank");

  int version = 0;
  ncclCheck(ncclGetVersion(&version), "ncclGetVersion");
  Bench bench(coll, opt, kind->run);
  zp::RankInfo info;
  info.rank = gJob.rank;
  info.nranks = gJob.nranks;
  info.localRank = gJob.localRank;
  info.localSize = gJob.localSize;
  info.memory = zp::cudaDeviceName(gJob.device);
  std::vector<std::string> lines = bench.gatherLines(zp::rankLine(info));
  if (gJob.rank == 0) {
    std::printf("# nccl %d.%d.%d (loaded; built against %d.%d.%d) %s: nccl_coll_bench\n",
                version / 10000, version / 100 % 100, version % 100, NCCL_MAJOR, NCCL_MINOR,
                NCCL_PATCH, coll.name.c_str());
    std::printf("# nThread 1 nRanks %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
                "iters: %d validation: %d\n",
                gJob.nranks, opt.minBytes, opt.maxBytes,
                opt.stepFactor > 1 ? opt.stepFactor : opt.stepBytes,
                opt.stepFactor > 1 ? "factor" : "bytes", opt.warmup, opt.iters, int(opt.check));
    std::printf("# device buffers: cudaMalloc'd, calls on %s; time: host clock "
                "around %d enqueued calls + cudaStreamSynchronize\n",
                opt.streamNull ? "the default stream (-y 1)" : "a non-blocking stream", opt.iters);
    std::printf("#\n# Using ranks\n");
    for (const std::string& line : lines) std::printf("%s\n", line.c_str());
    std::printf("#\n");
    zp::printTableHeader(coll);
  }
  uint64_t wrong = 0;
  double busBwSum = 0;
  int measured = 0;
  for (size_t bytes : zp::sizeList(opt)) {
    zp::Row row = bench.runSize(bytes);
    for (const zp::Measurement& m : row.modes) {
      if (!m.ran) continue;
      wrong += m.wrong;
      busBwSum += m.busBw;
      ++measured;
    }
    if (gJob.rank == 0) zp::printRow(coll, opt, row);
  }
  if (gJob.rank == 0) zp::printSummary(wrong, measured ? busBwSum / measured : 0);
  ncclCheck(ncclCommDestroy(gJob.comm), "ncclCommDestroy");
  cudaCheck(cudaStreamDestroy(gJob.stream), "cudaStreamDestroy");
  return wrong ? 1 : 0;
}
