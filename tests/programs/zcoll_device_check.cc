// A rank program for tests/scripts/device_processes.sh: ranks are separate processes started by
// tools/zcollrun, sharing the machine's GPU(s), so device bytes between the ranks of a node cross
// real CUDA IPC between processes (the cuda_ipc transport) and bytes to other (emulated) nodes are
// staged through host memory. Links the public library and the CUDA runtime only.
//
//   zcoll_device_check                every collective of zcoll.h, the ZeRO++ ones and send/recv
//                                     in a group, on cudaMalloc'd buffers and a non-blocking
//                                     stream, in and out of place, for 1000 and 70000 elements per
//                                     rank; each against the same call on host buffers with the
//                                     same inputs: the bytes must be identical (same algorithm,
//                                     same inputs). One line per check: "rank R NAME: ok" or
//                                     "rank R NAME: MISMATCH at byte I ...".
//   zcoll_device_check --kill-rank K  after a barrier rank K leaves (exits without destroying its
//                                     comm) while the others enter a 64 MiB device all-reduce: each
//                                     of them must see a failure, from the call or from
//                                     zcollCommGetAsyncError once the stream is done, within
//                                     ZCOLL_TIMEOUT, and get its stream back. Rank K exits 0:
//                                     zcollrun terminates every rank as soon as one exits non-zero.
//   --host-only                       host buffers in place of the device ones (checks the calls of
//                                     this program itself on a machine without a GPU)
//   --graph                           each device call is captured into a CUDA graph
//                                     (cudaStreamBeginCapture, thread-local mode) and the graph
//                                     launched twice, the inputs uploaded again before the second
//                                     launch, whose bytes must equal the host's; a call zcoll
//                                     refuses to capture (zcollInvalidUsage: not stream-triggered)
//                                     prints "not captured" and is counted apart, not a failure
//                                     (run with ZCOLL_DEVICE_CALLS=stream)
//   --windows                         every device buffer of a check is registered as a window of
//                                     the comm (zcollCommWindowRegister, every rank alike) before
//                                     the device call and deregistered after it, so the algorithms
//                                     that read their peers in place read them over CUDA IPC
//
// The device is chosen before init (LOCAL_RANK % device count), since init describes the current
// device to the peers. Without a CUDA device every rank prints "SKIP: no CUDA device" and exits
// 77 before init, so all of them skip.
// Exit codes: 0 ok, 1 a mismatch or an error, 2 usage, 77 no CUDA device.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "zcoll/zcoll.h"

