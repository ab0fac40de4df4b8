/* A C program written against NCCL's own nccl.h, run on libzcoll_nccl.so: 4 ranks over 2
 * emulated nodes (tools/zcollrun -n 4 --nodes 2), host buffers. Every NCCL call's output must
 * be bit-identical to the same zcoll* call on the zcoll communicator underneath
 * (ncclZcollCommGetZcoll), and a few are checked against known values too.
 *
 *   nccl_api_check api       collectives, groups, send/recv, split, shrink, PreMulSum, errors,
 *                            non-blocking init, abort
 *   nccl_api_check quant     zcoll's vendor extension on ncclAllGatherConfig (qwZ at INT8: at
 *                            most 0.53x the inter-node bytes of the plain call, within qwZ's
 *                            bound; without the extension exact), hpZ, qgZ, quantized AR
 *   nccl_api_check policy    with ZCOLL_NCCL_QUANTIZE=allgather:int8,reducescatter:int4: plain
 *                            calls of floating types quantized, integer ones exact
 *   nccl_api_check fallback  with ZCOLL_NCCL_FALLBACK: an FP8 all-reduce (which zcoll does not
 *                            serve) is forwarded (expect "forwarded") or refused naming the
 *                            fallback (expect "refused"), on the comm and on children of
 *                            split (also grouped) and shrink, each on a fallback comm its size
 * Exit 0 when every check passed; each failure prints "rank R: FAIL ...". */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nccl.h>

#include "zcoll/zcoll_nccl.h"

/* NCCL 2.28's device API host call (nccl_device.h is C++ only): declared with opaque types. */
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void* reqs, void* outDevComm);

static int gRank = -1, gFailures = 0;

