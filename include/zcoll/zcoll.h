/*
 * zcoll: NCCL-style collectives with the ZeRO++ techniques (qwZ, hpZ, qgZ) as first-class calls.
 *
 * This header is the whole public C API. It is ABI-clean: opaque handles, one result enum,
 * growable configuration structs (size + magic + version first, fields only appended).
 *
 * Conventions that hold for every call unless its comment says otherwise:
 *  - Every function returns zcollResult_t. On failure a detailed message is available from
 *    zcollGetLastError(comm) (or zcollGetLastError(NULL) for calls without a communicator,
 *    which returns the calling thread's last message).
 *  - Buffers are owned by the caller and must stay valid until the call completes.
 *  - Host buffers: the call blocks until the local part of the collective is done; `stream`
 *    must be NULL.
 *  - Device (CUDA) buffers (cudaMalloc'd or managed memory of the calling thread's current device),
 *    in a build with CUDA on a machine with a device, for a communicator created while that device
 *    was current and already initialized by the process (cudaSetDevice, an allocation: as NCCL
 *    binds a communicator to it; before that, zcoll creates nothing on the GPU and device calls on
 *    the communicator fail with zcollUnsupported saying so): every collective, the ZeRO++ ones and
 *    zcollSend/zcollRecv take them, with `stream` the CUDA stream that orders them (NULL: the
 *    default stream). The data work (copies, reductions, quantization) runs as kernels on the
 *    device. Bytes to a rank of the same node go device to device (the cuda_ipc transport: CUDA
 *    IPC, two ranks on one GPU included) when both ranks' current devices at init can share memory
 *    and their path is within ZCOLL_CUDA_IPC_LEVEL; bytes to other ranks go through pinned host
 *    memory in pipelined 1 MiB chunks, the copies to and from the host overlapping the network, or
 *    straight to UCX where both ranks' UCX reports CUDA memory support (GPUDirect; Debian's UCX has
 *    none). ZCOLL_DEVICE_TRANSPORT=cuda_ipc|staged forces one way; `zcoll_info --routes` shows each
 *    peer's. For the quantized collectives (qwZ, qgZ, hpZ with a quantization config) only their
 *    quantized form leaves the device. On CUDA a call returns once complete by default
 *    (ZCOLL_DEVICE_CALLS=auto): it runs after the work queued on `stream` before it, `stream`
 *    is synchronized, and no wait is left queued on any stream, so work queued after it sees
 *    its result. With ZCOLL_DEVICE_CALLS=async (the default on devices that trust queued calls)
 *    a call returns once enqueued, as in NCCL (for calls in a group, zcollGroupEnd enqueues
 *    them): it starts after the work queued on `stream` before it, and work queued on `stream`
 *    after it sees its result; its buffers must stay valid until then. On CUDA that mode has
 *    not run on a GPU and its stream wait is released by work zcoll submits later, which CUDA
 *    allows to deadlock when streams share a hardware queue; it is not the default there until
 *    the model that submits a call's whole device work at call time has passed the GPU kit.
 *    That model is ZCOLL_DEVICE_CALLS=stream (not yet run on a GPU): zcollAllGather,
 *    zcollReduceScatter, zcollAllReduce, zcollQuantizedAllGather, zcollAllGatherHier,
 *    zcollAllGatherFromSecondary, zcollQuantizedReduceScatter (its two-hop algorithms) and
 *    zcollQuantizedAllReduce (with or without residuals; with qgZ's two-hop algorithms too) on
 *    device buffers enqueue
 *    their whole device work on `stream` (copies, reduction and (de)quantization kernels, stream
 *    memory writes and waits on flags that only the
 *    peers' GPU work sets) and return; work queued on `stream` after the call sees its result,
 *    and its buffers must stay valid until then. It applies to a communicator whose ranks each
 *    have their own device or process, two or more per node, every pair of a node over
 *    cuda_ipc. Across nodes zcollAllGather, zcollQuantizedAllGather, zcollAllGatherHier,
 *    zcollAllGatherFromSecondary (which stays inside each node), zcollReduceScatter,
 *    zcollAllReduce and zcollQuantizedAllReduce below the size it quantizes at (the exact
 *    all-reduce) are enqueued so, and a call returns without waiting for earlier calls'
 *    transfers (with ZCOLL_CHECK_CALLS=on it first trades its descriptor, after them): their
 *    pieces for ranks of other nodes (a gather's, on nodes of
 *    equal size, to the rank of the same local index only, which passes them on inside its
 *    node; a reduction's: only the part each rank reduces) travel through pinned host buffers that the communicator's
 *    progress thread sends and receives over the network, making no CUDA call, and flags in
 *    host memory tell the stream (so host calls on that communicator wait for those transfers
 *    first). Other calls, and every call of a communicator that does not qualify
 *    (INFO log says why), return complete as with sync. Calls must be made in the same order on every rank, and calls on
 *    different communicators issued in the same order on every rank (or serialized), as NCCL
 *    requires; the results are bit-identical to the synchronous path's on the same buffers
 *    (the reductions sum in the order of the algorithm it picks for the size: rank order,
 *    around the ring, or recursive doubling's tree; where it picks one they cannot follow, a
 *    hierarchical one forced by ZCOLL_ALGO_* or shm_read with windows registered, the call
 *    runs synchronously).
 *    Arguments are checked before it returns (errors as for host calls); arrays and configs it takes (all-to-all-v counts, zcollQuantConfig_t) are copied
 *    and may be reused at once. A failure found once it runs (a peer, the network, the call check
 *    below) puts the communicator in the error state: zcollCommGetAsyncError and
 *    zcollGetLastError(comm) report it, the next call returns it, and `stream` is released (the
 *    output buffers are then undefined). A call returns once complete instead, `stream`
 *    synchronized, with ZCOLL_DEVICE_CALLS=sync or auto on CUDA (read at init), with
 *    CUDA_DEVICE_MAX_CONNECTIONS=1 (one hardware queue: a wait on `stream` queued before the call's own work would block that
 *    work), and for a group spanning several communicators or mixing host and device buffers. At
 *    most 64 calls of a communicator are queued and not finished; the next waits, up to the
 *    timeout, for the oldest (then zcollTimeout). Ranks of one process (threads) must not share a
 *    stream, the default stream (NULL) included, as with NCCL: give each rank its own stream
 *    (e.g. cudaStreamNonBlocking); a queued call on a stream that a peer rank of this process
 *    (a member of its communicator family, e.g. another rank of the same communicator) has
 *    calls in flight on is refused (zcollInvalidUsage). Calls of one rank on several
 *    communicators may share a stream, which orders them, as NCCL allows. CUDA-graph capture:
 *    with ZCOLL_DEVICE_CALLS=stream, on a communicator of one node that runs stream-triggered
 *    calls (above), those calls may be made on a stream being captured: the graph records
 *    their whole device work (their flags are handshakes whose values never change, so every launch of the graph
 *    waits for and writes the right ones) and every launch runs them again, on the buffers and
 *    settings of the capture (stochastic rounding reuses the capture's seed). A launch is a call:
 *    launch graphs in the same order on every rank, in stream order with the communicator's
 *    other calls (on the stream of the calls around it, or joined to them by events), and
 *    synchronize before destroying the communicator, as with NCCL (zcollCommDestroy and
 *    zcollCommAbort wait for launches in flight, up to the timeout; an abort releases them).
 *    Every other call (and every call of a communicator across nodes) on a stream being
 *    captured is refused (zcollInvalidUsage) before anything is recorded on it, the
 *    communicator still usable; capture has not yet run on a GPU. A CUDA failure is
 *    zcollCudaError. Without a device (or CUDA
 *    support, see zcoll_info) device pointers are not recognised: pass host buffers. Buffers on
 *    another device than the communicator's (the one current at its creation) are refused with
 *    zcollInvalidUsage naming both devices; the buffers of one call on two devices with
 *    zcollInvalidArgument. A process that has not used CUDA (no current context, no active
 *    primary context) is never asked about its pointers, so a job on host buffers creates no
 *    CUDA context on a machine with GPUs. While its calls are queued zcoll allocates, frees and
 *    maps no device or pinned memory (all of it is made when the communicator is created,
 *    or allocated in stream order): those synchronize the device implicitly and would deadlock
 *    against a queued call's stream. A communicator's device memory is freed when it is
 *    destroyed, as soon as no stream of the process waits for a call (later otherwise); memory a
 *    call's abandoned device work may still use (after zcollCommAbort or a timeout with the
 *    device stuck) is never freed.
 *  - The buffers of one call are all host or all device memory (zcollInvalidArgument
 *    otherwise), and every rank passes the same kind to a call (checked with
 *    ZCOLL_CHECK_CALLS=on, below).
 *  - A communicator is used by one thread at a time (like NCCL). zcollCommAbort,
 *    zcollCommRevoke and zcollCommGetAsyncError are the calls that may be made from another
 *    thread while a collective is running (a watchdog polling the async error, as torch's).
 *  - After any error other than zcollInvalidArgument / zcollInvalidUsage detected before
 *    communication started (and after any failure of an enqueued device call), the
 *    communicator is in an error state: every further call returns that error (see
 *    zcollCommGetAsyncError), and only zcollCommShrink (ZCOLL_SHRINK_ABORT: the ranks that
 *    remain go on without the failed ones), zcollCommDestroy and zcollCommAbort work (and the
 *    queries, and passing it as oldComm to zcollRebuildFromSecondary/zcollRebuildFromBuddy,
 *    which only read its layout).
 *  - Nothing blocks forever: waits are bounded by the communicator's timeout (ZCOLL_TIMEOUT
 *    seconds, or zcollConfig_t.timeoutSec), after which the call returns zcollTimeout.
 *  - Every rank must make the same collective calls in the same order with the same count,
 *    datatype, op, root, quantization settings and buffer kind (host or device). With
 *    ZCOLL_CHECK_CALLS=on (read at init) a call that differs fails on every rank with
 *    zcollInvalidUsage naming the first differing field and a rank, before any data moves
 *    (cost: one 48-byte all-gather per collective). Off (the default), a mismatched call is
 *    undefined: it may fail on some ranks only, time out, or leave wrong data.
 */