namespace {

using Bytes = std::vector<unsigned char>;
using Ptrs = std::vector<unsigned char*>;
// One collective call on buffers p (NULL for an empty buffer) and a stream (NULL: host buffers).
using Call = std::function<zcollResult_t(const Ptrs& p, zcollStream_t stream)>;
using Clock = std::chrono::steady_clock;

struct Ctx {
  zcollComm_t comm = nullptr;
  int rank = 0;
  int nranks = 1;
  bool device = true;  // false: --host-only
  bool windows = false;  // --windows
  bool graph = false;    // --graph
  int notCaptured = 0;   // --graph: calls zcoll refused to capture
  cudaStream_t stream = nullptr;
  uint64_t seq = 0;     // seeds the inputs
  int checks = 0;
  int failures = 0;
  bool broken = false;  // the comm is in its error state: the remaining checks cannot run
};

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

bool cudaOk(Ctx& c, cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return true;
  std::printf("rank %d %s: CUDA error %s: %s\n", c.rank, what.c_str(), cudaGetErrorName(e),
              cudaGetErrorString(e));
  ++c.failures;
  return false;
}

// Prints a failed call with the comm's message; notes a comm left in its error state.
void reportFailure(Ctx& c, const std::string& what, zcollResult_t r) {
  std::printf("rank %d %s: error %d (%s): %s\n", c.rank, what.c_str(), static_cast<int>(r),
              zcollGetErrorString(r), zcollGetLastError(c.comm));
  ++c.failures;
  zcollResult_t async = zcollSuccess;
  if (zcollCommGetAsyncError(c.comm, &async) == zcollSuccess && async != zcollSuccess)
    c.broken = true;
}

// ---- Inputs, seeded from the rank and the check -------------------------------------------------

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

size_t elemSize(zcollDataType_t t) {
  switch (t) {
    case zcollInt8:
    case zcollUint8: return 1;
    case zcollFloat16:
    case zcollBfloat16: return 2;
    case zcollInt64:
    case zcollUint64:
    case zcollFloat64: return 8;
    default: return 4;
  }
}

// Finite values of every float type, written bit by bit: sign, an exponent in [-6, 5] (so sums
// and averages over a few ranks stay far from overflow) and a random mantissa, so every value is
// exact in its type. Int32: values in [-10^6, 10^6].
Bytes inputs(Ctx& c, zcollDataType_t t, size_t elems) {
  const uint64_t seed = mix((static_cast<uint64_t>(c.rank) << 40) ^ ++c.seq);
  Bytes b(elems * elemSize(t));
  for (size_t i = 0; i < elems; ++i) {
    const uint64_t h = mix(seed + i);
    const uint32_t sign = static_cast<uint32_t>(h & 1);
    const int e = static_cast<int>((h >> 1) % 12) - 6;
    const uint32_t m = static_cast<uint32_t>(h >> 8);
    unsigned char* dst = b.data() + i * elemSize(t);
    if (t == zcollFloat32) {
      const uint32_t bits = sign << 31 | static_cast<uint32_t>(e + 127) << 23 | (m & 0x7fffff);
      std::memcpy(dst, &bits, 4);
    } else if (t == zcollBfloat16) {
      const uint16_t bits =
          static_cast<uint16_t>(sign << 15 | static_cast<uint32_t>(e + 127) << 7 | (m & 0x7f));
      std::memcpy(dst, &bits, 2);
    } else if (t == zcollFloat16) {
      const uint16_t bits =
          static_cast<uint16_t>(sign << 15 | static_cast<uint32_t>(e + 15) << 10 | (m & 0x3ff));
      std::memcpy(dst, &bits, 2);
    } else {  // zcollInt32
      const int32_t v = static_cast<int32_t>(m % 2000001u) - 1000000;
      std::memcpy(dst, &v, 4);
    }
  }
  return b;
}

// An output buffer's first contents: seeded noise, the same on both sides, so bytes a call must
// leave alone are compared too.
Bytes noise(Ctx& c, zcollDataType_t t, size_t elems) {
  const uint64_t seed = mix((static_cast<uint64_t>(c.rank) << 40) ^ ++c.seq ^ 0x5a5a);
  Bytes b(elems * elemSize(t));
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<unsigned char>(mix(seed + i) >> 56);
  return b;
}

// ---- One check: the call on host buffers, then on device buffers, byte for byte -----------------

Ptrs hostPointers(std::vector<Bytes>& bufs) {
  Ptrs p;
  for (Bytes& b : bufs) p.push_back(b.empty() ? nullptr : b.data());
  return p;
}

// Runs `call` on device copies of `init` (on c.stream) and downloads them into *out. False when
// it failed (reported).
// --graph: `call` captured into a CUDA graph on c.stream, the graph launched, the inputs
// uploaded again and the graph launched a second time (its bytes are the check's). A call zcoll
// refuses under capture (zcollInvalidUsage, nothing recorded) sets *refused and is reported as
// not captured.
zcollResult_t callInGraph(Ctx& c, const std::string& name, const std::vector<Bytes>& init,
                          const Ptrs& p, const Call& call, bool* refused) {
  *refused = false;
  if (!cudaOk(c, cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal),
              name + " cudaStreamBeginCapture"))
    return zcollCudaError;
  zcollResult_t r = call(p, reinterpret_cast<zcollStream_t>(c.stream));
  std::string message = r != zcollSuccess ? zcollGetLastError(c.comm) : "";
  cudaGraph_t graph = nullptr;
  const bool ended = cudaOk(c, cudaStreamEndCapture(c.stream, &graph), name + " cudaStreamEndCapture");
  if (r == zcollInvalidUsage && message.find("captured into a CUDA graph") != std::string::npos) {
    std::printf("rank %d %s: not captured (%s)\n", c.rank, name.c_str(), message.c_str());
    ++c.notCaptured;
    *refused = true;
  }
  if (r != zcollSuccess || !ended) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    return ended ? r : zcollCudaError;
  }
  cudaGraphExec_t exec = nullptr;
  bool ok = cudaOk(c, cudaGraphInstantiate(&exec, graph, 0), name + " cudaGraphInstantiate");
  ok = ok && cudaOk(c, cudaGraphLaunch(exec, c.stream), name + " cudaGraphLaunch (1)");
  for (size_t i = 0; i < init.size() && ok; ++i)
    if (!init[i].empty())
      ok = cudaOk(c, cudaMemcpyAsync(p[i], init[i].data(), init[i].size(),
                                     cudaMemcpyHostToDevice, c.stream),
                  name + " upload (second launch)");
  ok = ok && cudaOk(c, cudaGraphLaunch(exec, c.stream), name + " cudaGraphLaunch (2)");
  ok = cudaOk(c, cudaStreamSynchronize(c.stream), name + " cudaStreamSynchronize") && ok;
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return ok ? zcollSuccess : zcollCudaError;
}

