#include "base/params.h"

#include <cerrno>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "base/log.h"
#include "base/result.h"

namespace zcoll {

namespace {

// Keep sorted by subsystem; every ZCOLL_* variable the code reads must be here.
const std::vector<ParamDesc> kParams = {
    {"ZCOLL_DEBUG", ParamType::kString, "WARN",
     "Log level: NONE, WARN, INFO or TRACE, any case (an unknown one: WARN, and a warning). "
     "INFO's first line is zcoll's version and build."},
    {"ZCOLL_DEBUG_SUBSYS", ParamType::kString, "ALL",
     "Comma-separated subsystems to log (INIT,BOOTSTRAP,NET,COLL,TOPO,QUANT,P2P,CORE,ALL; any "
     "case; an unknown one is ignored, with a warning); a leading ^ excludes the listed ones."},
    {"ZCOLL_DEBUG_FILE", ParamType::kString, "",
     "Write logs to this file instead of stderr; %h expands to the hostname, %p to the pid."},
    {"ZCOLL_RECORDER_SIZE", ParamType::kInt, "64",
     "Operations each communicator's flight recorder keeps (the last ones, for zcoll_info "
     "--status and ZCOLL_DEBUG_DUMP; docs/FLIGHT_RECORDER.md); 0 records nothing. Read at init."},
    {"ZCOLL_DEBUG_DUMP", ParamType::kString, "",
     "Write each communicator's flight record as JSON to this file when it breaks (a timeout, "
     "a peer's failure, a revoke: on every failing rank), on zcollCommAbort and on "
     "ZCOLL_DEBUG_DUMP_SIGNAL; %h expands to the hostname, %p to the pid, "
     "%r to the rank, %c to the communicator's name, %i to its id. Without %r and %p, "
     ".rank<R> goes before the extension (with a warning); without %i, in a process with more "
     "than one communicator, .comm<ID> does (docs/FLIGHT_RECORDER.md). Empty: no dumps."},
    {"ZCOLL_DEBUG_DUMP_SIGNAL", ParamType::kString, "",
     "A signal (USR1 or USR2) that makes every communicator of the process dump its flight "
     "record to ZCOLL_DEBUG_DUMP. Empty: none (zcoll installs no handler)."},
    {"ZCOLL_STATUS", ParamType::kString, "on",
     "on: the process answers `zcoll_info --status` (an abstract unix socket, served by one "
     "thread that sleeps until asked) with the state of its communicators; off: it does not."},
    {"ZCOLL_TIMEOUT", ParamType::kInt, "300",
     "Seconds any wait (init, collective, p2p) may last before it fails with zcollTimeout."},
    {"ZCOLL_AUTH_TOKEN", ParamType::kString, "",
     "Secret shared by the ranks of a job initialized from the environment "
     "(zcollCommInitFromEnv): it keys the rendezvous, so no other process can join or disturb "
     "it. zcollrun sets a random one. Empty: the rendezvous is keyed by its address only."},
    {"ZCOLL_CHECK_CALLS", ParamType::kString, "off",
     "on: every collective first checks that all ranks made the same call (kind, count, dtype, "
     "op, root, quantization settings, host or device buffers, call number) and fails on every "
     "rank with zcollInvalidUsage naming the first difference; costs one small all-gather per call "
     "(perf/RESULTS.md). off: a mismatched call is undefined (it may hang until ZCOLL_TIMEOUT or "
     "give wrong results). Read at init; all ranks must use the same value."},
    {"ZCOLL_DEVICE_CALLS", ParamType::kString, "auto",
     "async: a call on device buffers returns once enqueued on its stream (NCCL's "
     "semantics; failures found later break the communicator, see zcollCommGetAsyncError); on "
     "CUDA its stream waits for work zcoll submits later, which CUDA allows to deadlock when "
     "streams share a hardware queue (not yet run on a GPU; a warning says so). "
     "sync: it returns once complete, its stream synchronized, with no wait queued on any "
     "stream. auto: sync on CUDA, async on a device that trusts queued calls (the tests' "
     "stand-in). stream: all-gather, reduce-scatter, all-reduce and the ZeRO++ calls (qwZ, hpZ, "
     "qgZ, the quantized all-reduce) on "
     "device buffers are "
     "submitted whole on the caller's stream at call time (copies, reduction kernels and stream "
     "memory writes/waits on flags that only peers' GPU work sets) and return once submitted, "
     "on a communicator whose ranks each have their own device or process, two or more per "
     "node, every pair of a node over cuda_ipc; they can be captured into CUDA graphs on one "
     "node; across nodes all-gather, qwZ, hpZ, reduce-scatter and all-reduce run so (a proxy thread "
     "that makes no CUDA call carries their bytes between nodes); every other device call, and "
     "every call of a "
     "communicator that does not qualify (logged at INFO), runs as with sync (not yet run on a "
     "GPU). Applies to zcollSend/zcollRecv and groups alike. Read at init; inherited by splits."},
    {"ZCOLL_REDUCE_PARTIALS", ParamType::kString, "fp32",
     "How ring reduce-scatter and all-reduce carry fp16/bf16 partial sums between ranks: fp32 "
     "(the sum is accumulated in fp32 and rounded once, like every other algorithm; the ring "
     "moves about twice the bytes) or dtype (rounded to the data type at every hop, as NCCL). "
     "Read at init; all ranks must use the same value."},
    {"ZCOLL_ABORT_WAIT_MS", ParamType::kInt, "3000",
     "Milliseconds zcollCommAbort waits for a call running in another thread to leave."},
    {"ZCOLL_SPIN_COUNT", ParamType::kInt, "-1",
     "Progress polls before a waiting rank sleeps until its transport has events (or yields the "
     "CPU). -1: 2000, or 0 when this machine runs more ranks of the communicator than the CPUs "
     "a rank may use (spinning would only take the CPU from the rank that has work; 4 ranks on "
     "2 cores: 2-3x faster small collectives). Read at init; splits inherit it."},
    {"ZCOLL_COMM_ID", ParamType::kString, "",
     "host:port of the rendezvous for zcollCommInitFromEnv (rank 0 listens there)."},
    {"ZCOLL_SOCKET_IFNAME", ParamType::kString, "",
     "Interfaces for the bootstrap socket, NCCL syntax: prefixes 'eth,ib', ^ to exclude, = for "
     "exact names. Empty: MASTER_ADDR's address when it is this machine's (zcollGetUniqueId's "
     "root), else the first up interface that is not loopback or docker, else lo."},
    {"ZCOLL_HOSTID", ParamType::kString, "",
     "Host identity override: ranks with equal values form one node (emulates several nodes on "
     "one machine). Empty: hostname + boot id + IPC namespace."},
    {"ZCOLL_TOPO_FILE", ParamType::kString, "",
     "hwloc XML file to use instead of discovering this machine's topology."},
    {"ZCOLL_NVLINK_FILE", ParamType::kString, "",
     "NVLinks between GPUs, by PCI bus id (\"<busid> <busid>\" or \"nvswitch <busid>...\" "
     "per line), instead of asking NVML: for topology files and machines without NVML."},
    {"ZCOLL_DEVICE_TRANSPORT", ParamType::kString, "",
     "How device bytes reach the ranks of this node: cuda_ipc (device to device; init fails for "
     "a node peer it cannot reach), staged (through pinned host memory and the host route, "
     "for every peer), or empty: cuda_ipc for every node peer whose device is within "
     "ZCOLL_CUDA_IPC_LEVEL and passes the init probe; for peers on ucx, ucx itself when both "
     "ranks' UCX carries CUDA memory (GPUDirect); staged for the rest. Read at init."},
    {"ZCOLL_CUDA_IPC_LEVEL", ParamType::kString, "PHB",
     "The farthest path between two GPUs of a node that cuda_ipc takes: NVL, PIX, PXB, PHB or "
     "SYS (NCCL's names; see zcoll_info --topology). Two ranks on one GPU always qualify. The "
     "default keeps peer copies off the CPU interconnect between packages, as NCCL does on "
     "Intel machines. Read at init."},
    {"ZCOLL_CUDA_IPC_USER_BUFFERS", ParamType::kInt, "0",
     "1: cuda_ipc peers read a sender's own device buffer (no copy; the buffer's allocation "
     "stays mapped in the peers until the communicator is destroyed, so it must not be freed "
     "before, as with NCCL's registered buffers), for calls that return complete "
     "(ZCOLL_DEVICE_CALLS=sync or auto on CUDA, or CUDA_DEVICE_MAX_CONNECTIONS=1) and while no "
     "queued call of "
     "the receiver's process holds a stream (mapping synchronizes the device); otherwise, and "
     "with 0, the sender copies into slots of zcoll's that peers mapped at init (one "
     "device-local copy; safe for any buffer). Read at init."},
    {"ZCOLL_DEVICE_WINDOW_BYTES", ParamType::kInt, "33554432",
     "Bytes of device memory each rank with cuda_ipc peers allocates at init as its window: "
     "zcoll's own memory that its node peers map once and read in place (qgZ's "
     "two_hop_shm_read on device buffers keeps its quantized pieces there, when a call's two "
     "pieces fit the smallest window of the node; else it exchanges them). 0: none. Read at "
     "init."},
    {"ZCOLL_TRANSPORT", ParamType::kString, "",
     "Force the transport for every non-self peer: shm (shared memory; every peer must be on "
     "this node) or ucx. Empty: shm for peers on this node when both processes can share "
     "memory (same user, pidfd_getfd and process_vm_readv permitted), ucx for the rest. Read "
     "at init; `zcoll_info --routes` shows the choice per peer."},
    {"ZCOLL_QUANT_ISA", ParamType::kString, "",
     "Force the CPU quantization kernels' instruction set (scalar, avx2, avx512) for every "
     "operation. Empty: per operation, the fastest vector variant this CPU supports, measured "
     "once at first use (a few ms; zcoll_info prints the choice)."},
    // Read by libzcoll_nccl.so (nccl/, docs/NCCL.md), NCCL's API over zcoll; listed here so
    // zcoll_info and docs/ENVIRONMENT.md show them with the rest.
    {"ZCOLL_NCCL_FALLBACK", ParamType::kString, "",
     "libzcoll_nccl.so: path to a real libnccl.so.2. Loaded once per process (dlopen "
     "RTLD_LOCAL|RTLD_DEEPBIND); every communicator makes one of its own on it at init (rank 0 "
     "makes its unique id, zcoll broadcasts it; set it on every rank or none), and calls zcoll "
     "cannot serve (reductions of FP8 types) go there. Empty: they fail with ncclInvalidUsage "
     "naming the call."},
    {"ZCOLL_NCCL_QUANTIZE", ParamType::kString, "",
     "libzcoll_nccl.so: quantize unmodified NCCL calls (opt-in): a comma-separated list of "
     "allgather:int8|int4 (qwZ), reducescatter:int8|int4 (qgZ, both hops), allreduce:int8|int4 "
     "(zcoll's quantized all-reduce) and min=BYTES (per-rank send bytes below which calls stay "
     "exact). Only Float32/Float16/Bfloat16 data and Sum/Avg reductions; read once per process, "
     "logged once at INFO; a value it cannot parse fails init with ncclInvalidArgument."},
};

std::mutex gSourcesMu;
std::vector<ParamSource>& sources() {
  static auto* s = new std::vector<ParamSource>();  // never destroyed: usable at exit
  return *s;
}

// kParams followed by the rows of every registered source, each source called once.
const std::vector<ParamDesc>& tableWithSources() {
  static auto* all = new std::vector<ParamDesc>(kParams);
  static size_t applied = 0;
  std::lock_guard<std::mutex> lock(gSourcesMu);
  for (; applied < sources().size(); ++applied) {
    std::vector<ParamDesc> rows = sources()[applied]();
    all->insert(all->end(), rows.begin(), rows.end());
  }
  return *all;
}

const ParamDesc& findParam(const char* name) {
  for (const ParamDesc& p : tableWithSources()) {
    if (std::strcmp(p.name, name) == 0) return p;
  }
  std::fprintf(stderr, "zcoll: internal error: parameter %s is not in the table\n", name);
  std::abort();
}

}  // namespace

void registerParamSource(ParamSource source) {
  std::lock_guard<std::mutex> lock(gSourcesMu);
  sources().push_back(source);
}

const std::vector<ParamDesc>& allParams() { return tableWithSources(); }

namespace {

// The environment's value of `name`, or NULL when unset or empty.
const char* envValue(const char* name) {
  const char* env = std::getenv(name);
  return env != nullptr && *env != '\0' ? env : nullptr;
}

bool parseInt(const char* text, int64_t* out) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 0);
  if (end == text || *end != '\0' || errno != 0) return false;
  *out = v;
  return true;
}

}  // namespace