#define CHECK(cond, ...)                                             \
  do {                                                               \
    if (!(cond)) {                                                   \
      fprintf(stderr, "rank %d: FAIL %s:%d: ", gRank, __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                  \
      fprintf(stderr, "\n");                                         \
      ++gFailures;                                                   \
    }                                                                \
  } while (0)

#define NCCL_OK(expr)                                                              \
  do {                                                                             \
    ncclResult_t r_ = (expr);                                                      \
    CHECK(r_ == ncclSuccess, "%s -> %d (%s) %s", #expr, (int)r_,                   \
          ncclGetErrorString(r_), ncclGetLastError(NULL));                          \
  } while (0)

#define ZCOLL_OK(expr)                                                             \
  do {                                                                             \
    zcollResult_t z_ = (expr);                                                     \
    CHECK(z_ == zcollSuccess, "%s -> %d %s", #expr, (int)z_, zcollGetLastError(NULL)); \
  } while (0)

/* Expects `expr` to fail with `code` and a ncclGetLastError text containing `needle`. */
#define NCCL_FAILS(code, needle, expr)                                             \
  do {                                                                             \
    ncclResult_t r_ = (expr);                                                      \
    const char* t_ = ncclGetLastError(NULL);                                       \
    CHECK(r_ == (code), "%s -> %d, expected %d", #expr, (int)r_, (int)(code));     \
    CHECK(t_ != NULL && strstr(t_, needle) != NULL, "%s: text '%s' lacks '%s'", #expr, \
          t_ ? t_ : "(null)", needle);                                             \
  } while (0)

/* ---- the unique id, handed from rank 0 to the others through a file ---------------------- */

static void idPath(char* path, size_t n) {
  const char* port = getenv("MASTER_PORT");
  const char* dir = getenv("TMPDIR");
  snprintf(path, n, "%s/zcoll_nccl_check_%s_%s.id", dir ? dir : "/tmp", port ? port : "0",
           getenv("ZCOLL_AUTH_TOKEN") ? getenv("ZCOLL_AUTH_TOKEN") : "x");
}

static int shareId(ncclUniqueId* id) {
  char path[512], tmp[600];
  idPath(path, sizeof(path));
  if (gRank == 0) {
    if (ncclGetUniqueId(id) != ncclSuccess) return 1;
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE* f = fopen(tmp, "wb");
    if (!f || fwrite(id, sizeof(*id), 1, f) != 1) return 1;
    fclose(f);
    return rename(tmp, path) != 0;
  }
  for (int i = 0; i < 3000; ++i) { /* up to 30 s */
    FILE* f = fopen(path, "rb");
    if (f) {
      size_t got = fread(id, sizeof(*id), 1, f);
      fclose(f);
      if (got == 1) return 0;
    }
    usleep(10000);
  }
  return 1;
}

/* ---- data --------------------------------------------------------------------------------- */

static float valueOf(int rank, size_t i) {
  return (float)((int)((i * 7 + (size_t)rank * 13) % 97) - 48) / 8.0f + 0.001f * (float)rank;
}

static float* floats(size_t n, int rank) {
  float* p = (float*)malloc(n * sizeof(float));
  for (size_t i = 0; i < n; ++i) p[i] = valueOf(rank, i);
  return p;
}

static void* zeros(size_t bytes) { return calloc(1, bytes ? bytes : 1); }

static int same(const void* a, const void* b, size_t bytes) { return memcmp(a, b, bytes) == 0; }

/* ---- api: every call against zcoll's ------------------------------------------------------ */

static void collectives(ncclComm_t comm, zcollComm_t z, int rank, int n) {
  const size_t c = 1000;
  float* in = floats(c * n, rank);
  float* a = (float*)zeros(c * n * sizeof(float));
  float* b = (float*)zeros(c * n * sizeof(float));

  NCCL_OK(ncclAllGather(in, a, c, ncclFloat32, comm, NULL));
  ZCOLL_OK(zcollAllGather(in, b, c, zcollFloat32, z, NULL));
  CHECK(same(a, b, c * n * sizeof(float)), "ncclAllGather differs from zcollAllGather");
  for (int r = 0; r < n; ++r)
    CHECK(a[r * c + 5] == valueOf(r, 5), "ncclAllGather: slot %d holds %g", r, a[r * c + 5]);

  NCCL_OK(ncclReduceScatter(in, a, c, ncclFloat32, ncclSum, comm, NULL));
  ZCOLL_OK(zcollReduceScatter(in, b, c, zcollFloat32, zcollSum, z, NULL));
  CHECK(same(a, b, c * sizeof(float)), "ncclReduceScatter differs");

  NCCL_OK(ncclAllReduce(in, a, c * n, ncclFloat32, ncclSum, comm, NULL));
  ZCOLL_OK(zcollAllReduce(in, b, c * n, zcollFloat32, zcollSum, z, NULL));
  CHECK(same(a, b, c * n * sizeof(float)), "ncclAllReduce differs");

  int32_t iv = rank + 1, isum = 0;
  NCCL_OK(ncclAllReduce(&iv, &isum, 1, ncclInt32, ncclSum, comm, NULL));
  CHECK(isum == n * (n + 1) / 2, "ncclAllReduce int32 sum is %d", isum);
  NCCL_OK(ncclAllReduce(&iv, &isum, 1, ncclInt32, ncclMax, comm, NULL));
  CHECK(isum == n, "ncclAllReduce int32 max is %d", isum);

  NCCL_OK(ncclBroadcast(in, a, c, ncclFloat32, 1, comm, NULL));
  ZCOLL_OK(zcollBroadcast(in, b, c, zcollFloat32, 1, z, NULL));
  CHECK(same(a, b, c * sizeof(float)) && a[3] == valueOf(1, 3), "ncclBroadcast differs");
  memcpy(a, in, c * sizeof(float));
  NCCL_OK(ncclBcast(a, c, ncclFloat32, 2, comm, NULL));
  CHECK(a[3] == valueOf(2, 3), "ncclBcast: %g", a[3]);

  memset(a, 0, c * sizeof(float));
  memset(b, 0, c * sizeof(float));
  NCCL_OK(ncclReduce(in, a, c, ncclFloat32, ncclSum, 2, comm, NULL));
  ZCOLL_OK(zcollReduce(in, b, c, zcollFloat32, zcollSum, 2, z, NULL));
  CHECK(same(a, b, c * sizeof(float)), "ncclReduce differs");

  NCCL_OK(ncclAlltoAll(in, a, c, ncclFloat32, comm, NULL));
  ZCOLL_OK(zcollAllToAll(in, b, c, zcollFloat32, z, NULL));
  CHECK(same(a, b, c * n * sizeof(float)), "ncclAlltoAll differs");

  memset(a, 0, c * n * sizeof(float));
  memset(b, 0, c * n * sizeof(float));
  NCCL_OK(ncclGather(in, a, c, ncclFloat32, 3, comm, NULL));
  ZCOLL_OK(zcollGather(in, b, c, zcollFloat32, 3, z, NULL));
  CHECK(same(a, b, c * n * sizeof(float)), "ncclGather differs");

  NCCL_OK(ncclScatter(in, a, c, ncclFloat32, 0, comm, NULL));
  ZCOLL_OK(zcollScatter(in, b, c, zcollFloat32, 0, z, NULL));
  CHECK(same(a, b, c * sizeof(float)) && a[2] == valueOf(0, rank * c + 2), "ncclScatter differs");

  /* A group mixing a collective and a ring of send/recv. */
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  float* ring = (float*)zeros(c * sizeof(float));
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllReduce(in, a, c, ncclFloat32, ncclSum, comm, NULL));
  NCCL_OK(ncclSend(in, c, ncclFloat32, next, comm, NULL));
  NCCL_OK(ncclRecv(ring, c, ncclFloat32, prev, comm, NULL));
  NCCL_OK(ncclGroupEnd());
  ZCOLL_OK(zcollAllReduce(in, b, c, zcollFloat32, zcollSum, z, NULL));
  CHECK(same(a, b, c * sizeof(float)), "grouped ncclAllReduce differs");
  CHECK(ring[7] == valueOf(prev, 7), "ncclRecv from %d: %g", prev, ring[7]);

  /* PreMulSum: each rank's own scalar, then Sum; against zcoll's Sum of the scaled input. */
  float scalar = 0.5f * (float)(rank + 1);
  ncclRedOp_t pre;
  NCCL_OK(ncclRedOpCreatePreMulSum(&pre, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
  NCCL_OK(ncclAllReduce(in, a, c, ncclFloat32, pre, comm, NULL));
  float* scaled = (float*)zeros(c * sizeof(float));
  for (size_t i = 0; i < c; ++i) scaled[i] = in[i] * scalar;
  ZCOLL_OK(zcollAllReduce(scaled, b, c, zcollFloat32, zcollSum, z, NULL));
  CHECK(same(a, b, c * sizeof(float)), "PreMulSum all-reduce differs");
  /* Inside a group zcoll runs the call at ncclGroupEnd: the scaled copy must live until then. */
  memset(a, 0, c * sizeof(float));
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllReduce(in, a, c, ncclFloat32, pre, comm, NULL));
  NCCL_OK(ncclGroupEnd());
  CHECK(same(a, b, c * sizeof(float)), "PreMulSum all-reduce in a group differs");
  NCCL_OK(ncclRedOpDestroy(pre, comm));
  NCCL_FAILS(ncclInvalidArgument, "PreMulSum", ncclAllReduce(in, a, c, ncclFloat32, pre, comm, NULL));

  free(in), free(a), free(b), free(ring), free(scaled);
}

static void splitAndShrink(ncclComm_t comm, int rank, int n) {
  const size_t c = 300;
  float* in = floats(c, rank);
  float* a = (float*)zeros(c * sizeof(float));
  float* b = (float*)zeros(c * sizeof(float));
  ncclComm_t half = NULL;
  zcollComm_t zh = NULL;
  NCCL_OK(ncclCommSplit(comm, rank % 2, rank, &half, NULL));
  int hn = 0;
  NCCL_OK(ncclCommCount(half, &hn));
  CHECK(hn == n / 2, "split comm has %d ranks", hn);
  NCCL_OK(ncclZcollCommGetZcoll(half, &zh));
  NCCL_OK(ncclAllReduce(in, a, c, ncclFloat32, ncclSum, half, NULL));
  ZCOLL_OK(zcollAllReduce(in, b, c, zcollFloat32, zcollSum, zh, NULL));
  CHECK(same(a, b, c * sizeof(float)), "all-reduce on the split comm differs");
  NCCL_OK(ncclCommDestroy(half));

  ncclComm_t none = (ncclComm_t)1;
  NCCL_OK(ncclCommSplit(comm, rank == 0 ? NCCL_SPLIT_NOCOLOR : 1, 0, &none, NULL));
  CHECK((rank == 0) == (none == NULL), "NOCOLOR split: comm %p", (void*)none);
  if (none) NCCL_OK(ncclCommDestroy(none));

  /* Shrink without the last rank (which does not call, as in NCCL). */
  if (rank != n - 1) {
    int excluded = n - 1;
    ncclComm_t small = NULL;
    zcollComm_t zs = NULL;
    NCCL_OK(ncclCommShrink(comm, &excluded, 1, &small, NULL, NCCL_SHRINK_DEFAULT));
    int sn = 0;
    NCCL_OK(ncclCommCount(small, &sn));
    CHECK(sn == n - 1, "shrunk comm has %d ranks", sn);
    NCCL_OK(ncclZcollCommGetZcoll(small, &zs));
    NCCL_OK(ncclAllReduce(in, a, c, ncclFloat32, ncclSum, small, NULL));
    ZCOLL_OK(zcollAllReduce(in, b, c, zcollFloat32, zcollSum, zs, NULL));
    CHECK(same(a, b, c * sizeof(float)), "all-reduce on the shrunk comm differs");
    NCCL_OK(ncclCommDestroy(small));
  }
  free(in), free(a), free(b);
}

/* ncclCommAbort from another thread while a call is blocked on the comm (torch's watchdog):
 * ranks pair up (0-1, 2-3); the even rank's all-reduce waits for a peer that never calls, the
 * even rank's main thread aborts the pair's comm, and the blocked call returns ncclRemoteError. */
struct Blocked {
  ncclComm_t comm;
  float buf[64];
  ncclResult_t result;
};

static void* blockedAllReduce(void* arg) {
  struct Blocked* b = (struct Blocked*)arg;
  b->result = ncclAllReduce(b->buf, b->buf, 64, ncclFloat32, ncclSum, b->comm, NULL);
  return NULL;
}

static void abortWhileBlocked(ncclComm_t comm, zcollComm_t z, int rank) {
  ncclComm_t pair = NULL;
  NCCL_OK(ncclCommSplit(comm, rank / 2, rank, &pair, NULL));
  if (rank % 2 == 0) {
    static struct Blocked b;
    memset(&b, 0, sizeof(b));
    b.comm = pair;
    b.result = ncclSuccess;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, blockedAllReduce, &b) == 0, "pthread_create");
    usleep(300000);
    NCCL_OK(ncclCommAbort(pair));
    pthread_join(t, NULL);
    CHECK(b.result == ncclRemoteError, "the all-reduce blocked during the abort returned %d",
          (int)b.result);
  }
  ZCOLL_OK(zcollBarrier(z, NULL));
  if (rank % 2 == 1) NCCL_OK(ncclCommDestroy(pair));
}

/* A non-blocking init that cannot finish (the second rank never comes), with a 1 s timeout:
 * ncclCommGetAsyncError goes from ncclInProgress to ncclRemoteError with a text, and the handle
 * is destroyed cleanly. */
static void nonBlockingInitFails(void) {
  const char* old = getenv("ZCOLL_TIMEOUT");
  char saved[32];
  snprintf(saved, sizeof(saved), "%s", old ? old : "");
  setenv("ZCOLL_TIMEOUT", "1", 1);
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t lonely = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&lonely, 2, id, 0, &config);
  CHECK(r == ncclInProgress, "a non-blocking init returned %d, not ncclInProgress", (int)r);
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 1000 && state == ncclInProgress; ++i) {
    NCCL_OK(ncclCommGetAsyncError(lonely, &state));
    if (state == ncclInProgress) usleep(10000);
  }
  CHECK(state == ncclRemoteError, "the init that cannot finish ended with %d", (int)state);
  CHECK(strlen(ncclGetLastError(NULL)) > 0, "no text for the failed init");
  NCCL_OK(ncclCommDestroy(lonely));
  if (old) setenv("ZCOLL_TIMEOUT", saved, 1);
  else unsetenv("ZCOLL_TIMEOUT");
}