bool runOnDevice(Ctx& c, const std::string& name, const std::vector<Bytes>& init, const Call& call,
                 std::vector<Bytes>* out) {
  if (!c.device) {  // --host-only: a second run on host buffers
    *out = init;
    Ptrs p = hostPointers(*out);
    zcollResult_t r = call(p, nullptr);
    if (r != zcollSuccess) reportFailure(c, name + " (second host run)", r);
    return r == zcollSuccess;
  }
  Ptrs p(init.size(), nullptr);
  bool ok = true;
  for (size_t i = 0; i < init.size() && ok; ++i) {
    if (init[i].empty()) continue;
    void* d = nullptr;
    ok = cudaOk(c, cudaMalloc(&d, init[i].size()), name + " cudaMalloc");
    p[i] = static_cast<unsigned char*>(d);
    ok = ok && cudaOk(c, cudaMemcpyAsync(d, init[i].data(), init[i].size(),
                                         cudaMemcpyHostToDevice, c.stream),
                      name + " upload");
  }
  std::vector<zcollWindow_t> windows;
  for (size_t i = 0; i < init.size() && ok && c.windows; ++i) {
    if (init[i].empty()) continue;
    windows.emplace_back();
    zcollResult_t r = zcollCommWindowRegister(c.comm, p[i], init[i].size(), &windows.back(),
                                              ZCOLL_WIN_DEFAULT);
    if (r != zcollSuccess) {
      reportFailure(c, name + " (window)", r);
      windows.pop_back();
      ok = false;
    }
  }
  bool refused = false;
  if (ok) {
    zcollResult_t r = c.graph ? callInGraph(c, name, init, p, call, &refused)
                              : call(p, reinterpret_cast<zcollStream_t>(c.stream));
    if (refused) {
      ok = false;
    } else if (r != zcollSuccess) {
      reportFailure(c, name + " (device call)", r);
      ok = false;
    }
    // A device call returns once enqueued: its result is known once the stream has run it.
    ok = cudaOk(c, cudaStreamSynchronize(c.stream), name + " cudaStreamSynchronize") && ok;
    zcollResult_t async = zcollSuccess;
    zcollCommGetAsyncError(c.comm, &async);
    if (ok && async != zcollSuccess) {
      reportFailure(c, name + " (device call, found after it ran)", async);
      ok = false;
    }
  }
  if (ok) {
    out->assign(init.size(), Bytes());
    for (size_t i = 0; i < init.size() && ok; ++i) {
      if (init[i].empty()) continue;
      (*out)[i].resize(init[i].size());
      ok = cudaOk(c, cudaMemcpyAsync((*out)[i].data(), p[i], init[i].size(),
                                     cudaMemcpyDeviceToHost, c.stream),
                  name + " download");
    }
    ok = cudaOk(c, cudaStreamSynchronize(c.stream), name + " cudaStreamSynchronize") && ok;
  }
  for (zcollWindow_t w : windows) {
    zcollResult_t r = zcollCommWindowDeregister(c.comm, w);
    if (r != zcollSuccess) {
      reportFailure(c, name + " (window deregister)", r);
      ok = false;
    }
  }
  for (unsigned char* d : p)
    if (d != nullptr) cudaOk(c, cudaFree(d), name + " cudaFree");
  return ok;
}

void check(Ctx& c, const std::string& name, const std::vector<Bytes>& init, const Call& call) {
  if (c.broken) return;
  ++c.checks;
  std::vector<Bytes> host = init;
  zcollResult_t r = call(hostPointers(host), nullptr);
  if (r != zcollSuccess) {
    reportFailure(c, name + " (host call)", r);
    return;
  }
  std::vector<Bytes> dev;
  if (!runOnDevice(c, name, init, call, &dev)) return;
  for (size_t b = 0; b < host.size(); ++b) {
    for (size_t i = 0; i < host[b].size(); ++i) {
      if (host[b][i] == dev[b][i]) continue;
      std::printf("rank %d %s: MISMATCH at byte %zu of buffer %zu (host 0x%02x, %s 0x%02x)\n",
                  c.rank, name.c_str(), i, b, host[b][i], c.device ? "device" : "second run",
                  dev[b][i]);
      ++c.failures;
      return;
    }
  }
  std::printf("rank %d %s: ok\n", c.rank, name.c_str());
}

