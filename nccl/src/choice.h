// What one collective call runs: the plain zcoll call or one of zcoll's ZeRO++ ones, chosen by
// zcoll's vendor options on a nccl*Config call (config_ext.cc) or by ZCOLL_NCCL_QUANTIZE
// (quantize_policy.cc).
#pragma once

#include <nccl.h>

#include "zcoll/zcoll.h"

namespace zcoll_nccl {

enum class CollKind { kAllGather, kReduceScatter, kAllReduce, kOther };

enum class Algo { kPlain, kQwz, kHpz, kHpzFromSecondary, kQgz, kQuantizedAllReduce };

struct Choice {
  Algo algo = Algo::kPlain;
  bool explicitAlgo = false;  // the call's options named the algorithm (EXACT included)
  zcollQuantConfig_t quant = ZCOLL_QUANT_CONFIG_INITIALIZER;
  void* secondary = nullptr;  // ZCOLL_NCCL_OPT_HPZ_SECONDARY
};

const char* algoName(Algo a);

}  // namespace zcoll_nccl