/* One thread, two ranks: ncclCommInitAll, and two ncclCommInitRank calls inside a group (each
 * starts at once on a thread of its own; ncclGroupEnd waits for both). */
static void oneThreadTwoRanks(void) {
  ncclComm_t all[2] = {NULL, NULL};
  NCCL_OK(ncclCommInitAll(all, 2, NULL));
  for (int i = 0; i < 2; ++i) {
    int cnt = 0, me = -1;
    NCCL_OK(ncclCommCount(all[i], &cnt));
    NCCL_OK(ncclCommUserRank(all[i], &me));
    CHECK(cnt == 2 && me == i, "ncclCommInitAll comm %d: count %d rank %d", i, cnt, me);
    NCCL_OK(ncclCommDestroy(all[i]));
  }
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  ncclComm_t a = NULL, b = NULL;
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclCommInitRank(&a, 2, id, 0));
  NCCL_OK(ncclCommInitRank(&b, 2, id, 1));
  NCCL_OK(ncclGroupEnd());
  int ra = -1, rb = -1;
  NCCL_OK(ncclCommUserRank(a, &ra));
  NCCL_OK(ncclCommUserRank(b, &rb));
  CHECK(ra == 0 && rb == 1, "grouped inits: ranks %d and %d", ra, rb);
  /* Both ranks' collectives from this one thread in one group (NCCL's several GPUs per thread):
   * zcoll runs each comm's calls on a thread of its own at ncclGroupEnd. */
  float xa[8], xb[8], ya[8], yb[8], ga[16], gb[16];
  for (int i = 0; i < 8; ++i) xa[i] = (float)i, xb[i] = (float)(10 * i);
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllReduce(xa, ya, 8, ncclFloat32, ncclSum, a, NULL));
  NCCL_OK(ncclAllReduce(xb, yb, 8, ncclFloat32, ncclSum, b, NULL));
  NCCL_OK(ncclAllGather(xa, ga, 8, ncclFloat32, a, NULL));
  NCCL_OK(ncclAllGather(xb, gb, 8, ncclFloat32, b, NULL));
  NCCL_OK(ncclGroupEnd());
  for (int i = 0; i < 8; ++i) {
    CHECK(ya[i] == (float)(11 * i) && yb[i] == ya[i], "one thread, two ranks: all-reduce [%d] = "
          "%g, %g", i, (double)ya[i], (double)yb[i]);
    CHECK(ga[i] == xa[i] && ga[8 + i] == xb[i] && gb[i] == xa[i] && gb[8 + i] == xb[i],
          "one thread, two ranks: all-gather [%d]", i);
  }
  NCCL_OK(ncclCommDestroy(a));
  NCCL_OK(ncclCommDestroy(b));
}