// ---- Every collective ---------------------------------------------------------------------------

void everyCollective(Ctx& c, size_t n) {
  const zcollComm_t comm = c.comm;
  const int w = c.nranks, me = c.rank;
  const auto f32 = zcollFloat32, bf = zcollBfloat16, f16 = zcollFloat16;
  const size_t W = static_cast<size_t>(w), r = static_cast<size_t>(me);
  const std::string at = " n=" + std::to_string(n);
  auto in = [&](zcollDataType_t t, size_t elems) { return inputs(c, t, elems); };
  auto out = [&](zcollDataType_t t, size_t elems) { return noise(c, t, elems); };
  const Bytes none;
  // Byte offset of element `elems` of type t (the in-place layouts).
  auto off = [](zcollDataType_t t, size_t elems) { return elems * elemSize(t); };

  // All-gather: in place when send == recv + rank*count.
  check(c, "all-gather fp32" + at, {in(f32, n), out(f32, W * n)}, [&](const Ptrs& p, auto s) {
    return zcollAllGather(p[0], p[1], n, f32, comm, s);
  });
  check(c, "all-gather bf16 in place" + at, {in(bf, W * n)}, [&](const Ptrs& p, auto s) {
    return zcollAllGather(p[0] + off(bf, r * n), p[0], n, bf, comm, s);
  });

  // Reduce-scatter: in place when recv == send + rank*recvcount.
  check(c, "reduce-scatter fp32 sum" + at, {in(f32, W * n), out(f32, n)},
        [&](const Ptrs& p, auto s) {
          return zcollReduceScatter(p[0], p[1], n, f32, zcollSum, comm, s);
        });
  check(c, "reduce-scatter bf16 sum in place" + at, {in(bf, W * n)}, [&](const Ptrs& p, auto s) {
    return zcollReduceScatter(p[0], p[0] + off(bf, r * n), n, bf, zcollSum, comm, s);
  });

  // All-reduce.
  check(c, "all-reduce fp32 sum" + at, {in(f32, n), out(f32, n)}, [&](const Ptrs& p, auto s) {
    return zcollAllReduce(p[0], p[1], n, f32, zcollSum, comm, s);
  });
  check(c, "all-reduce bf16 avg" + at, {in(bf, n), out(bf, n)}, [&](const Ptrs& p, auto s) {
    return zcollAllReduce(p[0], p[1], n, bf, zcollAvg, comm, s);
  });
  check(c, "all-reduce fp16 max" + at, {in(f16, n), out(f16, n)}, [&](const Ptrs& p, auto s) {
    return zcollAllReduce(p[0], p[1], n, f16, zcollMax, comm, s);
  });
  check(c, "all-reduce int32 min" + at, {in(zcollInt32, n), out(zcollInt32, n)},
        [&](const Ptrs& p, auto s) {
          return zcollAllReduce(p[0], p[1], n, zcollInt32, zcollMin, comm, s);
        });
  check(c, "all-reduce fp32 sum in place" + at, {in(f32, n)}, [&](const Ptrs& p, auto s) {
    return zcollAllReduce(p[0], p[0], n, f32, zcollSum, comm, s);
  });

  // All-to-all (never in place).
  check(c, "all-to-all fp32" + at, {in(f32, W * n), out(f32, W * n)}, [&](const Ptrs& p, auto s) {
    return zcollAllToAll(p[0], p[1], n, f32, comm, s);
  });

  // All-to-all-v: a different count for every pair (none a multiple of 256), send blocks in
  // peer order with gaps, receive blocks in reverse peer order with gaps.
  {
    auto pairCount = [&](int from, int to) {
      return n + 13 * static_cast<size_t>(from) + 7 * static_cast<size_t>(to);
    };
    std::vector<size_t> sc(W), sd(W), rc(W), rd(W);
    size_t sendSpan = 0, recvSpan = 0;
    for (int p = 0; p < w; ++p) {
      sc[p] = pairCount(me, p);
      sd[p] = sendSpan;
      sendSpan += sc[p] + 3;
    }
    for (int p = w - 1; p >= 0; --p) {
      rc[p] = pairCount(p, me);
      rd[p] = recvSpan;
      recvSpan += rc[p] + 5;
    }
    check(c, "all-to-all-v fp32" + at, {in(f32, sendSpan), out(f32, recvSpan)},
          [&](const Ptrs& p, auto s) {
            return zcollAllToAllv(p[0], sc.data(), sd.data(), p[1], rc.data(), rd.data(), f32,
                                  comm, s);
          });
  }

  // Broadcast: sendbuff is read on the root only (NULL elsewhere); in place when equal.
  {
    const int root = 1 % w;
    check(c, "broadcast fp32 root " + std::to_string(root) + at,
          {me == root ? in(f32, n) : none, out(f32, n)}, [&](const Ptrs& p, auto s) {
            return zcollBroadcast(p[0], p[1], n, f32, root, comm, s);
          });
    check(c, "broadcast bf16 in place root 0" + at, {in(bf, n)}, [&](const Ptrs& p, auto s) {
      return zcollBroadcast(p[0], p[0], n, bf, 0, comm, s);
    });
  }

  // Reduce: recvbuff is written on the root only (NULL elsewhere); in place when equal.
  {
    const int root = w - 1;
    check(c, "reduce fp32 sum root " + std::to_string(root) + at,
          {in(f32, n), me == root ? out(f32, n) : none}, [&](const Ptrs& p, auto s) {
            return zcollReduce(p[0], p[1], n, f32, zcollSum, root, comm, s);
          });
    check(c, "reduce bf16 max in place root 0" + at, {in(bf, n)}, [&](const Ptrs& p, auto s) {
      return zcollReduce(p[0], p[0], n, bf, zcollMax, 0, comm, s);
    });
  }

  // Gather: in place on the root when send == recv + root*sendcount; recvbuff NULL elsewhere.
  {
    const int root = 1 % w, rootIn = w - 1;
    check(c, "gather fp32 root " + std::to_string(root) + at, {in(f32, n), out(f32, W * n)},
          [&](const Ptrs& p, auto s) { return zcollGather(p[0], p[1], n, f32, root, comm, s); });
    check(c, "gather bf16 in place root " + std::to_string(rootIn) + at,
          {me == rootIn ? in(bf, W * n) : in(bf, n)}, [&](const Ptrs& p, auto s) {
            if (me == rootIn)
              return zcollGather(p[0] + off(bf, r * n), p[0], n, bf, rootIn, comm, s);
            return zcollGather(p[0], nullptr, n, bf, rootIn, comm, s);
          });
  }

  // Scatter: in place on the root when recv == send + root*recvcount; sendbuff NULL elsewhere.
  {
    const int root = 0, rootIn = w - 1;
    check(c, "scatter fp32 root 0" + at, {me == root ? in(f32, W * n) : none, out(f32, n)},
          [&](const Ptrs& p, auto s) { return zcollScatter(p[0], p[1], n, f32, root, comm, s); });
    check(c, "scatter bf16 in place root " + std::to_string(rootIn) + at,
          {me == rootIn ? in(bf, W * n) : out(bf, n)}, [&](const Ptrs& p, auto s) {
            if (me == rootIn)
              return zcollScatter(p[0], p[0] + off(bf, r * n), n, bf, rootIn, comm, s);
            return zcollScatter(nullptr, p[0], n, bf, rootIn, comm, s);
          });
  }

  // Send/recv: a ring both ways in one group (with 2 ranks both directions reach the one peer).
  {
    const int next = (me + 1) % w, prev = (me + w - 1) % w;
    check(c, "send/recv ring in a group fp32" + at, {in(f32, n), out(f32, 2 * n)},
          [&](const Ptrs& p, auto s) {
            zcollResult_t first = zcollGroupStart();
            if (first != zcollSuccess) return first;
            const zcollResult_t rs[] = {zcollSend(p[0], n, f32, next, comm, s),
                                        zcollRecv(p[1], n, f32, prev, comm, s),
                                        zcollSend(p[0], n, f32, prev, comm, s),
                                        zcollRecv(p[1] + off(f32, n), n, f32, next, comm, s)};
            for (zcollResult_t x : rs)
              if (first == zcollSuccess) first = x;
            const zcollResult_t end = zcollGroupEnd();
            return first != zcollSuccess ? first : end;
          });
  }

  // qwZ: INT8 (default block) and INT4 (block 128, asymmetric), out of and in place; INT8 with
  // stochastic rounding (a function of the input and the seed only).
  zcollQuantConfig_t q8 = ZCOLL_QUANT_CONFIG_INITIALIZER;
  q8.bits = 8;
  zcollQuantConfig_t q4 = ZCOLL_QUANT_CONFIG_INITIALIZER;
  q4.bits = 4;
  q4.blockSize = 128;
  q4.mode = zcollQuantAsymmetric;
  zcollQuantConfig_t q8s = ZCOLL_QUANT_CONFIG_INITIALIZER;
  q8s.bits = 8;
  q8s.rounding = zcollRoundStochastic;
  q8s.seed = 12345;
  check(c, "qwZ INT8 bf16" + at, {in(bf, n), out(bf, W * n)}, [&](const Ptrs& p, auto s) {
    return zcollQuantizedAllGather(p[0], p[1], n, bf, &q8, comm, s);
  });
  check(c, "qwZ INT8 bf16 in place" + at, {in(bf, W * n)}, [&](const Ptrs& p, auto s) {
    return zcollQuantizedAllGather(p[0] + off(bf, r * n), p[0], n, bf, &q8, comm, s);
  });
  check(c, "qwZ INT4 fp32" + at, {in(f32, n), out(f32, W * n)}, [&](const Ptrs& p, auto s) {
    return zcollQuantizedAllGather(p[0], p[1], n, f32, &q4, comm, s);
  });
  check(c, "qwZ INT4 fp32 in place" + at, {in(f32, W * n)}, [&](const Ptrs& p, auto s) {
    return zcollQuantizedAllGather(p[0] + off(f32, r * n), p[0], n, f32, &q4, comm, s);
  });
  check(c, "qwZ INT8 fp16 stochastic" + at, {in(f16, n), out(f16, W * n)},
        [&](const Ptrs& p, auto s) {
          return zcollQuantizedAllGather(p[0], p[1], n, f16, &q8s, comm, s);
        });

  // hpZ: the forward call (INT8 rail) fills the secondary shard, the backward call gathers from
  // it; then exact and in place.
  size_t sec = 0;
  if (zcollSecondaryShardCount(comm, n, &sec) != zcollSuccess) {
    reportFailure(c, "zcollSecondaryShardCount" + at, zcollInternalError);
    return;
  }
  check(c, "hpZ INT8 bf16 forward + backward" + at,
        {in(bf, n), out(bf, W * n), out(bf, sec), out(bf, W * n)}, [&](const Ptrs& p, auto s) {
          zcollResult_t res = zcollAllGatherHier(p[0], p[1], p[2], n, bf, &q8, comm, s);
          if (res != zcollSuccess) return res;
          return zcollAllGatherFromSecondary(p[2], p[3], n, bf, comm, s);
        });
  check(c, "hpZ exact fp32 in place + backward" + at,
        {in(f32, W * n), out(f32, sec), out(f32, W * n)}, [&](const Ptrs& p, auto s) {
          zcollResult_t res =
              zcollAllGatherHier(p[0] + off(f32, r * n), p[0], p[1], n, f32, nullptr, comm, s);
          if (res != zcollSuccess) return res;
          return zcollAllGatherFromSecondary(p[1], p[2], n, f32, comm, s);
        });

  // qgZ: INT4 on both hops, sum out of place, avg in place (two pipeline pieces).
  zcollQuantConfig_t g4 = ZCOLL_QUANT_CONFIG_INITIALIZER;
  g4.bits = 4;
  g4.intraBits = 4;
  zcollQuantConfig_t g4p = g4;
  g4p.pipelineDepth = 2;
  check(c, "qgZ INT4 fp32 sum" + at, {in(f32, W * n), out(f32, n)}, [&](const Ptrs& p, auto s) {
    return zcollQuantizedReduceScatter(p[0], p[1], n, f32, zcollSum, &g4, comm, s);
  });
  check(c, "qgZ INT4 bf16 avg in place, 2 pieces" + at, {in(bf, W * n)},
        [&](const Ptrs& p, auto s) {
          return zcollQuantizedReduceScatter(p[0], p[0] + off(bf, r * n), n, bf, zcollAvg, &g4p,
                                             comm, s);
        });

  // The quantized all-reduce of W*n + 1 elements (W chunks and a tail; exact below 256 KiB):
  // INT8 in place; INT4 with error feedback, the residuals (zeros at first) compared too.
  const size_t qn = W * n + 1;
  check(c, "quantized all-reduce INT8 fp32 sum in place" + at, {in(f32, qn)},
        [&](const Ptrs& p, auto s) {
          return zcollQuantizedAllReduce(p[0], p[0], qn, f32, zcollSum, &q8, comm, s);
        });
  size_t resBytes = 0;
  if (zcollQuantizedAllReduceResidualSize(qn, bf, &g4, comm, &resBytes) != zcollSuccess) {
    reportFailure(c, "zcollQuantizedAllReduceResidualSize" + at, zcollInternalError);
    return;
  }
  check(c, "quantized all-reduce INT4 bf16 avg with residuals" + at,
        {in(bf, qn), out(bf, qn), Bytes(resBytes, 0)}, [&](const Ptrs& p, auto s) {
          return zcollQuantizedAllReduceWithResidual(p[0], p[1], qn, bf, zcollAvg, &g4, p[2],
                                                     resBytes, comm, s);
        });
}

