// quantized_all_gather_perf: zcollQuantizedAllGather (qwZ). Size = the whole gathered buffer
// (as all_gather_perf); each rank sends size/n elements, quantized on the wire. Extra flags:
// --bits 4|8 (8), --block N (256), --asym, --stochastic; -d float, half, bfloat16 (or all); other
// values are refused before any rank starts. The check admits the documented bound
// (common/zeropp.h); the wire/inter columns show the bytes each rank actually sent.
#include <cstdio>

#include "common/zeropp.h"

namespace zp = zcoll::perf;

int main(int argc, char** argv) {
  zp::QuantFlags flags;
  if (!zp::takeQuantFlags(&argc, argv, &flags)) return 2;  // qwZ always quantizes: 4 or 8
  static zcollQuantConfig_t storage;
  const zcollQuantConfig_t* quant = zp::quantConfig(flags, &storage);
  zp::Collective c = zp::allGatherShape("quantized_all_gather");
  c.types = zp::quantizableTypes();
  c.notes = {zp::describe(flags)};
  c.usage = zp::quantUsage("  --bits 4|8            bits per quantized value, default 8", false);
  c.run = [quant](const zp::RunArgs& a) {
    return zcollQuantizedAllGather(a.send, a.recv, a.counts.count, a.dtype, quant, a.info->comm,
                                   a.stream);
  };
  c.toleranceFor = [flags](zcollDataType_t t) { return zp::quantTolerance(flags, t); };
  c.extraColumns = zp::zeroppColumns();
  return zp::perfMain(argc, argv, c);
}