static void badInput(ncclComm_t comm, int n) {
  float x[4] = {0};
  NCCL_FAILS(ncclInvalidArgument, "comm is NULL", ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, NULL, NULL));
  NCCL_FAILS(ncclInvalidArgument, "datatype 99", ncclAllGather(x, x, 1, (ncclDataType_t)99, comm, NULL));
  NCCL_FAILS(ncclInvalidArgument, "op 77", ncclAllReduce(x, x, 4, ncclFloat32, (ncclRedOp_t)77, comm, NULL));
  NCCL_FAILS(ncclInvalidArgument, "", ncclBroadcast(x, x, 4, ncclFloat32, n + 3, comm, NULL));
  /* Host buffers take no stream (zcoll.h); a stream with them is an argument error. */
  NCCL_FAILS(ncclInvalidArgument, "stream", ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, comm, (cudaStream_t)x));
  NCCL_FAILS(ncclInvalidUsage, "ncclGroupSimulateEnd", ncclGroupSimulateEnd(NULL));
  NCCL_FAILS(ncclInvalidUsage, "ncclGroupEnd", ncclGroupEnd());
  NCCL_FAILS(ncclInvalidUsage, "ncclDevCommCreate", ncclDevCommCreate(comm, NULL, NULL));
  NCCL_FAILS(ncclInvalidArgument, "ncclGetVersion", ncclGetVersion(NULL));
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  ncclComm_t c2 = NULL;
  NCCL_FAILS(ncclInvalidArgument, "NCCL_CONFIG_INITIALIZER", ncclCommInitRankConfig(&c2, n, id, 0, &bad));
  NCCL_FAILS(ncclInvalidArgument, "rank 9", ncclCommInitRank(&c2, n, id, 9));
  if (getenv("ZCOLL_NCCL_FALLBACK") == NULL) {
    uint8_t f8[4] = {0};
    NCCL_FAILS(ncclInvalidUsage, "ZCOLL_NCCL_FALLBACK", ncclAllReduce(f8, f8, 4, ncclFloat8e4m3, ncclSum, comm, NULL));
  }
  void* h = NULL;
  NCCL_OK(ncclCommRegister(comm, x, sizeof(x), &h));
  NCCL_OK(ncclCommDeregister(comm, h));
  NCCL_FAILS(ncclInvalidArgument, "ncclCommDeregister", ncclCommDeregister(comm, h));
  const char* s = ncclGetErrorString(ncclInvalidUsage);
  CHECK(s != NULL && *s != '\0', "ncclGetErrorString is empty");
}