int64_t paramInt(const char* name) {
  const ParamDesc& p = findParam(name);
  int64_t v = 0;
  if (const char* env = envValue(name)) {
    if (parseInt(env, &v)) return v;
    ZCOLL_WARN(LogSubsys::kCore, "ignoring %s=%s: not an integer, using default %s", name, env,
               p.defaultValue);
  }
  return std::strtoll(p.defaultValue, nullptr, 0);
}

std::string paramString(const char* name) {
  const ParamDesc& p = findParam(name);
  if (const char* env = envValue(name)) return env;
  return p.defaultValue;
}

zcollResult_t checkParamValues() {
  for (const ParamDesc& p : kParams) {
    if (p.type != ParamType::kInt) continue;
    const char* env = envValue(p.name);
    int64_t v = 0;
    if (env != nullptr && !parseInt(env, &v))
      return fail(zcollInvalidArgument, "%s=%s is not an integer; %s takes an integer (default "
                  "%s, or leave it unset): %s", p.name, env, p.name, p.defaultValue,
                  p.description);
  }
  // String parameters read outside init's settings.
  struct Choice {
    const char* name;
    std::vector<std::string> values;
    const char* says;
  };
  for (const Choice& c : {Choice{"ZCOLL_STATUS", {"on", "off"}, "use on or off"},
                          Choice{"ZCOLL_DEBUG_DUMP_SIGNAL", {"USR1", "USR2", "SIGUSR1", "SIGUSR2"},
                                 "use USR1 or USR2, or leave it unset"}}) {
    const char* env = envValue(c.name);
    if (env != nullptr && std::find(c.values.begin(), c.values.end(), env) == c.values.end())
      return fail(zcollInvalidArgument, "%s=%s: %s", c.name, env, c.says);
  }
  // Every wait is bounded by it: 0 or less would end the rendezvous at once (and leave the
  // ranks that come to it waiting), more than an int's seconds would wrap.
  const int64_t timeout = paramInt("ZCOLL_TIMEOUT");
  if (timeout < 1 || timeout > INT32_MAX)
    return fail(zcollInvalidArgument, "ZCOLL_TIMEOUT=%lld is out of range: whole seconds from 1 "
                "to %d (default %s, or leave it unset)", static_cast<long long>(timeout),
                INT32_MAX, findParam("ZCOLL_TIMEOUT").defaultValue);
  return zcollSuccess;
}

}  // namespace zcoll