#ifndef ZCOLL_ZCOLL_H_
#define ZCOLL_ZCOLL_H_

#include <stddef.h>
#include <stdint.h>

#include "zcoll/zcoll_version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define ZCOLL_API __attribute__((visibility("default")))
#else
#define ZCOLL_API
#endif

/* The enumerations below have int as their underlying type in C++ too (in C an enumeration is an
 * int already), so any int value may be passed where one is expected, without undefined
 * behaviour; a value outside the enumeration is rejected with zcollInvalidArgument. */
#ifdef __cplusplus
#define ZCOLL_ENUM_BASE : int
#else
#define ZCOLL_ENUM_BASE
#endif

/* The CUDA stream type, declared without including CUDA headers (same as cudaStream_t). */
typedef struct CUstream_st* zcollStream_t;

/* An opaque communicator handle. */
typedef struct zcollComm* zcollComm_t;

/* ------------------------------------------------------------------------------------------ */
/* Results                                                                                      */
/* ------------------------------------------------------------------------------------------ */

typedef enum ZCOLL_ENUM_BASE {
  zcollSuccess = 0,
  zcollSystemError = 1,      /* an OS call failed (socket, shared memory, thread, memory) */
  zcollInternalError = 2,    /* a bug in zcoll or a library it uses */
  zcollInvalidArgument = 3,  /* a bad argument: NULL pointer, bad dtype/op, rank out of range */
  zcollInvalidUsage = 4,     /* a call made at the wrong time or with mismatched peers */
  zcollRemoteError = 5,      /* a peer failed or disconnected */
  zcollInProgress = 6,       /* non-blocking initialization not finished (reserved) */
  zcollTimeout = 7,          /* a wait exceeded the communicator's timeout */
  zcollUnsupported = 8,      /* a valid request this build or version cannot serve */
  zcollCudaError = 9,        /* a CUDA call failed */
  zcollNumResults = 10
} zcollResult_t;

/* A static, one-line description of the code that also says what to do next. Never NULL. */
ZCOLL_API const char* zcollGetErrorString(zcollResult_t result);

/* The detailed message of the last failure seen on `comm`; with comm == NULL, the last failure of
 * the calling thread (any comm). Returns "" when there was none. The string is owned by zcoll and
 * stays valid until the next call on the same comm (or thread, for NULL). */
ZCOLL_API const char* zcollGetLastError(zcollComm_t comm);

/* Version as ZCOLL_VERSION_CODE (MAJOR*10000 + MINOR*100 + PATCH). */
ZCOLL_API zcollResult_t zcollGetVersion(int* version);

/* *supported = 1 when this process recognises device buffers (a build with CUDA, on a machine
 * with a CUDA device and driver: see the conventions above), else 0. A framework binding checks
 * it before passing device pointers: without device support they would be taken for host
 * addresses. */
ZCOLL_API zcollResult_t zcollGetDeviceSupport(int* supported);

/* Allocates `size` bytes (> 0) of zero-filled, page-aligned host memory that the ranks of this
 * node can read in place. When a collective's host buffer lies entirely inside one such
 * allocation, the node peers that read it map it (once: the mapping is kept for later calls) and
 * copy or reduce it with plain loads instead of a copy by the kernel (process_vm_readv): the shm_read algorithms of
 * all-gather, reduce-scatter and all-reduce, and hpZ's shm_read node stages (docs/MEMORY.md,
 * "Registered host memory"). Every collective accepts any buffer; this only makes the reads
 * inside a node cheaper, and ranks may mix such buffers with ordinary ones. Not tied to a
 * communicator; callable from any thread. The memory is shared (MAP_SHARED): a process forked
 * after the allocation shares it rather than copying it. zcollInvalidArgument for a NULL ptr, a
 * size of 0, or a size above SIZE_MAX / 2 (no address space holds it, e.g. SIZE_MAX);
 * zcollSystemError (with the reason) when the machine cannot reserve the memory.
 * Free it with zcollMemFreeHost. */
ZCOLL_API zcollResult_t zcollMemAllocHost(void** ptr, size_t size);

/* Frees memory from zcollMemAllocHost by the pointer it returned; NULL does nothing. Any other
 * pointer, or one freed already, is zcollInvalidArgument. The memory must not be in use by a
 * collective still running (as for any buffer). Node peers that mapped it let it go at their
 * next in-place read of this process's buffers or when their communicator is destroyed; the
 * system gets the pages back then (docs/MEMORY.md, "Registered host memory"). */
ZCOLL_API zcollResult_t zcollMemFreeHost(void* ptr);

/* Windows: device buffers that a communicator's node peers read and write in place (NCCL 2.27's
 * ncclCommWindowRegister / ncclCommWindowDeregister, same arguments and argument order).
 *
 * zcollCommWindowRegister registers [buff, buff + size) of device memory with `comm`: every node
 * peer reached device to device (the cuda_ipc transport; `zcoll_info --routes`) maps it once,
 * now, and from then on the algorithms that read their peers in place (all-gather,
 * reduce-scatter and all-reduce `shm_read`, hpZ's `*_shm_read`; docs/ZEROPP.md) read and write
 * it there with their own kernels, with no copy through zcoll's memory, when every rank's
 * buffers of a call lie inside windows registered on that comm; a call where one rank's do not
 * moves its bytes by messages on every rank (the results are the same either way). Mapping a
 * peer's memory synchronizes the device, so it never happens inside a call: without windows no
 * peer's device buffer is read in place. Collective over `comm`: every rank calls it, in the same
 * order relative to the comm's other calls, each with its own buffer and size (they may differ);
 * it blocks until every rank has registered and waits (bounded by the timeout) until no queued
 * device call of this process holds a stream. *win names the window on this rank until
 * zcollCommWindowDeregister or the comm's destruction. The buffer must stay allocated until
 * then (peers read it; CUDA leaves freeing mapped memory undefined), must lie inside one
 * allocation that can be shared (cudaMalloc or a caching allocator's segment of it; not
 * cudaMallocAsync or virtual-memory allocations: zcollUnsupported) and on the comm's device
 * (another device: zcollInvalidUsage). winFlags must be ZCOLL_WIN_DEFAULT. zcollInvalidArgument
 * for a NULL comm, buff or win, a size of 0, other flags, or host memory (host buffers need no
 * window: memory from zcollMemAllocHost is read in place on every communicator); zcollUnsupported
 * in a build or process without device support; zcollInvalidUsage between zcollGroupStart and
 * zcollGroupEnd. A rank that fails its part before the exchange leaves the others waiting, as a
 * collective would; a failure during it breaks the comm on every rank (zcollRemoteError).
 *
 * zcollCommWindowDeregister, collective in the same way, closes every peer's mapping of the
 * window and returns once every rank has, so the caller may free the buffer after it returns.
 * win must be a window of `comm` not yet deregistered (zcollInvalidArgument otherwise). The
 * comm's destruction forgets what is left and closes this rank's mappings of its peers' windows;
 * free a buffer registered that way only once every node peer has destroyed its comm too. */