static ncclComm_t initNonBlocking(int rank, int n) {
  ncclUniqueId id;
  if (shareId(&id) != 0) {
    CHECK(0, "could not share the unique id");
    return NULL;
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = "nccl_api_check";
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&comm, n, id, rank, &config);
  CHECK(r == ncclInProgress || r == ncclSuccess, "non-blocking init returned %d", (int)r);
  ncclResult_t state = ncclInProgress;
  int polls = 0;
  while (state == ncclInProgress && polls < 60000) {
    NCCL_OK(ncclCommGetAsyncError(comm, &state));
    ++polls;
    if (state == ncclInProgress) usleep(1000);
  }
  CHECK(state == ncclSuccess, "non-blocking init ended with %d: %s", (int)state, ncclGetLastError(NULL));
  int cnt = 0, me = -1;
  NCCL_OK(ncclCommCount(comm, &cnt));
  NCCL_OK(ncclCommUserRank(comm, &me));
  CHECK(cnt == n && me == rank, "count %d rank %d", cnt, me);
  return comm;
}

/* ---- quant: zcoll's vendor extension ------------------------------------------------------ */

static uint64_t interBytes(ncclComm_t comm) {
  zcollStats_t s;
  memset(&s, 0, sizeof(s));
  s.size = sizeof(s);
  NCCL_OK(ncclZcollCommGetStats(comm, &s));
  return s.bytesSent[zcollPathInter];
}

/* Inter-node bytes all ranks sent for `call`, summed over ranks. */
static uint64_t jobInterBytes(ncclComm_t comm, zcollComm_t z) {
  uint64_t mine = interBytes(comm), all = 0;
  ZCOLL_OK(zcollAllReduce(&mine, &all, 1, zcollUint64, zcollSum, z, NULL));
  return all;
}