// ---- A peer that leaves -------------------------------------------------------------------------

int timeoutSeconds() {
  const char* v = std::getenv("ZCOLL_TIMEOUT");
  const int t = v != nullptr ? std::atoi(v) : 0;
  return t > 0 ? t : 300;
}

// Rank `victim` exits after a barrier; the others must see a failure of their 64 MiB all-reduce
// within ZCOLL_TIMEOUT (slack: 2 s of polling) and get their stream back.
int killCase(Ctx& c, int victim) {
  const size_t elems = size_t{16} << 20;  // 64 MiB of fp32
  const size_t bytes = elems * 4;
  const int timeout = timeoutSeconds();
  const double limit = timeout + 2.0;
  void* send = nullptr;
  void* recv = nullptr;
  Bytes hostSend, hostRecv;
  if (c.device) {
    if (!cudaOk(c, cudaMalloc(&send, bytes), "cudaMalloc") ||
        !cudaOk(c, cudaMalloc(&recv, bytes), "cudaMalloc") ||
        !cudaOk(c, cudaMemsetAsync(send, 0, bytes, c.stream), "cudaMemsetAsync") ||
        !cudaOk(c, cudaStreamSynchronize(c.stream), "cudaStreamSynchronize"))
      return 1;
  } else {
    hostSend.assign(bytes, 0);
    hostRecv.assign(bytes, 0);
    send = hostSend.data();
    recv = hostRecv.data();
  }
  const zcollStream_t stream = c.device ? reinterpret_cast<zcollStream_t>(c.stream) : nullptr;
  // Every rank is connected and has run a device call before the victim leaves.
  zcollResult_t r = zcollAllReduce(send, recv, 1000, zcollFloat32, zcollSum, c.comm, stream);
  if (r == zcollSuccess && c.device) {
    if (!cudaOk(c, cudaStreamSynchronize(c.stream), "warm-up cudaStreamSynchronize")) return 1;
    zcollCommGetAsyncError(c.comm, &r);
  }
  if (r == zcollSuccess) r = zcollBarrier(c.comm, nullptr);
  if (r != zcollSuccess) {
    reportFailure(c, "warm-up before the kill", r);
    return 1;
  }
  if (c.rank == victim) {
    std::printf("rank %d leaves before the all-reduce, without destroying its comm\n", c.rank);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the barrier settles
    _exit(0);  // 0: zcollrun would terminate the other ranks at once on a non-zero exit
  }
  const Clock::time_point start = Clock::now();
  zcollResult_t seen = zcollAllReduce(send, recv, elems, zcollFloat32, zcollSum, c.comm, stream);
  bool streamDone = !c.device;
  // A device call returns once enqueued: the failure surfaces later, in the comm's state.
  while (seen == zcollSuccess && !streamDone && secondsSince(start) < limit) {
    zcollCommGetAsyncError(c.comm, &seen);
    if (seen != zcollSuccess) break;
    const cudaError_t q = cudaStreamQuery(c.stream);
    if (q == cudaSuccess) {
      streamDone = true;
      zcollCommGetAsyncError(c.comm, &seen);  // the stream is released after the comm broke
    } else if (q != cudaErrorNotReady) {
      cudaOk(c, q, "cudaStreamQuery");
      return 1;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  const double took = secondsSince(start);
  if (seen == zcollSuccess) {
    std::printf("rank %d did not see the dead peer: the all-reduce %s after %.1f s\n", c.rank,
                streamDone ? "completed" : "was still running", took);
    return 1;
  }
  std::printf("rank %d saw the dead peer: %s: %s (after %.2f s)\n", c.rank,
              zcollGetErrorString(seen), zcollGetLastError(c.comm), took);
  int code = 0;
  if (took > limit) {
    std::printf("rank %d: that is later than ZCOLL_TIMEOUT=%d s\n", c.rank, timeout);
    code = 1;
  }
  // The stream is released once the comm broke.
  while (!streamDone && secondsSince(start) < limit + timeout) {
    const cudaError_t q = cudaStreamQuery(c.stream);
    if (q == cudaSuccess) {
      streamDone = true;
    } else if (q != cudaErrorNotReady) {
      cudaOk(c, q, "cudaStreamQuery");
      return 1;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  if (!streamDone) {
    std::printf("rank %d: the stream is still held %.1f s after the failure\n", c.rank,
                secondsSince(start) - took);
    code = 1;
  }
  zcollCommAbort(c.comm);
  c.comm = nullptr;
  if (c.device) {
    cudaFree(send);
    cudaFree(recv);
  }
  return code;
}

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--host-only] [--windows] [--graph] [--kill-rank K]\n", argv0);
  return 2;
}

// The device of this rank, chosen before init (init describes it to the peers); 77 without one.
int chooseDevice(Ctx& c) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::printf("SKIP: no CUDA device (%s)\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount gives 0");
    return 77;
  }
  const char* local = std::getenv("LOCAL_RANK");
  if (local == nullptr) local = std::getenv("RANK");
  const int dev = (local != nullptr ? std::atoi(local) : 0) % count;
  return cudaOk(c, cudaSetDevice(dev), "cudaSetDevice") ? 0 : 1;
}

