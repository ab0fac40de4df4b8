// Soak: a long, seeded mix of standard and ZeRO++ collectives (random counts, in and out of
// place) checked on every rank; optionally one rank kills itself (SIGKILL) before a given
// operation. Every rank runs the same sequence (same seed). Linked against the public library.
//   zcoll_soak OPS SEED [KILL_RANK KILL_AT]
// The killed rank prints its wall-clock time first; survivors print theirs at the error, so
// the difference is the time the failure took to reach them.
// Prints "soak: rank R ok OPS ops" (exit 0), or "soak: rank R error at op K after T ms: ..."
// (exit 3) when a call fails, or "soak: rank R WRONG ..." (exit 6) on a wrong result.
// Unquantized results are checked exactly; quantized ones against half a quantization step
// per rank's block (qwZ, 8-bit symmetric) or a loose sum bound (qgZ, 8-bit).
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "zcoll/zcoll.h"

namespace {

int32_t intValue(int rank, size_t i, int op) {
  uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ (rank * 40503u + op * 97u);
  return static_cast<int32_t>(h % 2001) - 1000;
}
float floatValue(int rank, size_t i, int op) { return intValue(rank, i, op) / 64.0f; }

struct Soak {
  zcollComm_t comm;
  int rank, n, op = 0;
  std::mt19937_64 rng;

  int wrong(const char* what, size_t i, double got, double want) {
    std::printf("soak: rank %d WRONG op %d %s at %zu: got %g want %g\n", rank, op, what, i, got,
                want);
    return 6;
  }

  zcollResult_t allGather(size_t count, bool inPlace, int* bad) {
    std::vector<int32_t> recv(count * n, -7), send(count);
    for (size_t i = 0; i < count; ++i) send[i] = intValue(rank, i, op);
    int32_t* s = inPlace ? recv.data() + rank * count : send.data();
    if (inPlace && count > 0) std::memcpy(s, send.data(), count * 4);  // data() may be null at 0
    zcollResult_t r = zcollAllGather(s, recv.data(), count, zcollInt32, comm, nullptr);
    for (int p = 0; r == zcollSuccess && p < n && !*bad; ++p)
      for (size_t i = 0; i < count && !*bad; ++i)
        if (recv[p * count + i] != intValue(p, i, op))
          *bad = wrong("all-gather", p * count + i, recv[p * count + i], intValue(p, i, op));
    return r;
  }

  zcollResult_t allReduce(size_t count, int* bad) {
    std::vector<int32_t> buf(count);
    for (size_t i = 0; i < count; ++i) buf[i] = intValue(rank, i, op);
    zcollResult_t r = zcollAllReduce(buf.data(), buf.data(), count, zcollInt32, zcollSum, comm,
                                     nullptr);
    for (size_t i = 0; r == zcollSuccess && i < count && !*bad; ++i) {
      int64_t want = 0;
      for (int p = 0; p < n; ++p) want += intValue(p, i, op);
      if (buf[i] != want) *bad = wrong("all-reduce", i, buf[i], double(want));
    }
    return r;
  }

  zcollResult_t reduceScatter(size_t count, int* bad) {
    std::vector<int32_t> send(count * n), recv(count, -7);
    for (size_t i = 0; i < send.size(); ++i) send[i] = intValue(rank, i, op);
    zcollResult_t r = zcollReduceScatter(send.data(), recv.data(), count, zcollInt32, zcollMax,
                                         comm, nullptr);
    for (size_t i = 0; r == zcollSuccess && i < count && !*bad; ++i) {
      int32_t want = INT32_MIN;
      for (int p = 0; p < n; ++p) want = std::max(want, intValue(p, rank * count + i, op));
      if (recv[i] != want) *bad = wrong("reduce-scatter", i, recv[i], want);
    }
    return r;
  }

  zcollResult_t broadcast(size_t count, int root, int* bad) {
    std::vector<int32_t> buf(count, -7);
    if (rank == root)
      for (size_t i = 0; i < count; ++i) buf[i] = intValue(root, i, op);
    zcollResult_t r = zcollBroadcast(buf.data(), buf.data(), count, zcollInt32, root, comm,
                                     nullptr);
    for (size_t i = 0; r == zcollSuccess && i < count && !*bad; ++i)
      if (buf[i] != intValue(root, i, op)) *bad = wrong("broadcast", i, buf[i], intValue(root, i, op));
    return r;
  }

  zcollResult_t allToAll(size_t count, int* bad) {
    std::vector<int32_t> send(count * n), recv(count * n, -7);
    for (size_t i = 0; i < send.size(); ++i) send[i] = intValue(rank, i, op);
    zcollResult_t r = zcollAllToAll(send.data(), recv.data(), count, zcollInt32, comm, nullptr);
    for (int p = 0; r == zcollSuccess && p < n && !*bad; ++p)
      for (size_t i = 0; i < count && !*bad; ++i) {
        int32_t want = intValue(p, rank * count + i, op);
        if (recv[p * count + i] != want) *bad = wrong("all-to-all", p * count + i, recv[p * count + i], want);
      }
    return r;
  }