typedef struct zcollWindow* zcollWindow_t;
#define ZCOLL_WIN_DEFAULT 0
ZCOLL_API zcollResult_t zcollCommWindowRegister(zcollComm_t comm, void* buff, size_t size,
                                                zcollWindow_t* win, int winFlags);
ZCOLL_API zcollResult_t zcollCommWindowDeregister(zcollComm_t comm, zcollWindow_t win);

/* ------------------------------------------------------------------------------------------ */
/* Types                                                                                        */
/* ------------------------------------------------------------------------------------------ */

#define ZCOLL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[ZCOLL_UNIQUE_ID_BYTES];
} zcollUniqueId;

/* NCCL's numbering. */
typedef enum ZCOLL_ENUM_BASE {
  zcollInt8 = 0,
  zcollChar = 0,
  zcollUint8 = 1,
  zcollInt32 = 2,
  zcollInt = 2,
  zcollUint32 = 3,
  zcollInt64 = 4,
  zcollUint64 = 5,
  zcollFloat16 = 6,
  zcollHalf = 6,
  zcollFloat32 = 7,
  zcollFloat = 7,
  zcollFloat64 = 8,
  zcollDouble = 8,
  zcollBfloat16 = 9,
  zcollNumTypes = 10
} zcollDataType_t;

/* NCCL's numbering. Avg divides by the number of ranks (integer division for integer types). */
typedef enum ZCOLL_ENUM_BASE {
  zcollSum = 0,
  zcollProd = 1,
  zcollMax = 2,
  zcollMin = 3,
  zcollAvg = 4,
  zcollNumOps = 5
} zcollRedOp_t;

/* ------------------------------------------------------------------------------------------ */
/* Communicator configuration (growable: always start from ZCOLL_CONFIG_INITIALIZER)           */
/* ------------------------------------------------------------------------------------------ */
/* The rule for every growable struct (zcollConfig_t, zcollQuantConfig_t, zcollStats_t): `size`
 * and `magic` must be right (zcollInvalidArgument otherwise). A struct from an older header
 * (smaller size) is read as far as it goes; the fields it lacks take their defaults. A struct from
 * a newer header (larger size or newer version) is accepted: the fields this library knows are
 * used, the ones it does not know are ignored and a warning is logged (ZCOLL_DEBUG=WARN). */

#define ZCOLL_CONFIG_MAGIC 0x7a636667u /* "zcfg" */
#define ZCOLL_CONFIG_UNDEF_INT (-2147483647 - 1)

typedef struct {
  size_t size;           /* sizeof(zcollConfig_t) as compiled by the caller */
  unsigned int magic;    /* ZCOLL_CONFIG_MAGIC */
  unsigned int version;  /* ZCOLL_VERSION_CODE the caller compiled against */
  /* Seconds any wait may last before zcollTimeout; UNDEF: ZCOLL_TIMEOUT (default 300). */
  int timeoutSec;
  /* Host identity override: ranks with equal hostId form one node. NULL: ZCOLL_HOSTID, else
   * hostname + boot id + IPC namespace. Lets one process emulate several nodes (tests). */
  const char* hostId;
  /* Name used in log lines, zcoll_info --status and flight records (docs/FLIGHT_RECORDER.md;
   * the id there tells communicators apart, names may repeat); NULL: "comm", or for a split,
   * shrink or grow the parent's name + ".split", ".shrink", ".grow". The string is copied. */
  const char* commName;
} zcollConfig_t;

#define ZCOLL_CONFIG_INITIALIZER                                                         \
  {                                                                                      \
    sizeof(zcollConfig_t), ZCOLL_CONFIG_MAGIC, ZCOLL_VERSION_CODE, ZCOLL_CONFIG_UNDEF_INT, \
        NULL, NULL                                                                       \
  }

/* ------------------------------------------------------------------------------------------ */
/* Communicator lifecycle                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* Creates a unique id on the root rank and starts the rendezvous service it names (a TCP
 * listener bounded by ZCOLL_TIMEOUT, on the address of the interface ZCOLL_SOCKET_IFNAME selects;
 * with it unset, on MASTER_ADDR's address when that is this machine's, else on the first up
 * interface that is not loopback or docker; docs/MULTI_NODE.md). Pass the id to every
 * rank out of band. One id serves one zcollCommInitRank round: using it again within
 * ZCOLL_TIMEOUT fails at once with zcollInvalidUsage ("already used"). The id holds a random
 * 64-bit key: connections without it are refused, and no number of idle, slow or garbage
 * connections to the service delays the ranks (each is dropped after 2 s without a hello). */
ZCOLL_API zcollResult_t zcollGetUniqueId(zcollUniqueId* uniqueId);

/* Collective over `nranks` callers presenting the same id, each with a distinct rank in
 * [0, nranks). Blocks until all arrived (or timeout). On failure *comm is set to NULL. */
ZCOLL_API zcollResult_t zcollCommInitRank(zcollComm_t* comm, int nranks, zcollUniqueId commId,
                                          int rank);

/* As zcollCommInitRank, with settings. config may be NULL (all defaults). */
ZCOLL_API zcollResult_t zcollCommInitRankConfig(zcollComm_t* comm, int nranks,
                                                zcollUniqueId commId, int rank,
                                                zcollConfig_t* config);

/* Initializes from the environment, without an out-of-band id. Rank and size come from the
 * first set found of: RANK/WORLD_SIZE (torchrun, zcollrun), OMPI_COMM_WORLD_RANK/SIZE (Open MPI),
 * PMI_RANK/PMI_SIZE, SLURM_PROCID/SLURM_NTASKS. The rendezvous address from ZCOLL_COMM_ID=host:port,
 * else MASTER_ADDR/MASTER_PORT. Rank 0 listens on that address (WORLD_SIZE 1: no rendezvous at
 * all, init is immediate). config may be NULL.
 * Who may join: with ZCOLL_AUTH_TOKEN set (the same secret on every rank; zcollrun sets a random
 * one) the rendezvous is keyed by it, and a process without it is refused without affecting the
 * ranks. Without it the key is derived from the address alone, so any process that can reach the
 * address can take a rank's place before that rank arrives (a size other than WORLD_SIZE is
 * always refused): the job is then protected only by who can reach the address. A rank whose
 * WORLD_SIZE differs from rank 0's fails with zcollInvalidUsage naming both sizes. */
ZCOLL_API zcollResult_t zcollCommInitFromEnv(zcollComm_t* comm, zcollConfig_t* config);

/* Collective over `comm`: ranks with equal color form a new communicator, ordered by key then
 * by rank in `comm`. Any color < 0 (ZCOLL_SPLIT_NOCOLOR, or another negative value) takes no part
 * and gets *newcomm = NULL. config may be NULL (inherit the parent's settings).
 * A rank whose arguments are wrong (newcomm NULL, a bad config), or that cannot set up its part
 * locally, still takes part in the split's exchange, so no rank is left waiting: every rank then
 * fails at once, that rank with its own error (zcollInvalidArgument for an argument) and every
 * other rank with zcollInvalidUsage naming it; no communicator is created on any rank, *newcomm
 * is NULL everywhere, and the parent stays usable on every rank. (A NULL, destroyed, aborted or
 * broken parent cannot take part: the other ranks then fail as in any collective a rank misses.) */
