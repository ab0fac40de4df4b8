#include "coll/zeropp_config.h"

#include <cstddef>

namespace zcoll {

namespace {

constexpr size_t kMinQuantConfigSize = offsetof(zcollQuantConfig_t, bits) + sizeof(int);

bool has(const zcollQuantConfig_t* c, size_t offset, size_t bytes) {
  return c->size >= offset + bytes;
}

}  // namespace

Result checkQuantDtype(zcollDataType_t dtype, const char* fn) {
  return quant::checkQuantizable(dtype, fn);
}

zcollDataType_t wire16For(zcollDataType_t dtype) {
  return dtype == zcollFloat16 ? zcollFloat16 : zcollBfloat16;
}

Result readQuantConfig(const zcollQuantConfig_t* cfg, int defaultBits, int defaultIntraBits,
                       zcollDataType_t dtype, const char* fn, QuantSettings* out) {
  quant::QuantParams base;
  base.bits = defaultBits;
  base.blockSize = kDefaultBlockSize;
  int intraBits = defaultIntraBits;
  out->pipelineDepth = 0;
  if (cfg != nullptr) {
    if (cfg->magic != ZCOLL_QUANT_CONFIG_MAGIC || cfg->size < kMinQuantConfigSize)
      return fail(zcollInvalidArgument, "%s: quant config not initialized with "
                  "ZCOLL_QUANT_CONFIG_INITIALIZER (magic %#x, size %zu)", fn, cfg->magic,
                  cfg->size);
    if (cfg->size > sizeof(zcollQuantConfig_t) || cfg->version > ZCOLL_VERSION_CODE)
      ZCOLL_WARN(LogSubsys::kColl, "%s: quant config from a newer zcoll (size %zu, version %u; "
                 "this is %zu, %d): fields this version does not know are ignored", fn, cfg->size,
                 cfg->version, sizeof(zcollQuantConfig_t), ZCOLL_VERSION_CODE);
    if (cfg->bits != 0) base.bits = cfg->bits;
    if (has(cfg, offsetof(zcollQuantConfig_t, intraBits), sizeof(int)) && cfg->intraBits != 0)
      intraBits = cfg->intraBits;
    if (has(cfg, offsetof(zcollQuantConfig_t, blockSize), sizeof(int)) && cfg->blockSize != 0)
      base.blockSize = cfg->blockSize;
    if (has(cfg, offsetof(zcollQuantConfig_t, mode), sizeof(int))) {
      if (cfg->mode != zcollQuantSymmetric && cfg->mode != zcollQuantAsymmetric)
        return fail(zcollInvalidArgument, "%s: quant mode %d is not a zcollQuantMode_t", fn,
                    cfg->mode);
      base.symmetric = cfg->mode == zcollQuantSymmetric;
    }
    if (has(cfg, offsetof(zcollQuantConfig_t, rounding), sizeof(int))) {
      if (cfg->rounding != zcollRoundNearestEven && cfg->rounding != zcollRoundStochastic)
        return fail(zcollInvalidArgument, "%s: rounding %d is not a zcollRounding_t", fn,
                    cfg->rounding);
      base.stochastic = cfg->rounding == zcollRoundStochastic;
    }
    if (has(cfg, offsetof(zcollQuantConfig_t, seed), sizeof(cfg->seed))) base.seed = cfg->seed;
    if (has(cfg, offsetof(zcollQuantConfig_t, pipelineDepth), sizeof(int)) &&
        cfg->pipelineDepth != 0) {
      if (cfg->pipelineDepth < 1 || cfg->pipelineDepth > 64)
        return fail(zcollInvalidArgument, "%s: pipelineDepth %d must be in [1, 64]", fn,
                    cfg->pipelineDepth);
      out->pipelineDepth = cfg->pipelineDepth;
    }
  }
  if (base.bits != 4 && base.bits != 8)
    return fail(zcollInvalidArgument, "%s: bits = %d, must be 4 or 8", fn, base.bits);
  if (intraBits != 4 && intraBits != 8 && intraBits != 16)
    return fail(zcollInvalidArgument, "%s: intraBits = %d, must be 4, 8 or 16", fn, intraBits);
  out->inter = base;
  out->intra = base;
  out->intra.bits = intraBits;
  out->intra.wire16 = wire16For(dtype);
  if (quant::validate(out->inter) != zcollSuccess)
    return failWithContext(zcollInvalidArgument, fn);
  return zcollSuccess;
}

}  // namespace zcoll