  zcollResult_t quantizedAllGather(size_t count, int* bad) {
    zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
    q.bits = 8;
    q.blockSize = 128;
    q.mode = zcollQuantSymmetric;
    std::vector<float> send(count), recv(count * n, -7);
    for (size_t i = 0; i < count; ++i) send[i] = floatValue(rank, i, op);
    zcollResult_t r = zcollQuantizedAllGather(send.data(), recv.data(), count, zcollFloat32, &q,
                                              comm, nullptr);
    for (int p = 0; r == zcollSuccess && p < n && !*bad; ++p)
      for (size_t b = 0; b < count && !*bad; b += 128) {
        size_t e = std::min(count, b + 128);
        float amax = 0;
        for (size_t i = b; i < e; ++i) amax = std::max(amax, std::fabs(floatValue(p, i, op)));
        float bound = amax / 127.0f * 0.5f * 1.001f + 1e-6f;
        for (size_t i = b; i < e && !*bad; ++i)
          if (std::fabs(recv[p * count + i] - floatValue(p, i, op)) > bound)
            *bad = wrong("quantized all-gather", p * count + i, recv[p * count + i], floatValue(p, i, op));
      }
    return r;
  }

  zcollResult_t quantizedReduceScatter(size_t count, int* bad) {
    zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
    q.bits = 8;
    q.intraBits = 8;
    std::vector<float> send(count * n), recv(count, -7);
    for (size_t i = 0; i < send.size(); ++i) send[i] = floatValue(rank, i, op);
    zcollResult_t r = zcollQuantizedReduceScatter(send.data(), recv.data(), count, zcollFloat32,
                                                  zcollSum, &q, comm, nullptr);
    // Loose: two 8-bit hops of at most n * max|x| / 127 each; catches shifted or lost blocks.
    const float bound = 2.0f * n * (1000.0f / 64.0f) / 127.0f + 1e-3f;
    for (size_t i = 0; r == zcollSuccess && i < count && !*bad; ++i) {
      double want = 0;
      for (int p = 0; p < n; ++p) want += floatValue(p, rank * count + i, op);
      if (std::fabs(recv[i] - want) > bound) *bad = wrong("quantized reduce-scatter", i, recv[i], want);
    }
    return r;
  }

  zcollResult_t one(int kind, size_t count, int* bad) {
    switch (kind) {
      case 0: return allGather(count, rng() % 2 == 0, bad);
      case 1: return allReduce(count, bad);
      case 2: return reduceScatter(count, bad);
      case 3: return broadcast(count, static_cast<int>(rng() % n), bad);
      case 4: return allToAll(count, bad);
      case 5: return quantizedAllGather(count, bad);
      default: return quantizedReduceScatter(count, bad);
    }
  }
};

// Wall-clock milliseconds (comparable across the processes of one machine).
double wallMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OPS SEED [KILL_RANK KILL_AT]\n", argv[0]);
    return 2;
  }
  const int ops = std::atoi(argv[1]);
  const uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  const int killRank = argc > 4 ? std::atoi(argv[3]) : -1;
  const int killAt = argc > 4 ? std::atoi(argv[4]) : -1;
  Soak s{};
  if (zcollCommInitFromEnv(&s.comm, nullptr) != zcollSuccess) {
    std::printf("soak: init failed: %s\n", zcollGetLastError(nullptr));
    return 5;
  }
  zcollCommUserRank(s.comm, &s.rank);
  zcollCommCount(s.comm, &s.n);
  s.rng.seed(seed);
  int code = 0;
  for (s.op = 0; s.op < ops; ++s.op) {
    const int kind = static_cast<int>(s.rng() % 7);
    const size_t count = s.rng() % 4 == 0 ? s.rng() % 8 : s.rng() % 20000;
    if (s.rank == killRank && s.op == killAt) {
      std::printf("soak: rank %d killed at op %d at %.3f ms\n", s.rank, s.op, wallMs());
      std::fflush(stdout);
      raise(SIGKILL);
    }
    int bad = 0;
    auto start = std::chrono::steady_clock::now();
    zcollResult_t r = s.one(kind, count, &bad);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (bad != 0) {
      code = bad;
      break;
    }
    if (r != zcollSuccess) {
      std::printf("soak: rank %d error at op %d after %.1f ms at %.3f ms: %s | %s\n", s.rank,
                  s.op, ms, wallMs(), zcollGetErrorString(r), zcollGetLastError(s.comm));
      code = r == zcollRemoteError ? 3 : 5;
      break;
    }
  }
  if (code == 0) std::printf("soak: rank %d ok %d ops\n", s.rank, ops);
  zcollCommDestroy(s.comm);
  return code;
}