static void quantized(ncclComm_t comm, zcollComm_t z, int rank, int n) {
  const size_t c = 65536;
  float* in = floats(c, rank);
  float* plain = (float*)zeros(c * n * sizeof(float));
  float* q = (float*)zeros(c * n * sizeof(float));
  float* ref = (float*)zeros(c * n * sizeof(float));

  NCCL_OK(ncclZcollCommResetStats(comm));
  NCCL_OK(ncclAllGather(in, plain, c, ncclFloat32, comm, NULL));
  const uint64_t plainBytes = jobInterBytes(comm, z);

  ncclConfigExt_t bits = {NULL, {ZCOLL_NCCL_VENDOR_ID, ZCOLL_NCCL_OPT_BITS}, {8}};
  ncclCollConfig_t cfg = NCCL_COLLCONFIG_INITIALIZER;
  cfg.ext = &bits;
  NCCL_OK(ncclZcollCommResetStats(comm));
  NCCL_OK(ncclAllGatherConfig(in, q, c, ncclFloat32, comm, NULL, &cfg));
  const uint64_t qBytes = jobInterBytes(comm, z);
  const double ratio = (double)qBytes / (double)plainBytes;
  if (rank == 0)
    printf("qwZ INT8 via ncclAllGatherConfig: inter-node bytes %llu vs plain %llu: %.4fx\n",
           (unsigned long long)qBytes, (unsigned long long)plainBytes, ratio);
  CHECK(plainBytes > 0 && ratio <= 0.53, "qwZ moved %.4fx the plain call's inter-node bytes", ratio);
  /* qwZ's bound: |x - x'| <= scale/2, scale = absmax of the 256-element block / 127. */
  int worst = 0;
  for (int r = 0; r < n; ++r)
    for (size_t blk = 0; blk < c; blk += 256) {
      float absmax = 0;
      for (size_t i = blk; i < blk + 256 && i < c; ++i) absmax = fmaxf(absmax, fabsf(valueOf(r, i)));
      const double bound = absmax / 127.0 / 2.0 * (1 + 1e-6) + 1e-7 * absmax;
      for (size_t i = blk; i < blk + 256 && i < c; ++i)
        if (fabs((double)q[r * c + i] - valueOf(r, i)) > bound) ++worst;
    }
  CHECK(worst == 0, "%d elements outside qwZ's bound", worst);
  zcollQuantConfig_t qc = ZCOLL_QUANT_CONFIG_INITIALIZER;
  qc.bits = 8;
  ZCOLL_OK(zcollQuantizedAllGather(in, ref, c, zcollFloat32, &qc, z, NULL));
  CHECK(same(q, ref, c * n * sizeof(float)), "ncclAllGatherConfig (qwZ) differs from zcollQuantizedAllGather");

  /* Without zcoll's options (none, or another vendor's): exact. */
  ncclConfigExt_t other = {NULL, {0x123456, ZCOLL_NCCL_OPT_BITS}, {8}};
  ncclCollConfig_t plainCfg = NCCL_COLLCONFIG_INITIALIZER;
  NCCL_OK(ncclAllGatherConfig(in, q, c, ncclFloat32, comm, NULL, &plainCfg));
  CHECK(same(q, plain, c * n * sizeof(float)), "ncclAllGatherConfig without options is not exact");
  plainCfg.ext = &other;
  NCCL_OK(ncclAllGatherConfig(in, q, c, ncclFloat32, comm, NULL, &plainCfg));
  CHECK(same(q, plain, c * n * sizeof(float)), "another vendor's option changed the result");

  /* hpZ: the forward call keeps the secondary; the backward one reads it, no inter-node bytes. */
  ncclConfigExt_t hpz = {NULL, {ZCOLL_NCCL_VENDOR_ID, ZCOLL_NCCL_OPT_ALGORITHM}, {ZCOLL_NCCL_ALGO_HPZ}};
  ncclCollConfig_t hcfg = NCCL_COLLCONFIG_INITIALIZER;
  hcfg.ext = &hpz;
  NCCL_OK(ncclAllGatherConfig(in, q, c, ncclFloat32, comm, NULL, &hcfg));
  CHECK(same(q, plain, c * n * sizeof(float)), "exact hpZ differs from the plain all-gather");
  hpz.val.i = ZCOLL_NCCL_ALGO_HPZ_FROM_SECONDARY;
  memset(q, 0, c * n * sizeof(float));
  NCCL_OK(ncclZcollCommResetStats(comm));
  NCCL_OK(ncclAllGatherConfig(NULL, q, c, ncclFloat32, comm, NULL, &hcfg));
  CHECK(interBytes(comm) == 0, "hpZ from the secondary sent inter-node bytes");
  CHECK(same(q, plain, c * n * sizeof(float)), "hpZ from the secondary differs");
  NCCL_FAILS(ncclInvalidUsage, "secondary", ncclAllGatherConfig(NULL, ref, c, ncclFloat32, comm, NULL, &hcfg));

  /* qgZ and the quantized all-reduce: the same bits as zcoll's calls. */
  float* big = floats(c * n, rank);
  ncclConfigExt_t qgz = {NULL, {ZCOLL_NCCL_VENDOR_ID, ZCOLL_NCCL_OPT_ALGORITHM}, {ZCOLL_NCCL_ALGO_QGZ}};
  ncclCollConfig_t gcfg = NCCL_COLLCONFIG_INITIALIZER;
  gcfg.ext = &qgz;
  NCCL_OK(ncclReduceScatterConfig(big, q, c, ncclFloat32, ncclSum, comm, NULL, &gcfg));
  ZCOLL_OK(zcollQuantizedReduceScatter(big, ref, c, zcollFloat32, zcollSum, NULL, z, NULL));
  CHECK(same(q, ref, c * sizeof(float)), "ncclReduceScatterConfig (qgZ) differs");
  qgz.val.i = ZCOLL_NCCL_ALGO_QUANTIZED_ALLREDUCE;
  NCCL_OK(ncclAllReduceConfig(big, q, c * n, ncclFloat32, ncclSum, comm, NULL, &gcfg));
  ZCOLL_OK(zcollQuantizedAllReduce(big, ref, c * n, zcollFloat32, zcollSum, NULL, z, NULL));
  CHECK(same(q, ref, c * n * sizeof(float)), "ncclAllReduceConfig (quantized) differs");
  /* An algorithm of another collective, an unknown option, a bad value: refused. */
  NCCL_FAILS(ncclInvalidArgument, "ZCOLL_NCCL_OPT_ALGORITHM", ncclAllGatherConfig(in, q, c, ncclFloat32, comm, NULL, &gcfg));
  ncclConfigExt_t unknown = {NULL, {ZCOLL_NCCL_VENDOR_ID, 99}, {1}};
  gcfg.ext = &unknown;
  NCCL_FAILS(ncclInvalidArgument, "option id 99", ncclAllGatherConfig(in, q, c, ncclFloat32, comm, NULL, &gcfg));
  bits.val.i = 5;
  NCCL_FAILS(ncclInvalidArgument, "ZCOLL_NCCL_OPT_BITS", ncclAllGatherConfig(in, q, c, ncclFloat32, comm, NULL, &cfg));
  free(in), free(plain), free(q), free(ref), free(big);
}

