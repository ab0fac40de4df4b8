#include "config_ext.h"

#include <cstddef>

#include "errors.h"

namespace zcoll_nccl {
namespace {

constexpr int kMaxOptions = 256;  // a longer list is taken for a circular one

bool algoFits(int algo, CollKind kind) {
  switch (algo) {
    case ZCOLL_NCCL_ALGO_EXACT: return true;
    case ZCOLL_NCCL_ALGO_QWZ:
    case ZCOLL_NCCL_ALGO_HPZ:
    case ZCOLL_NCCL_ALGO_HPZ_FROM_SECONDARY: return kind == CollKind::kAllGather;
    case ZCOLL_NCCL_ALGO_QGZ: return kind == CollKind::kReduceScatter;
    case ZCOLL_NCCL_ALGO_QUANTIZED_ALLREDUCE: return kind == CollKind::kAllReduce;
    default: return false;
  }
}

Algo algoOf(int algo) {
  switch (algo) {
    case ZCOLL_NCCL_ALGO_QWZ: return Algo::kQwz;
    case ZCOLL_NCCL_ALGO_HPZ: return Algo::kHpz;
    case ZCOLL_NCCL_ALGO_HPZ_FROM_SECONDARY: return Algo::kHpzFromSecondary;
    case ZCOLL_NCCL_ALGO_QGZ: return Algo::kQgz;
    case ZCOLL_NCCL_ALGO_QUANTIZED_ALLREDUCE: return Algo::kQuantizedAllReduce;
    default: return Algo::kPlain;
  }
}

// The quantized algorithm a bare bits option selects.
Algo defaultQuantized(CollKind kind) {
  switch (kind) {
    case CollKind::kAllGather: return Algo::kQwz;
    case CollKind::kReduceScatter: return Algo::kQgz;
    case CollKind::kAllReduce: return Algo::kQuantizedAllReduce;
    default: return Algo::kPlain;
  }
}

ncclResult_t badValue(const char* call, const char* option, int v, const char* takes) {
  return fail(ncclInvalidArgument, "%s: zcoll option %s = %d; it takes %s", call, option, v,
              takes);
}

ncclResult_t readOption(const ncclConfigExt_t& e, CollKind kind, const char* call, Choice* c,
                        bool* bitsGiven) {
  const int v = e.val.i;
  switch (e.key.optionId) {
    case ZCOLL_NCCL_OPT_ALGORITHM:
      if (!algoFits(v, kind))
        return badValue(call, "ZCOLL_NCCL_OPT_ALGORITHM", v,
                        "an algorithm of this collective (zcoll/zcoll_nccl.h)");
      c->algo = algoOf(v);
      c->explicitAlgo = true;
      return ncclSuccess;
    case ZCOLL_NCCL_OPT_BITS:
      if (v != 4 && v != 8) return badValue(call, "ZCOLL_NCCL_OPT_BITS", v, "4 or 8");
      c->quant.bits = v;
      *bitsGiven = true;
      return ncclSuccess;
    case ZCOLL_NCCL_OPT_INTRA_BITS:
      if (v != 4 && v != 8) return badValue(call, "ZCOLL_NCCL_OPT_INTRA_BITS", v, "4 or 8");
      c->quant.intraBits = v;
      return ncclSuccess;
    case ZCOLL_NCCL_OPT_BLOCK:
      if (v < 32 || v > 4096 || v % 32 != 0)
        return badValue(call, "ZCOLL_NCCL_OPT_BLOCK", v, "a multiple of 32 in [32, 4096]");
      c->quant.blockSize = v;
      return ncclSuccess;
    case ZCOLL_NCCL_OPT_ROUNDING:
      if (v != 0 && v != 1) return badValue(call, "ZCOLL_NCCL_OPT_ROUNDING", v, "0 or 1");
      c->quant.rounding = v;
      return ncclSuccess;
    case ZCOLL_NCCL_OPT_SEED:
      c->quant.seed = static_cast<unsigned long long>(static_cast<unsigned int>(v));
      return ncclSuccess;
    case ZCOLL_NCCL_OPT_MODE:
      if (v != 0 && v != 1) return badValue(call, "ZCOLL_NCCL_OPT_MODE", v, "0 or 1");
      c->quant.mode = v;
      return ncclSuccess;
    case ZCOLL_NCCL_OPT_HPZ_SECONDARY:
      c->secondary = e.val.raw;
      return ncclSuccess;
    case ZCOLL_NCCL_OPT_PIPELINE:
      if (v < 1) return badValue(call, "ZCOLL_NCCL_OPT_PIPELINE", v, "1 or more");
      c->quant.pipelineDepth = v;
      return ncclSuccess;
    default:
      return fail(ncclInvalidArgument, "%s: option id %d under zcoll's vendorId 0x%x is not one "
                  "zcoll knows (zcoll/zcoll_nccl.h)", call, e.key.optionId, ZCOLL_NCCL_VENDOR_ID);
  }
}

}  // namespace

ncclResult_t readCollConfig(const ncclCollConfig_t* config, CollKind kind, const char* call,
                            Choice* choice) {
  if (config == nullptr) return ncclSuccess;
  if (config->magic != 0xcafebeef ||
      config->size < offsetof(ncclCollConfig_t, ext) + sizeof(ncclConfigExt_t*))
    return fail(ncclInvalidArgument, "%s: config was not initialized with "
                "NCCL_COLLCONFIG_INITIALIZER (size %zu, magic 0x%x)", call, config->size,
                config->magic);
  bool bitsGiven = false;
  int seen = 0;
  for (const ncclConfigExt_t* e = config->ext; e != nullptr; e = e->next) {
    if (++seen > kMaxOptions)
      return fail(ncclInvalidArgument, "%s: config.ext holds more than %d options (circular?)",
                  call, kMaxOptions);
    if (e->key.vendorId != ZCOLL_NCCL_VENDOR_ID) continue;
    ncclResult_t r = readOption(*e, kind, call, choice, &bitsGiven);
    if (r != ncclSuccess) return r;
  }
  if (bitsGiven && !choice->explicitAlgo) {
    choice->algo = defaultQuantized(kind);
    choice->explicitAlgo = choice->algo != Algo::kPlain;
  }
  return ncclSuccess;
}

const char* algoName(Algo a) {
  switch (a) {
    case Algo::kPlain: return "plain";
    case Algo::kQwz: return "qwZ";
    case Algo::kHpz: return "hpZ";
    case Algo::kHpzFromSecondary: return "hpZ from secondary";
    case Algo::kQgz: return "qgZ";
    case Algo::kQuantizedAllReduce: return "quantized all-reduce";
  }
  return "?";
}

}  // namespace zcoll_nccl
