/*
 * zcoll_nccl.h: zcoll's vendor extension of NCCL's API, for programs that run on
 * libzcoll_nccl.so (zcoll's NCCL-API library, SONAME libnccl.so.2; docs/NCCL.md).
 *
 * Include it after nccl.h (any NCCL 2.x header). It gives:
 *  - NCCL 2.31's per-collective configuration (ncclCollConfig_t, ncclConfigExt_t and the
 *    nccl*Config calls), declared here when the nccl.h included lacks them (NCCL < 2.31), with
 *    2.31's layout;
 *  - zcoll's vendorId and option ids: options in a ncclCollConfig_t's ext list under
 *    ZCOLL_NCCL_VENDOR_ID select zcoll's ZeRO++ collectives (qwZ, hpZ, qgZ, the quantized
 *    all-reduce). The official NCCL library ignores every extension, so the same program runs
 *    unquantized on real NCCL;
 *  - queries only libzcoll_nccl.so exports (ncclZcoll*): the zcoll communicator under an NCCL one
 *    and its byte counters. Look them up with dlsym where the program may also run on real NCCL.
 *
 * Every option's value is an int (val.i) unless said otherwise. An option under zcoll's vendorId
 * that zcoll does not know, a value out of range, or an algorithm that is not one of the called
 * collective's fails the call with ncclInvalidArgument and a ncclGetLastError text naming it.
 */
#ifndef ZCOLL_ZCOLL_NCCL_H_
#define ZCOLL_ZCOLL_NCCL_H_

#include <stddef.h>
#include <stdint.h>

#include "zcoll/zcoll.h"

#ifndef NCCL_H_
#error "include nccl.h before zcoll/zcoll_nccl.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- NCCL 2.31's per-collective configuration, when nccl.h predates it ---------------------- */
#if NCCL_VERSION_CODE < 23100 && !defined(NCCL_COLLCONFIG_INITIALIZER)
#ifndef NCCL_API_MAGIC
#define NCCL_API_MAGIC 0xcafebeef
#endif
typedef struct ncclConfigExt {
  struct ncclConfigExt* next; /* next option, or NULL */
  struct {
    int vendorId; /* the vendor's own id, non-zero, below 2^24 */
    int optionId; /* the vendor's option */
  } key;
  union {
    int i;
    const char* s;
    void* raw;
  } val;
} ncclConfigExt_t;

typedef struct ncclCollConfig_v23100 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  ncclConfigExt_t* ext; /* vendor options, a non-circular list, or NULL */
  int minCTAs;
  int maxCTAs;
  int nvlsCTAs;
  int cgaClusterSize;
  const char* algSelection;
  int forceAlgSelection;
  int CTAPolicy;
  uint64_t userProfilerTag;
} ncclCollConfig_t;

#define NCCL_COLLCONFIG_INITIALIZER                                                         \
  {                                                                                         \
    sizeof(ncclCollConfig_t), NCCL_API_MAGIC, 23100, NULL, NCCL_CONFIG_UNDEF_INT,           \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NULL, 1,       \
        NCCL_CONFIG_UNDEF_INT, 0                                                            \
  }

ncclResult_t ncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                                 ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                 cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count,
                                 ncclDataType_t datatype, int root, ncclComm_t comm,
                                 cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                              ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                              cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount,
                                 ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                 const ncclCollConfig_t* config);
ncclResult_t ncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                     cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count,
                                ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                const ncclCollConfig_t* config);
ncclResult_t ncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count,
                              ncclDataType_t datatype, int root, ncclComm_t comm,
                              cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count,
                               ncclDataType_t datatype, int root, ncclComm_t comm,
                               cudaStream_t stream, const ncclCollConfig_t* config);
#endif

/* ---- zcoll's vendor extension ----------------------------------------------------------------- */

/* zcoll's vendorId: "zcl" (0x7a636c), non-zero and below 2^24 as NCCL asks. */
#define ZCOLL_NCCL_VENDOR_ID 0x7a636c

/* Option ids under ZCOLL_NCCL_VENDOR_ID. */
enum {
  /* val.i: a ZCOLL_NCCL_ALGO_* below. Absent: the collective's quantized algorithm when
   * ZCOLL_NCCL_OPT_BITS is given, else the plain call (ZCOLL_NCCL_QUANTIZE may still apply). */
  ZCOLL_NCCL_OPT_ALGORITHM = 1,
  ZCOLL_NCCL_OPT_BITS = 2,          /* 4 or 8: bits on the wire (qwZ, hpZ; qgZ's inter-node hop) */
  ZCOLL_NCCL_OPT_INTRA_BITS = 3,    /* 4 or 8: qgZ's intra-node hop */
  ZCOLL_NCCL_OPT_BLOCK = 4,         /* elements per scale: a multiple of 32 in [32, 4096] */
  ZCOLL_NCCL_OPT_ROUNDING = 5,      /* 0 nearest-even, 1 stochastic */
  ZCOLL_NCCL_OPT_SEED = 6,          /* stochastic rounding's seed (int) */
  ZCOLL_NCCL_OPT_MODE = 7,          /* 0 symmetric, 1 asymmetric */
  /* val.raw: the hpZ secondary shard to fill or read (zcollSecondaryShardCount elements, the
   * memory kind of the call's buffers). Absent: zcoll keeps one per (comm, output buffer,
   * count, datatype), host buffers only (docs/NCCL.md, "hpZ's secondary"). */
  ZCOLL_NCCL_OPT_HPZ_SECONDARY = 8,
  ZCOLL_NCCL_OPT_PIPELINE = 9       /* qgZ's pipeline depth (>= 1) */
};

/* Values of ZCOLL_NCCL_OPT_ALGORITHM. */
enum {
  ZCOLL_NCCL_ALGO_EXACT = 0,               /* the plain, exact call (overrides ZCOLL_NCCL_QUANTIZE) */
  ZCOLL_NCCL_ALGO_QWZ = 1,                 /* ncclAllGatherConfig: zcollQuantizedAllGather */
  ZCOLL_NCCL_ALGO_HPZ = 2,                 /* ncclAllGatherConfig: zcollAllGatherHier (forward) */
  ZCOLL_NCCL_ALGO_HPZ_FROM_SECONDARY = 3,  /* ncclAllGatherConfig: zcollAllGatherFromSecondary */
  ZCOLL_NCCL_ALGO_QGZ = 4,                 /* ncclReduceScatterConfig: zcollQuantizedReduceScatter */
  ZCOLL_NCCL_ALGO_QUANTIZED_ALLREDUCE = 5  /* ncclAllReduceConfig: zcollQuantizedAllReduce */
};

/* The zcoll communicator an NCCL communicator of libzcoll_nccl.so runs on (owned by it: do not
 * destroy it), for zcoll's own calls and queries on the same ranks. ncclInvalidArgument for a
 * NULL or dead comm or a NULL out; waits for a non-blocking init to finish. */
ncclResult_t ncclZcollCommGetZcoll(ncclComm_t comm, zcollComm_t* zcomm);

/* zcollCommGetStats / zcollCommResetStats of that communicator (bytes per path: self, intra-node,
 * inter-node), so a program can measure what a call moved. stats->size as zcollCommGetStats. */
ncclResult_t ncclZcollCommGetStats(ncclComm_t comm, zcollStats_t* stats);
ncclResult_t ncclZcollCommResetStats(ncclComm_t comm);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ZCOLL_ZCOLL_NCCL_H_ */