/* ---- policy: ZCOLL_NCCL_QUANTIZE ---------------------------------------------------------- */

static void policy(ncclComm_t comm, zcollComm_t z, int rank, int n) {
  const size_t c = 8192;
  float* in = floats(c * n, rank);
  float* a = (float*)zeros(c * n * sizeof(float));
  float* b = (float*)zeros(c * n * sizeof(float));
  zcollQuantConfig_t qc = ZCOLL_QUANT_CONFIG_INITIALIZER;
  qc.bits = 8;
  NCCL_OK(ncclAllGather(in, a, c, ncclFloat32, comm, NULL));
  ZCOLL_OK(zcollQuantizedAllGather(in, b, c, zcollFloat32, &qc, z, NULL));
  CHECK(same(a, b, c * n * sizeof(float)), "ZCOLL_NCCL_QUANTIZE: ncclAllGather is not qwZ INT8");
  qc.bits = 4;
  qc.intraBits = 4;
  NCCL_OK(ncclReduceScatter(in, a, c, ncclFloat32, ncclSum, comm, NULL));
  ZCOLL_OK(zcollQuantizedReduceScatter(in, b, c, zcollFloat32, zcollSum, &qc, z, NULL));
  CHECK(same(a, b, c * sizeof(float)), "ZCOLL_NCCL_QUANTIZE: ncclReduceScatter is not qgZ INT4");
  NCCL_OK(ncclReduceScatter(in, a, c, ncclFloat32, ncclMax, comm, NULL));
  ZCOLL_OK(zcollReduceScatter(in, b, c, zcollFloat32, zcollMax, z, NULL));
  CHECK(same(a, b, c * sizeof(float)), "ZCOLL_NCCL_QUANTIZE quantized a Max reduce-scatter");
  int32_t* iv = (int32_t*)zeros(c * sizeof(int32_t));
  int32_t* ia = (int32_t*)zeros(c * n * sizeof(int32_t));
  for (size_t i = 0; i < c; ++i) iv[i] = (int32_t)(i * 31 + (size_t)rank);
  NCCL_OK(ncclAllGather(iv, ia, c, ncclInt32, comm, NULL));
  CHECK(ia[(n - 1) * c + 9] == (int32_t)(9 * 31 + n - 1), "ZCOLL_NCCL_QUANTIZE changed an int32 all-gather");
  free(in), free(a), free(b), free(iv), free(ia);
}