#define ZCOLL_SPLIT_NOCOLOR (-1)
ZCOLL_API zcollResult_t zcollCommSplit(zcollComm_t comm, int color, int key, zcollComm_t* newcomm,
                                       zcollConfig_t* config);

/* Revoking and shrinking: keep going when ranks die or hang (docs/FAULT_TOLERANCE.md).
 *
 * zcollCommRevoke puts `comm` in the error state on purpose, from any thread, and keeps it for a
 * shrink: a call running on it in another thread returns zcollRemoteError within about 10 ms
 * (its outputs undefined; as any failed call, it tells its peers, so those blocked on this rank
 * fail at once too), queued calls fail without running, and later calls fail at once with
 * zcollRemoteError saying it was revoked. Only zcollCommShrink (with ZCOLL_SHRINK_ABORT),
 * zcollCommDestroy, zcollCommAbort and the queries remain. Revoking again does nothing; a NULL or
 * dead handle is zcollInvalidArgument.
 *
 * zcollCommShrink (NCCL's ncclCommShrink, same argument order): the ranks of `comm` that are not
 * in excludeRanks[0..excludeCount) build a new communicator *newcomm without them, ranks
 * renumbered in the parent's order (the parent's rank r becomes r minus the number of excluded
 * ranks below it), with its own connections, node layout and subgroups for the new membership
 * (a node left with fewer ranks makes an uneven layout: qgZ falls back to its flat algorithm and
 * hpZ refuses it, as docs/ZEROPP.md says for any uneven layout).
 * Collective over the ranks that stay; every one must pass the same set (in any order), else
 * none gets a communicator: a rank that hears from one whose set differs fails with
 * zcollInvalidUsage naming it, and a rank waiting for one that left it out fails when that rank
 * leaves (zcollRemoteError) or at the timeout. It needs nothing from an excluded
 * rank (dead or alive) nor from the parent's rendezvous root. shrinkFlags:
 *   ZCOLL_SHRINK_DEFAULT  the parent must be healthy: calls queued on it run first; a broken or
 *                         revoked parent is zcollInvalidUsage (use ZCOLL_SHRINK_ABORT);
 *   ZCOLL_SHRINK_ABORT    for a broken parent, or one a peer left hanging: revokes it first (as
 *                         zcollCommRevoke; queued calls fail without running) and tells its peers.
 * A rank that stays and dies, aborts or destroys its comm during the shrink fails it on every
 * other rank that stays (zcollRemoteError naming it: within about 50 ms for a process of the same
 * machine or a comm closed, as soon as the transport reports it for a remote process, at the
 * latest at the parent's timeout); calling zcollCommShrink
 * again with it excluded too then works. Each call on `comm` is a new attempt, whatever it
 * returned: one that took no part, failed its arguments or was refused counts too. The ranks
 * that stay in a call must have made the same number of zcollCommShrink calls on `comm` before
 * it (a rank that skipped one, even one it was excluded from, stays out of the later ones too).
 * A rank that stays and never calls fails the others at the
 * parent's timeout. A rank that calls with itself in excludeRanks takes no part: zcollSuccess,
 * *newcomm = NULL, and the call counts as an attempt (it may stay in a later shrink of `comm`). config may be NULL (inherit the parent's settings, as a split). Argument
 * errors (newcomm NULL, excludeCount < 0, above the rank count or with excludeRanks NULL, a
 * rank out of range or repeated, every rank excluded, unknown flags, a bad config) are
 * zcollInvalidArgument before any exchange; between zcollGroupStart and zcollGroupEnd it is zcollInvalidUsage. The parent is
 * left as it was (revoked with ZCOLL_SHRINK_ABORT; broken if the exchange itself failed):
 * destroy it when done with it. */
#define ZCOLL_SHRINK_DEFAULT 0
#define ZCOLL_SHRINK_ABORT 1
ZCOLL_API zcollResult_t zcollCommRevoke(zcollComm_t comm);
ZCOLL_API zcollResult_t zcollCommShrink(zcollComm_t comm, const int* excludeRanks, int excludeCount,
                                        zcollComm_t* newcomm, zcollConfig_t* config,
                                        int shrinkFlags);

/* Growing: new ranks join a live communicator (NCCL 2.29's ncclCommGetUniqueId / ncclCommGrow,
 * same arguments and argument order; docs/FAULT_TOLERANCE.md).
 *
 * zcollCommGetUniqueId, on one member of `comm` (the coordinator; any rank), makes the id the new
 * ranks join with and starts the rendezvous service it names in this process (on
 * the address zcollGetUniqueId would take). Hand it to the new ranks out of band. One
 * id at a time per communicator: another call before a zcollCommGrow on `comm` has used the last
 * one is zcollInvalidUsage, until that id expires (`comm`'s timeout after it was made: its service
 * then gives up). A NULL uniqueId is zcollInvalidArgument; a broken comm is refused as any call.
 *
 * zcollCommGrow makes *newcomm of nRanks ranks: the members of `comm` keep their ranks
 * [0, size of comm), and the new ranks take [size of comm, nRanks) (NCCL's numbering). Called by
 * every member and every new rank:
 *   the coordinator:     zcollCommGrow(comm, nRanks, &id, -1, &newcomm, config)
 *   every other member:  zcollCommGrow(comm, nRanks, NULL, -1, &newcomm, config)
 *   each new rank:       zcollCommGrow(NULL, nRanks, &id, rank, &newcomm, config)
 * Every rank passes the same nRanks, and every rank in [size of comm, nRanks) must join exactly
 * once. The new comm has its own connections, node layout and subgroups (NODE, RAIL) for the new
 * membership: new ranks join the node of their host identity (config hostId, ZCOLL_HOSTID, or the
 * machine), so a grow can make a layout even again after a shrink left it uneven (hpZ needs
 * even nodes). config NULL: members inherit `comm`'s settings (as a split); a new rank's config
 * gives its own host identity and name (a name left unset: the members'), while the settings
 * every rank must share (timeout, ZCOLL_REDUCE_PARTIALS, ZCOLL_CHECK_CALLS, ZCOLL_ALGO_*) come
 * from the members. `comm` is left as it was (healthy): destroy it when done with it. The id is
 * used by the grow whatever its outcome (make a new one to try again); an argument error leaves
 * it unused.
 * Failures, on every rank that takes part, none hanging past the timeout:
 *  - members that disagree (nRanks, none or two passing an id, one that could not set up its
 *    part): zcollInvalidUsage naming the member, nothing created, and the new ranks waiting at
 *    the rendezvous are refused at once (zcollRemoteError, "called it off");
 *  - a member that dies, aborts or destroys `comm` before the coordinator has met the new ranks:
 *    zcollRemoteError naming it on the other members (within about 50 ms for a process of this
 *    machine or a comm closed), the new ranks refused at once;
 *  - a new rank that never comes: zcollTimeout at the timeout on every rank, naming the missing
 *    new ranks; a new rank that dies after the rendezvous: as a rank dying during init;
 *  - a broken or revoked `comm`: zcollInvalidUsage (shrink it first), the new ranks refused.
 * Argument errors are zcollInvalidArgument before any exchange: newcomm NULL; on a member
 * (comm set): rank other than -1, nRanks not above comm's size, a uniqueId that is not the one
 * zcollCommGetUniqueId handed out on `comm` (or was used, or expired); on a new rank (comm NULL):
 * uniqueId NULL or not from zcollCommGetUniqueId, nRanks not above the size of the comm that
 * grows, rank outside [that size, nRanks); a bad config. On a member between zcollGroupStart
 * and zcollGroupEnd it is zcollInvalidUsage. On failure *newcomm is NULL. */
ZCOLL_API zcollResult_t zcollCommGetUniqueId(zcollComm_t comm, zcollUniqueId* uniqueId);
ZCOLL_API zcollResult_t zcollCommGrow(zcollComm_t comm, int nRanks, const zcollUniqueId* uniqueId,
                                      int rank, zcollComm_t* newcomm, zcollConfig_t* config);

