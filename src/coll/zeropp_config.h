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
  quant::QuantParams intra;  // qgZ's intra-node hop (bits 4, 8 or 16)
  int pipelineDepth = 0;  // 0: the caller left it to the collective's default
};

// `fn` names the calling API function in error messages. bits: 4 or 8; intraBits: 4, 8 or 16
// (qgZ's intra-node hop as 16-bit floats, of the type wire16For(dtype)).
Result readQuantConfig(const zcollQuantConfig_t* cfg, int defaultBits, int defaultIntraBits,
                       zcollDataType_t dtype, const char* fn, QuantSettings* out);

// The 16-bit float of qgZ's intra hop at intraBits 16 (docs/ZEROPP.md "qgZ"): the input's own
// type for Float16 (exact), bf16 otherwise (exact for Bfloat16; Float32 rounds to nearest even,
// relative error <= 2^-8 over fp32's whole range, where fp16 would overflow above 65504 and lose
// precision below 2^-14).
zcollDataType_t wire16For(zcollDataType_t dtype);

// Float32, Float16 or Bfloat16, else zcollInvalidArgument naming the function.
Result checkQuantDtype(zcollDataType_t dtype, const char* fn);

}  // namespace zcoll