/* ---- fallback: ZCOLL_NCCL_FALLBACK -------------------------------------------------------- */

/* An FP8 all-reduce (which zcoll does not serve) on `comm`: forwarded to the stand-in NCCL
 * (fallback_stub.c), on a fallback communicator of `size` ranks where this one is `rank`, or
 * refused naming the fallback. */
static void fp8AllReduce(ncclComm_t comm, int size, int rank, const char* expect,
                         const char* which) {
  uint8_t f8[16], out[16];
  memset(f8, 1, sizeof(f8));
  memset(out, 0, sizeof(out));
  if (strcmp(expect, "forwarded") == 0) {
    NCCL_OK(ncclAllReduce(f8, out, 16, ncclFloat8e4m3, ncclSum, comm, NULL));
    CHECK(out[0] == 0x5a && out[15] == 0x5a, "the FP8 all-reduce on %s did not reach the fallback",
          which);
    CHECK(out[1] == size && out[2] == rank, "the FP8 all-reduce on %s ran on a fallback comm of "
          "%d ranks as rank %d, not %d ranks as rank %d", which, out[1], out[2], size, rank);
  } else {
    NCCL_FAILS(ncclInvalidUsage, "fallback",
               ncclAllReduce(f8, out, 16, ncclFloat8e4m3, ncclSum, comm, NULL));
  }
}

/* The comm, and the children of split (also inside a group), shrink: each has a fallback
 * communicator of its own ranks. */
static void fallbackCheck(ncclComm_t comm, int rank, int n, const char* expect) {
  fp8AllReduce(comm, n, rank, expect, "the comm");
  ncclComm_t half = NULL;
  NCCL_OK(ncclCommSplit(comm, rank % 2, rank, &half, NULL));
  fp8AllReduce(half, n / 2, rank / 2, expect, "a split child");
  NCCL_OK(ncclCommDestroy(half));

  ncclComm_t pair = NULL;
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclCommSplit(comm, rank / 2, rank, &pair, NULL));
  NCCL_OK(ncclGroupEnd());
  fp8AllReduce(pair, 2, rank % 2, expect, "a child split inside a group");
  NCCL_OK(ncclCommDestroy(pair));

  if (rank != n - 1) { /* the excluded rank does not call, as in NCCL */
    int excluded = n - 1;
    ncclComm_t small = NULL;
    NCCL_OK(ncclCommShrink(comm, &excluded, 1, &small, NULL, NCCL_SHRINK_DEFAULT));
    fp8AllReduce(small, n - 1, rank, expect, "a shrunk child");
    NCCL_OK(ncclCommDestroy(small));
  }
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "api";
  const char* r = getenv("RANK");
  const char* w = getenv("WORLD_SIZE");
  if (!r || !w) {
    fprintf(stderr, "run under tools/zcollrun (RANK, WORLD_SIZE)\n");
    return 2;
  }
  gRank = atoi(r);
  const int n = atoi(w);
  int version = 0;
  NCCL_OK(ncclGetVersion(&version));
  CHECK(version == NCCL_VERSION_CODE, "ncclGetVersion %d, header %d", version, NCCL_VERSION_CODE);

  ncclComm_t comm = initNonBlocking(gRank, n);
  if (comm == NULL) return 1;
  zcollComm_t z = NULL;
  NCCL_OK(ncclZcollCommGetZcoll(comm, &z));
  if (strcmp(mode, "api") == 0) {
    collectives(comm, z, gRank, n);
    splitAndShrink(comm, gRank, n);
    abortWhileBlocked(comm, z, gRank);
    if (gRank == 0) oneThreadTwoRanks();
    if (gRank == 1) nonBlockingInitFails();
    badInput(comm, n);
  } else if (strcmp(mode, "quant") == 0) {
    quantized(comm, z, gRank, n);
  } else if (strcmp(mode, "policy") == 0) {
    policy(comm, z, gRank, n);
  } else if (strcmp(mode, "fallback") == 0) {
    fallbackCheck(comm, gRank, n, argc > 2 ? argv[2] : "refused");
  }
  /* ncclCommAbort frees a comm at once and tells its peers it failed; on a comm of one rank
   * (a split by rank) no peer is left to see that. Then every rank is done before the destroy. */
  ncclComm_t alone = NULL;
  NCCL_OK(ncclCommSplit(comm, gRank, 0, &alone, NULL));
  NCCL_OK(ncclCommAbort(alone));
  NCCL_FAILS(ncclInvalidArgument, "not a live communicator", ncclCommCount(alone, &version));
  ZCOLL_OK(zcollBarrier(z, NULL));
  NCCL_OK(ncclCommDestroy(comm));
  if (gFailures == 0) printf("rank %d: nccl_api_check %s passed\n", gRank, mode);
  return gFailures == 0 ? 0 : 1;
}