/* Frees the communicator. Not collective, but peers still communicating with it will see
 * zcollRemoteError. Device calls still enqueued run first (as ncclCommDestroy flushes; each
 * bounded by the timeout), so their results are on their streams. comm may be NULL (no-op). */
ZCOLL_API zcollResult_t zcollCommDestroy(zcollComm_t comm);

/* Puts the communicator in the error state, makes any call running on it (in another thread)
 * return zcollRemoteError within ZCOLL_ABORT_WAIT_MS, then frees it. Enqueued device calls
 * that have not finished are dropped and their streams released (outputs undefined); zcoll does
 * not wait for their device work (even work that never ends, such as a stream stuck behind a
 * kernel of the caller's): it is abandoned, with the device memory it may use. Safe from any
 * thread. A call and the abort are ordered at one point inside zcoll, just before the call
 * leaves: a call still inside zcoll when the abort takes effect returns zcollRemoteError even if
 * its transfers had all completed (its outputs are then undefined), so a call that returns
 * zcollSuccess completed before the abort. The handle stays allocated until every call that was
 * inside zcoll on it has returned (if one stays past ZCOLL_ABORT_WAIT_MS it is left allocated and
 * zcollCommAbort returns zcollInternalError). A call made on the handle once the abort has begun
 * returns zcollInvalidUsage, and once it is freed zcollInvalidArgument (freed handles are
 * recognised without being read; zcollGetLastError(comm) then gives the thread's message). */
ZCOLL_API zcollResult_t zcollCommAbort(zcollComm_t comm);

/* zcollSuccess while healthy, else the error that broke the communicator. */
ZCOLL_API zcollResult_t zcollCommGetAsyncError(zcollComm_t comm, zcollResult_t* asyncError);

ZCOLL_API zcollResult_t zcollCommCount(const zcollComm_t comm, int* count);
ZCOLL_API zcollResult_t zcollCommUserRank(const zcollComm_t comm, int* rank);
/* Number of nodes (distinct host identities) and this rank's node index (nodes numbered by their
 * lowest rank). */
ZCOLL_API zcollResult_t zcollCommNodeCount(const zcollComm_t comm, int* nodes);
ZCOLL_API zcollResult_t zcollCommNodeRank(const zcollComm_t comm, int* node);
/* Index of this rank among the ranks of its node (by rank), and how many ranks its node has. */
ZCOLL_API zcollResult_t zcollCommLocalRank(const zcollComm_t comm, int* localRank);
ZCOLL_API zcollResult_t zcollCommLocalSize(const zcollComm_t comm, int* localSize);
/* The device this rank works on: its ordinal in this process (CUDA: the device that was current
 * when the communicator was made, as NCCL binds a communicator to it; a child of split, shrink
 * or grow keeps its parent's), or -1 when the rank has none (no device support, or the device was
 * not yet initialized by the process at init). */
ZCOLL_API zcollResult_t zcollCommDevice(const zcollComm_t comm, int* device);

/* *device = the device that holds `ptr` (its ordinal in this process), or -1 for host memory
 * (NULL, memory no device component claims, or any pointer without device support). */
ZCOLL_API zcollResult_t zcollPointerGetDevice(const void* ptr, int* device);

/* Local, stream-ordered operations on a communicator's device, for NCCL's PreMulSum (each
 * rank's input multiplied by its scalar, then summed: libzcoll_nccl.so scales into scratch, then
 * runs the Sum). They move nothing between ranks and are not collective; they are ordered on
 * `stream` only (not with the comm's calls, which are ordered after them when issued later on
 * the same stream), and return once enqueued there.
 *
 * zcollScale: dst[i] = src[i] * scalar for i < count, in place when dst == src (otherwise
 * disjoint). Host buffers (stream NULL, done on return) or device buffers of comm's device.
 * `scalar` is one element of datatype: in host memory, read before the call returns, or with
 * scalarOnDevice = 1 in device memory, read when the work runs (device buffers only). The
 * product is taken in the reduction's accumulator type and rounded once (16-bit floats through
 * fp32; integers wrap), so host and device give the same bits.
 * zcollMemAllocAsync / zcollMemFreeAsync: `size` bytes of comm's device memory allocated and
 * freed in `stream`'s order (CUDA: cudaMallocAsync / cudaFreeAsync on stream; no implicit device
 * synchronization): usable by work queued on stream after the allocation, given back once
 * stream has run the work queued before the free. zcollUnsupported when comm's rank has no
 * device. */
ZCOLL_API zcollResult_t zcollScale(void* dst, const void* src, size_t count,
                                   zcollDataType_t datatype, const void* scalar,
                                   int scalarOnDevice, zcollComm_t comm, zcollStream_t stream);
ZCOLL_API zcollResult_t zcollMemAllocAsync(void** ptr, size_t size, zcollComm_t comm,
                                           zcollStream_t stream);
ZCOLL_API zcollResult_t zcollMemFreeAsync(void* ptr, zcollComm_t comm, zcollStream_t stream);

/* Paths a byte can take. */
typedef enum ZCOLL_ENUM_BASE {
  zcollPathSelf = 0,  /* to this rank itself */
  zcollPathIntra = 1, /* to a rank of the same node */
  zcollPathInter = 2, /* to a rank of another node */
  zcollNumPaths = 3
} zcollPath_t;

/* Counters since the communicator was created (or last reset). Growable like zcollConfig_t:
 * set `size` to sizeof(zcollStats_t) before the call; a struct from an older header (smaller
 * size, at least through bytesSent) gets the fields it has, nothing past `size` is written. */
typedef struct {
  size_t size;
  uint64_t bytesSent[zcollNumPaths];
  uint64_t bytesRecv[zcollNumPaths];
  uint64_t opCount; /* collectives and point-to-point operations completed */
} zcollStats_t;

ZCOLL_API zcollResult_t zcollCommGetStats(const zcollComm_t comm, zcollStats_t* stats);
ZCOLL_API zcollResult_t zcollCommResetStats(zcollComm_t comm);

/* ------------------------------------------------------------------------------------------ */
/* Standard collectives (NCCL argument order)                                                   */
/* ------------------------------------------------------------------------------------------ */

/* recvbuff[r*sendcount .. (r+1)*sendcount) = rank r's sendbuff. In place when
 * sendbuff == recvbuff + rank*sendcount. */
ZCOLL_API zcollResult_t zcollAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                       zcollDataType_t datatype, zcollComm_t comm,
                                       zcollStream_t stream);

/* recvbuff = op over all ranks of sendbuff[rank*recvcount .. (rank+1)*recvcount). In place when
 * recvbuff == sendbuff + rank*recvcount. The reduction order is fixed, so results are identical
 * run to run. Float16/Bfloat16 (and the same for zcollAllReduce): every algorithm accumulates in
 * fp32 and rounds once to the data type, so each element is RN(s) for the fp32 sum s taken in the
 * algorithm's order: |result - exact| <= ulp(result)/2 + (nranks-1) * 2^-24 * sum|x_r| (exactly
 * the correctly rounded sum whenever the fp32 sum is exact); Avg divides s by nranks in fp32
 * first. The ring algorithm gets this by sending fp32 partials after its first hop (up to twice
 * the 16-bit bytes). ZCOLL_REDUCE_PARTIALS=dtype (read at init; the same on every rank) makes the
 * ring round its partials to the data type at every hop instead, as NCCL does: half the bytes,
 * |result - exact| <= (nranks-1) * ulp(sum|x_r|)/2. Integer Sum/Prod wrap (two's complement). */
ZCOLL_API zcollResult_t zcollReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           zcollDataType_t datatype, zcollRedOp_t op,
                                           zcollComm_t comm, zcollStream_t stream);

/* recvbuff = op over all ranks of sendbuff (count elements). In place when equal. Precision of
 * Float16/Bfloat16 as zcollReduceScatter. */
ZCOLL_API zcollResult_t zcollAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                       zcollDataType_t datatype, zcollRedOp_t op,
                                       zcollComm_t comm, zcollStream_t stream);

/* recvbuff[p*count ..] on rank r = sendbuff[r*count ..] of rank p. Buffers must not overlap. */
ZCOLL_API zcollResult_t zcollAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                                      zcollDataType_t datatype, zcollComm_t comm,
                                      zcollStream_t stream);

