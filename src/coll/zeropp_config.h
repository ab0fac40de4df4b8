// Shared by the ZeRO++ collectives: reads a caller's zcollQuantConfig_t (NULL = defaults) into
// the quantization engine's parameters, and checks the data type.
#pragma once

#include "quant/quant.h"
#include "zcoll/zcoll.h"

namespace zcoll {

// Defaults (docs/ZEROPP.md "Defaults"): block 256 elements, symmetric, nearest-even rounding.
constexpr int kDefaultBlockSize = 256;
constexpr int kDefaultAllGatherBits = 8;  // qwZ / hpZ: INT8 weights, as ZeRO++
constexpr int kDefaultGradBits = 4;       // qgZ: INT4 on both hops, as ZeRO++

struct QuantSettings {
  quant::QuantParams inter;  // the wire format of qwZ/hpZ, and qgZ's inter-node hop
  quant::QuantParams intra;  // qgZ's intra-node hop
  int pipelineDepth = 0;  // 0: the caller left it to the collective's default
};

// `fn` names the calling API function in error messages.
Result readQuantConfig(const zcollQuantConfig_t* cfg, int defaultBits, int defaultIntraBits,
                       const char* fn, QuantSettings* out);

// Float32, Float16 or Bfloat16, else zcollInvalidArgument naming the function.
Result checkQuantDtype(zcollDataType_t dtype, const char* fn);

}  // namespace zcoll