void describe(Ctx& c) {
  int node = 0, nodes = 1, local = 0, localSize = 1;
  zcollCommNodeRank(c.comm, &node);
  zcollCommNodeCount(c.comm, &nodes);
  zcollCommLocalRank(c.comm, &local);
  zcollCommLocalSize(c.comm, &localSize);
  std::string where = "host buffers only";
  if (c.device) {
    int dev = -1;
    char bus[32] = "?";
    cudaGetDevice(&dev);
    cudaDeviceGetPCIBusId(bus, sizeof(bus), dev);
    where = "device " + std::to_string(dev) + " (PCI " + bus + "), a non-blocking stream";
  }
  std::printf("rank %d of %d: node %d of %d, local rank %d of %d, %s\n", c.rank, c.nranks, node,
              nodes, local, localSize, where.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach zcollrun in order with stderr's
  Ctx c;
  int victim = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--host-only") == 0) {
      c.device = false;
    } else if (std::strcmp(argv[i], "--graph") == 0) {
      c.graph = true;
    } else if (std::strcmp(argv[i], "--windows") == 0) {
      c.windows = true;
    } else if (std::strcmp(argv[i], "--kill-rank") == 0 && i + 1 < argc) {
      char* end = nullptr;
      victim = static_cast<int>(std::strtol(argv[++i], &end, 10));
      if (*end != '\0' || victim < 0) return usage(argv[0]);
    } else {
      return usage(argv[0]);
    }
  }
  if (c.device) {
    const int code = chooseDevice(c);
    if (code != 0) return code;
  }
  zcollResult_t r = zcollCommInitFromEnv(&c.comm, nullptr);
  if (r != zcollSuccess) {
    std::printf("init: error %d (%s): %s\n", static_cast<int>(r), zcollGetErrorString(r),
                zcollGetLastError(nullptr));
    return 1;
  }
  zcollCommUserRank(c.comm, &c.rank);
  zcollCommCount(c.comm, &c.nranks);
  if (victim >= c.nranks) {
    std::printf("rank %d: --kill-rank %d is not a rank of %d\n", c.rank, victim, c.nranks);
    zcollCommDestroy(c.comm);
    return 2;
  }
  if (c.device) {
    int supported = 0;
    zcollGetDeviceSupport(&supported);
    if (!supported) {
      std::printf("rank %d: zcoll does not take device buffers in this process: %s\n", c.rank,
                  zcollGetLastError(nullptr));
      zcollCommDestroy(c.comm);
      return 1;
    }
    if (!cudaOk(c, cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking),
                "cudaStreamCreateWithFlags")) {
      zcollCommDestroy(c.comm);
      return 1;
    }
  }
  describe(c);
  int code = 0;
  if (victim >= 0) {
    code = killCase(c, victim);
  } else {
    for (size_t n : {size_t{1000}, size_t{70000}}) everyCollective(c, n);
    if (c.broken)
      std::printf("rank %d: the communicator broke; the remaining checks did not run\n", c.rank);
    if (c.graph && c.device)
      std::printf("rank %d: %d of %d calls captured into graphs (the rest refused to be)\n",
                  c.rank, c.checks - c.notCaptured, c.checks);
    if (c.failures == 0)
      std::printf("rank %d: all %d checks ok\n", c.rank, c.checks);
    else
      std::printf("rank %d: %d failure(s) in %d checks\n", c.rank, c.failures, c.checks);
    code = c.failures == 0 && !c.broken ? 0 : 1;
  }
  if (c.comm != nullptr) {
    zcollResult_t async = zcollSuccess;
    zcollCommGetAsyncError(c.comm, &async);
    if (async != zcollSuccess) zcollCommAbort(c.comm);
    else zcollCommDestroy(c.comm);
  }
  if (c.stream != nullptr) cudaStreamDestroy(c.stream);
  return code;
}