/* recvbuff on every rank = sendbuff of `root` (sendbuff is read on root only). In place when
 * equal. */
ZCOLL_API zcollResult_t zcollBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                       zcollDataType_t datatype, int root, zcollComm_t comm,
                                       zcollStream_t stream);

/* recvbuff on `root` = op over all ranks of sendbuff (count elements); recvbuff is written on
 * root only and may be NULL elsewhere. In place on root when sendbuff == recvbuff. The root gets
 * exactly the bits zcollAllReduce's ring algorithm gives (the chunks, order and precision of
 * zcollReduceScatter's ring algorithm). */
ZCOLL_API zcollResult_t zcollReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    zcollDataType_t datatype, zcollRedOp_t op, int root,
                                    zcollComm_t comm, zcollStream_t stream);

/* recvbuff[r*sendcount .. (r+1)*sendcount) on `root` = rank r's sendbuff; recvbuff is written on
 * root only and may be NULL elsewhere. In place on root when sendbuff == recvbuff +
 * root*sendcount. */
ZCOLL_API zcollResult_t zcollGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                    zcollDataType_t datatype, int root, zcollComm_t comm,
                                    zcollStream_t stream);

/* recvbuff on rank r = sendbuff[r*recvcount .. (r+1)*recvcount) of `root`; sendbuff is read on
 * root only and may be NULL elsewhere. In place on root when recvbuff == sendbuff +
 * root*recvcount. */
ZCOLL_API zcollResult_t zcollScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     zcollDataType_t datatype, int root, zcollComm_t comm,
                                     zcollStream_t stream);

/* All-to-all with per-peer counts (MPI_Alltoallv; counts and displacements in elements, arrays
 * of nranks entries): rank r sends sendcounts[p] elements from sendbuff + sdispls[p] to rank p
 * and receives recvcounts[p] elements from rank p into recvbuff + rdispls[p]. recvcounts[p] on
 * rank r must equal sendcounts[r] on rank p; a pair that disagrees fails the call with
 * zcollInvalidUsage on the receiving rank (and with zcollRemoteError or a timeout on ranks that
 * then wait for it). The receive blocks must not overlap each other, and the send and receive
 * buffers (the span of their blocks) must not overlap. */
ZCOLL_API zcollResult_t zcollAllToAllv(const void* sendbuff, const size_t sendcounts[],
                                       const size_t sdispls[], void* recvbuff,
                                       const size_t recvcounts[], const size_t rdispls[],
                                       zcollDataType_t datatype, zcollComm_t comm,
                                       zcollStream_t stream);

/* Returns once every rank has entered the barrier. A host call: `stream` must be NULL. */
ZCOLL_API zcollResult_t zcollBarrier(zcollComm_t comm, zcollStream_t stream);

/* Point to point. Matched in order per (sender, receiver) pair; count and type must agree: a
 * receive matched by a message of another size fails with zcollInvalidUsage on the receiver.
 * A send and its receive must be of one kind (both host or both device buffers, as NCCL takes
 * device buffers only): otherwise the receive fails with zcollInvalidUsage (a device message
 * staged through host memory carries its size in front), or, between two ranks whose device
 * bytes go over cuda_ipc, both sides fail at their timeout (zcollTimeout, or zcollRemoteError
 * once the other side failed).
 * Outside a group the call blocks until its transfer completes (on device buffers: it is enqueued
 * on `stream`, see the conventions above); inside zcollGroupStart/End the operations are queued
 * and all run (concurrently) in zcollGroupEnd. */
ZCOLL_API zcollResult_t zcollSend(const void* sendbuff, size_t count, zcollDataType_t datatype,
                                  int peer, zcollComm_t comm, zcollStream_t stream);
ZCOLL_API zcollResult_t zcollRecv(void* recvbuff, size_t count, zcollDataType_t datatype,
                                  int peer, zcollComm_t comm, zcollStream_t stream);

/* Groups may nest; operations run at the outermost zcollGroupEnd. Per thread. As in NCCL, a
 * group holds point-to-point operations and collectives (the standard and the ZeRO++ ones, on
 * one or several communicators): each call is checked when made (an argument error is returned
 * then) and kept, touching no buffer; zcollGroupEnd runs each communicator's collectives one
 * after the other in call order, each as it would run outside a group (not fused), then posts
 * every point-to-point operation together. The collectives of different communicators run
 * concurrently, each communicator's on a thread of its own, so one thread may drive several
 * ranks of one job in a group (NCCL's several GPUs per thread: one collective per rank's comm,
 * which wait for each other), and calls on unrelated comms do not wait behind each other
 * (except a group with a device call on cudaStreamPerThread, which names another stream on every
 * thread: it runs on the calling thread, in call order).
 * Buffers must stay valid until zcollGroupEnd has returned (on device buffers: until the
 * enqueued work has run). A call rejected inside the group makes zcollGroupEnd run nothing of it
 * and return that call's error. A collective that fails at zcollGroupEnd stops its
 * communicator's part of the group: that comm's operations after it are not run (the point-to-
 * point ones of the group neither), and zcollGroupEnd returns its error naming it (the first
 * failing comm's, in the order the comms first appear in the group). zcollBarrier, which blocks the calling thread, returns zcollInvalidUsage
 * inside a group (the group is unaffected). */
ZCOLL_API zcollResult_t zcollGroupStart(void);
ZCOLL_API zcollResult_t zcollGroupEnd(void);

/* Non-blocking calls on host buffers: a request.
 * zcollGroupEndNonBlocking ends the outermost group as zcollGroupEnd does, except that it does
 * not run the group's operations on the calling thread: it queues them, as one operation, in the
 * communicator's order (behind every call made on it before, ahead of every call made after) and
 * returns at once with *request. The communicator's progress thread runs them in their turn: the
 * collectives in call order, then the point-to-point operations together. One call alone is a
 * group of one:
 *     zcollGroupStart(); zcollAllReduce(x, x, n, zcollFloat32, zcollSum, comm, NULL);
 *     zcollGroupEndNonBlocking(&req);   ... other work ...   zcollRequestWait(req);
 *     zcollRequestFree(req);
 * Every operation of the group must be on host buffers of one communicator (zcollInvalidUsage
 * otherwise, and nothing runs; device buffers are non-blocking on their stream already, so end
 * such a group with zcollGroupEnd); an empty group gives a request that is complete. Buffers must
 * stay valid, and send buffers unchanged, until the request is complete. Blocking calls made on
 * the communicator meanwhile wait for their turn, after the request's operations. Errors are
 * those of the same calls made blocking (zcollGetLastError(comm) says why): an argument error of
 * a call in the group is returned by that call or by zcollGroupEndNonBlocking (nothing queued,
 * *request NULL); a failure while running is the request's result. Requests queued when the
 * communicator is aborted complete with zcollRemoteError without running; zcollCommDestroy runs
 * the queued ones first.
 * zcollRequestTest sets *done to 1 once the request is complete and then returns its result
 * (zcollSuccess with *done = 0 while it is not). zcollRequestWait blocks until it is complete and
 * its callback (below), if any, has returned, and returns its result; when the request is the next operation of its communicator and nothing
 * runs, the waiting thread runs it itself (no hand-off to the progress thread). Waits are bounded
 * as any call's (the communicator's timeout). zcollRequestFree waits for a request that is not
 * complete, then frees it; every request is freed once, and a freed or NULL handle is refused
 * with zcollInvalidArgument. zcollRequestOnComplete sets the one function called when the request
 * completes, with its result: on the thread that completes it (the communicator's progress
 * thread, or a waiter that ran it), or at once on the calling thread when it is complete already
 * (a second call: zcollInvalidUsage). The function must return promptly, must not call zcoll
 * on the request's communicator and must not free the request (zcollRequestFree waits for it to
 * return); it may test or wait on the request (frameworks complete their futures here). These
 * may be called from any thread. */
typedef struct zcollRequest* zcollRequest_t;
ZCOLL_API zcollResult_t zcollGroupEndNonBlocking(zcollRequest_t* request);
ZCOLL_API zcollResult_t zcollRequestTest(zcollRequest_t request, int* done);
ZCOLL_API zcollResult_t zcollRequestWait(zcollRequest_t request);
ZCOLL_API zcollResult_t zcollRequestOnComplete(zcollRequest_t request,
                                               void (*fn)(zcollRequest_t request,
                                                          zcollResult_t result, void* arg),
                                               void* arg);
ZCOLL_API zcollResult_t zcollRequestFree(zcollRequest_t request);

/* ------------------------------------------------------------------------------------------ */
/* ZeRO++ collectives (see docs/ZEROPP.md for exact semantics, error bounds and byte counts)   */
/* ------------------------------------------------------------------------------------------ */

typedef enum ZCOLL_ENUM_BASE { zcollQuantSymmetric = 0, zcollQuantAsymmetric = 1 } zcollQuantMode_t;
typedef enum ZCOLL_ENUM_BASE { zcollRoundNearestEven = 0, zcollRoundStochastic = 1 } zcollRounding_t;

#define ZCOLL_QUANT_CONFIG_MAGIC 0x7a717566u /* "zquf" */

/* Quantization settings, growable like zcollConfig_t: start from ZCOLL_QUANT_CONFIG_INITIALIZER.
 * A field left 0 takes the collective's documented default. */
typedef struct {
  size_t size;           /* sizeof(zcollQuantConfig_t) as compiled by the caller */
  unsigned int magic;    /* ZCOLL_QUANT_CONFIG_MAGIC */
  unsigned int version;  /* ZCOLL_VERSION_CODE */
  int bits;              /* 4 or 8: bits on the wire (qwZ, hpZ), qgZ's inter-node hop */
  int intraBits;         /* 4, 8 or 16: qgZ's intra-node hop (qgZ and the quantized all-reduce;
                            16: each element as a 16-bit float, bf16 or for Float16 data fp16,
                            summed in fp32: exact for Float16/Bfloat16 data, relative error
                            <= 2^-8 for Float32; docs/ZEROPP.md "qgZ"). Ignored by qwZ/hpZ */
  int blockSize;         /* elements per scale: a multiple of 32 in [32, 4096] */
  int mode;              /* zcollQuantMode_t */
  int rounding;          /* zcollRounding_t */
  unsigned long long seed; /* stochastic rounding: same seed, same bits */
  int pipelineDepth;     /* qgZ: pieces per call, so the inter-node hop of piece k overlaps the
                            intra-node hop of piece k+1 (1 = no pipelining) */
} zcollQuantConfig_t;

#define ZCOLL_QUANT_CONFIG_INITIALIZER                                                   \
  {                                                                                      \
    sizeof(zcollQuantConfig_t), ZCOLL_QUANT_CONFIG_MAGIC, ZCOLL_VERSION_CODE, 0, 0, 0,   \
        zcollQuantSymmetric, zcollRoundNearestEven, 0ULL, 0                              \
  }

/* qwZ: all-gather where every shard travels block-quantized. recvbuff[r*sendcount ..] holds
 * dequant(quant(shard of rank r)) on EVERY rank, rank r included: all ranks end with identical
 * bits. datatype: Float32, Float16 or Bfloat16. quant NULL: defaults (INT8, block 256).
 * In place when sendbuff == recvbuff + rank*sendcount. */
ZCOLL_API zcollResult_t zcollQuantizedAllGather(const void* sendbuff, void* recvbuff,
                                                size_t sendcount, zcollDataType_t datatype,
                                                const zcollQuantConfig_t* quant,
                                                zcollComm_t comm, zcollStream_t stream);

/* Elements the secondary shard of hpZ holds on this rank: nodes * sendcount. */
ZCOLL_API zcollResult_t zcollSecondaryShardCount(const zcollComm_t comm, size_t sendcount,
                                                 size_t* count);

/* hpZ forward all-gather: an inter-node all-gather among the ranks with this rank's local index
 * (quantized as qwZ when quant != NULL, exact otherwise), whose result is kept in `secondary`
 * (zcollSecondaryShardCount elements; may be NULL when not needed), then an intra-node
 * all-gather of the secondary shards into recvbuff (sendcount * nranks elements).
 * datatype: Float32, Float16 or Bfloat16 when quantized; any type when quant is NULL (exact).
 * Requires the same number of ranks on every node (zcollInvalidUsage otherwise). */
ZCOLL_API zcollResult_t zcollAllGatherHier(const void* sendbuff, void* recvbuff, void* secondary,
                                           size_t sendcount, zcollDataType_t datatype,
                                           const zcollQuantConfig_t* quant, zcollComm_t comm,
                                           zcollStream_t stream);

/* hpZ backward all-gather: the intra-node stage only, from a secondary shard filled by
 * zcollAllGatherHier with the same sendcount and datatype (any type: the secondary shard is
 * already dequantized). Sends zero inter-node bytes; recvbuff is bit-identical to the forward
 * call's. */
ZCOLL_API zcollResult_t zcollAllGatherFromSecondary(const void* secondary, void* recvbuff,
                                                    size_t sendcount, zcollDataType_t datatype,
                                                    zcollComm_t comm, zcollStream_t stream);

/* qgZ: reduce-scatter (op Sum, or Avg = Sum / nranks) with block-quantized traffic in two
 * hops: intra-node all-to-all, dequantize-reduce-requantize, inter-node all-to-all,
 * dequantize-sum. datatype: Float32, Float16 or Bfloat16; any recvcount. quant NULL: defaults
 * (INT4 both hops, block 256). intraBits 16 carries the intra-node hop as 16-bit floats (no
 * scales) and quantizes only the partials that cross nodes. Falls back to a flat quantized all-to-all reduce-scatter when
 * nodes have unequal rank counts (logged at INFO). In place when
 * recvbuff == sendbuff + rank*recvcount. */
ZCOLL_API zcollResult_t zcollQuantizedReduceScatter(const void* sendbuff, void* recvbuff,
                                                    size_t recvcount, zcollDataType_t datatype,
                                                    zcollRedOp_t op,
                                                    const zcollQuantConfig_t* quant,
                                                    zcollComm_t comm, zcollStream_t stream);

/* Quantized all-reduce (docs/ZEROPP.md "Quantized all-reduce"): the semantics of zcollAllReduce
 * (op Sum, or Avg = Sum / nranks) with block-quantized traffic. count = W*C + T (T < W): the
 * W chunks of C elements are reduced by qgZ (its two hops, intraBits then bits, fp32 sums;
 * its flat algorithm on unequal nodes), then each rank quantizes its reduced chunk at `bits`
 * and qwZ gathers the chunks; every rank, the chunk's owner included, writes the dequantized
 * codes, so EVERY RANK ENDS WITH IDENTICAL BITS. The T tail elements are all-reduced exactly.
 * datatype: Float32, Float16 or Bfloat16; any count; in place when sendbuff == recvbuff,
 * otherwise the buffers must not overlap. quant NULL (or fields 0): INT8 on every step
 * (bits 8, intraBits 8), block 256, symmetric, nearest-even. Below 256 KiB per rank
 * (count * element size) it runs zcollAllReduce's algorithm (identical bits to
 * zcollAllReduce); ZCOLL_ALGO_QUANTIZED_ALLREDUCE=qgz_then_qwz|exact forces either. Host
 * buffers; device buffers on `stream` as the other ZeRO++ calls. */
ZCOLL_API zcollResult_t zcollQuantizedAllReduce(const void* sendbuff, void* recvbuff,
                                                size_t count, zcollDataType_t datatype,
                                                zcollRedOp_t op,
                                                const zcollQuantConfig_t* quant,
                                                zcollComm_t comm, zcollStream_t stream);

/* Error feedback for zcollQuantizedAllReduce. The caller keeps one residual buffer per tensor
 * (bucket), of the size zcollQuantizedAllReduceResidualSize gives for its count on this comm
 * (the same on every call; it depends only on count and the comm's layout), in the memory kind
 * of the call's buffers, zeroed before the first call; it must overlap neither buffer.
 * zcollQuantizedAllReduceWithResidual is zcollQuantizedAllReduce where every quantization adds
 * the residual it kept in that buffer last call before quantizing, and keeps the new one (value
 * minus dequantized code, fp32): the sender's first quantization (W*C elements), the two-hop
 * requantization (N*C, equal nodes with N > 1 and more than one rank per node) and the chunk
 * owner's gather quantization (C). So the buffer is 4 * C * (W + N + 1) bytes on two-hop layouts,
 * 4 * C * (W + 1) otherwise (C = count / W, rounded down): 4*(W+N+1)/W bytes per element of
 * sendbuff (7 on 2 nodes x 2 ranks). residualBytes must be that size (zcollInvalidArgument otherwise); residual NULL
 * fails. Below the exact threshold nothing is quantized and the residual is left as it was.
 * Why a buffer and a size query rather than fields in a struct: the residuals are zcoll's
 * internal state, whose layout may change with the algorithm; one opaque buffer whose size is
 * asked keeps the ABI fixed whatever zcoll keeps in it. zcollQuantizedAllReduceResidualSize is a
 * local query: it communicates nothing and returns at once, also while calls of the comm are
 * queued (it is not ordered with them). */
ZCOLL_API zcollResult_t zcollQuantizedAllReduceResidualSize(size_t count,
                                                            zcollDataType_t datatype,
                                                            const zcollQuantConfig_t* quant,
                                                            zcollComm_t comm, size_t* bytes);
ZCOLL_API zcollResult_t zcollQuantizedAllReduceWithResidual(
    const void* sendbuff, void* recvbuff, size_t count, zcollDataType_t datatype,
    zcollRedOp_t op, const zcollQuantConfig_t* quant, void* residual, size_t residualBytes,
    zcollComm_t comm, zcollStream_t stream);

/* ------------------------------------------------------------------------------------------ */
/* Keep training after a shrink: rebuild lost ZeRO shards without a checkpoint                  */
/* (docs/FAULT_TOLERANCE.md, "Keep training")                                                   */
/* ------------------------------------------------------------------------------------------ */

/* The partition these calls work on (ZeRO-3 / ZeRO++, docs/ZEROPP.md): a flat vector V of
 * totalCount elements (the parameters, or one optimizer-state tensor shaped like them), padded
 * to W*count, is split over the W ranks of a communicator: rank r's primary shard is
 * V[r*count, (r+1)*count). hpZ's secondary shard (zcollAllGatherHier on that communicator, N nodes
 * of L ranks) holds on rank r, at [m*count, (m+1)*count), the primary shard of the rank with r's
 * local index on node m (its rail): so every shard has a copy on every other node.
 *
 * zcollRebuildFromSecondary: after zcollCommShrink made newComm from oldComm (W' ranks, some of
 * oldComm's gone), every rank of newComm gets its primary shard of V for the new world size:
 * newPrimary[0, newCount) = V[i*newCount, (i+1)*newCount) on new rank i, zeros at positions of V
 * at or past totalCount. Collective over newComm; nothing is read from a checkpoint, nothing from
 * the ranks that are gone. Where each piece of V comes from:
 *  - a surviving rank's shard: from its primary when the ranks pass primaries (primary != NULL
 *    on every rank), else from its own secondary;
 *  - a gone rank's shard: from the secondaries of the surviving ranks of its rail (on the other
 *    nodes), split evenly among them.
 * So V is rebuilt as the last zcollAllGatherHier on oldComm gathered it: bit-identical to the
 * primaries of that moment when that call was exact (quant NULL), and the values every rank's
 * forward pass used (dequant(quant(shard)), qwZ's bound) when it was quantized; survivors'
 * primaries, when passed, must be of that same moment (a framework that has updated its shards
 * since passes NULL, and the step after that forward call is run again). Each rank passes the
 * secondary that call filled on it (oldComm's nodes * count elements), valid: a secondary whose
 * forward call failed is undefined, so keep the one of the last call that succeeded on every
 * rank (docs/FAULT_TOLERANCE.md shows the two-buffer way).
 * oldComm is the communicator the shards were partitioned over: a live handle (its layout and
 * members are read; it may be revoked or broken), or NULL for the one zcollCommShrink made newComm
 * from, as it was then (newComm keeps its layout and members, so that comm may be destroyed
 * already: a framework that tears the old group down at the shrink passes NULL). Every rank of
 * newComm must be one of oldComm's (made from it by zcollCommShrink; ranks are matched by
 * identity, not number). Every rank passes the same count, newCount,
 * totalCount, datatype and oldComm, and all pass a primary or none: otherwise every rank fails
 * with zcollInvalidUsage naming the rank, and nothing moves. A gone rank's shard that no rank of
 * newComm holds (its whole rail gone, or a single node) fails every rank with zcollInvalidUsage
 * naming the old rank, before anything moves; so does an oldComm whose nodes had different
 * numbers of ranks (hpZ never ran there). Any datatype (copies are exact). Host buffers only,
 * stream NULL (device buffers: zcollUnsupported). Argument errors are zcollInvalidArgument on
 * that rank before any exchange (the others then wait for it, as for any collective a rank
 * does not make): newComm NULL or dead, oldComm dead, or NULL with a newComm that
 * zcollCommShrink did not make, the same comm twice, a bad datatype,
 * totalCount above oldComm's size * count or above newComm's size * newCount, secondary NULL
 * with count > 0, newPrimary NULL with newCount > 0, newPrimary overlapping primary or
 * secondary. Inside zcollGroupStart/End: zcollInvalidUsage.
 *
 * After a recovery the new layout may be uneven (a node that lost a rank): hpZ
 * (zcollAllGatherHier, zcollAllGatherFromSecondary) refuses it (zcollInvalidUsage), so gather
 * the weights with qwZ (zcollQuantizedAllGather, or zcollAllGather) for both the forward and the
 * backward pass there, and qgZ falls back to its flat algorithm on its own; once zcollCommGrow
 * makes the nodes even again, hpZ runs again.
 *
 * What is lost with a rank: its optimizer state (fp32 master weights, moments), which only it
 * held. The opt-in buddy copy keeps a copy of it on another node:
 *
 * zcollBuddyCopy (collective over comm, 2 nodes or more): every rank's count elements of
 * sendbuff go to its buddy, the rank of the next node (node index + 1, the last node's to node
 * 0) whose local index is this rank's modulo that node's size; buddyCopy receives the shards of
 * the ranks whose buddy this rank is (its wards), one slot of count elements each, in rank
 * order: zcollBuddyCopyCount gives its size, count times the number of wards (1 on an even
 * layout; 0 to several on an uneven one, e.g. after a shrink). Call it after each optimizer
 * step, per state tensor shaped like the parameter shard. Any datatype; host buffers only.
 * zcollInvalidUsage on a single node.
 * zcollRebuildFromBuddy: as zcollRebuildFromSecondary, with the buddy copies: a surviving rank's
 * shard comes from its primary (required: the state it holds), a gone rank's from its buddy's
 * copy (buddyCopy: zcollBuddyCopyCount(oldComm, count) elements); a gone rank whose buddy is gone
 * too fails every rank with zcollInvalidUsage naming it. oldComm's layout may be uneven. */
ZCOLL_API zcollResult_t zcollRebuildFromSecondary(const void* primary, const void* secondary,
                                                  size_t count, void* newPrimary, size_t newCount,
                                                  size_t totalCount, zcollDataType_t datatype,
                                                  zcollComm_t oldComm, zcollComm_t newComm,
                                                  zcollStream_t stream);
ZCOLL_API zcollResult_t zcollBuddyCopyCount(const zcollComm_t comm, size_t count,
                                            size_t* copyCount);
ZCOLL_API zcollResult_t zcollBuddyCopy(const void* sendbuff, void* buddyCopy, size_t count,
                                       zcollDataType_t datatype, zcollComm_t comm,
                                       zcollStream_t stream);
ZCOLL_API zcollResult_t zcollRebuildFromBuddy(const void* primary, const void* buddyCopy,
                                              size_t count, void* newPrimary, size_t newCount,
                                              size_t totalCount, zcollDataType_t datatype,
                                              zcollComm_t oldComm, zcollComm_t newComm,
                                              zcollStream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ZCOLL_ZCOLL_H_ */
