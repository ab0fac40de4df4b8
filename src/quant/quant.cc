// The quantization operations: argument checks, size queries, and a call into the active CPU
// kernel variant (isa.h). The math itself is in quant_math.h / kernels_impl.h.
#include "quant/quant.h"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "base/dtype.h"
#include "quant/isa.h"
#include "quant/quant_math.h"

namespace zcoll {
namespace quant {

namespace {

Result checkPtr(const void* p, size_t n, const char* what, const char* name) {
  if (p != nullptr || n == 0) return zcollSuccess;
  return fail(zcollInvalidArgument, "%s: %s is NULL with n = %zu", what, name, n);
}

Result checkChunks(const void* const* chunks, int k, size_t n, const char* what) {
  if (k < 1) return fail(zcollInvalidArgument, "%s: k = %d, need at least one chunk", what, k);
  ZCOLL_CHECK(checkPtr(chunks, n, what, "chunks"));
  if (n == 0) return zcollSuccess;
  for (int c = 0; c < k; ++c) {
    if (chunks[c] == nullptr) {
      return fail(zcollInvalidArgument, "%s: chunks[%d] is NULL", what, c);
    }
  }
  return zcollSuccess;
}

}  // namespace

Result checkBlockOutput(const QuantParams& outParams, const char* what) {
  if (outParams.bits != 16) return zcollSuccess;
  return fail(zcollInvalidArgument, "%s: output bits = 16 is not supported (the requantized "
              "partials are block-quantized: 4 or 8)", what);
}

namespace {

const KernelSet& active(QuantOp op) { return kernelSet(activeIsa(op)); }

// The kernels' floating-point environment, pinned for the duration of a call: round to nearest
// even, subnormals neither flushed to zero nor read as zero. A caller may have changed either
// (fesetround; FTZ/DAZ, e.g. torch.set_flush_denormal); the format (docs/WIRE_FORMAT.md) fixes
// the bits, so every CPU variant and the GPU must compute in this one environment.
class PinnedFpEnv {
 public:
#if defined(__x86_64__)
  PinnedFpEnv() : saved_(_mm_getcsr()) {
    if ((saved_ & kModeBits) != 0) _mm_setcsr(saved_ & ~kModeBits);
  }
  ~PinnedFpEnv() {
    if ((saved_ & kModeBits) != 0) _mm_setcsr(saved_);
  }
  PinnedFpEnv(const PinnedFpEnv&) = delete;
  PinnedFpEnv& operator=(const PinnedFpEnv&) = delete;

 private:
  static constexpr unsigned kModeBits = 0x6000u /* rounding */ | 0x8000u /* FTZ */ |
                                        0x0040u /* DAZ */;
  unsigned saved_;
#endif
};

}  // namespace

bool quantizable(zcollDataType_t dt) {
  return dt == zcollFloat32 || dt == zcollFloat16 || dt == zcollBfloat16;
}

Result checkQuantizable(zcollDataType_t dt, const char* what) {
  if (quantizable(dt)) return zcollSuccess;
  return fail(zcollInvalidArgument,
              "%s: datatype %s (%d) cannot be quantized: use zcollFloat32, zcollFloat16 or "
              "zcollBfloat16", what, dtypeName(dt), static_cast<int>(dt));
}

Result validateSumScale(float scale, const char* what) {
  if (finiteBits(floatBits(scale))) return zcollSuccess;
  return fail(zcollInvalidArgument, "%s: scale = %g, must be finite", what,
              static_cast<double>(scale));
}

Result validate(const QuantParams& p) {
  if (p.bits != 4 && p.bits != 8 && p.bits != 16) {
    return fail(zcollInvalidArgument, "quantization bits = %d, must be 4, 8 or 16", p.bits);
  }
  if (p.bits == 16 && p.wire16 != zcollBfloat16 && p.wire16 != zcollFloat16) {
    return fail(zcollInvalidArgument, "quantization bits = 16 with wire16 = %s (%d): must be "
                "zcollBfloat16 or zcollFloat16", dtypeName(p.wire16), static_cast<int>(p.wire16));
  }
  if (p.blockSize < kMinBlockSize || p.blockSize > kMaxBlockSize ||
      p.blockSize % kBlockSizeMultiple != 0) {
    return fail(zcollInvalidArgument,
                "quantization blockSize = %d, must be a multiple of %d in [%d, %d]", p.blockSize,
                kBlockSizeMultiple, kMinBlockSize, kMaxBlockSize);
  }
  return zcollSuccess;
}

size_t quantizedBytes(size_t n, const QuantParams& p) {
  if (validate(p) != zcollSuccess || n == 0) return 0;
  return layoutOf(n, p.blockSize, p.bits, p.symmetric).totalBytes;
}

size_t quantizedChunksBytes(size_t chunkElems, size_t nChunks, const QuantParams& p) {
  return nChunks * quantizedBytes(chunkElems, p);
}

size_t dequantizedBytes(size_t n, zcollDataType_t dtype) {
  return quantizable(dtype) ? n * dtypeSize(dtype) : 0;
}

size_t requantizedBytes(size_t n, const QuantParams& outParams) {
  return quantizedBytes(n, outParams);
}

Result quantize(const void* in, zcollDataType_t dtype, size_t n, const QuantParams& p, void* out) {
  ZCOLL_CHECK(validate(p));
  ZCOLL_CHECK(checkQuantizable(dtype, "quantize"));
  ZCOLL_CHECK(checkPtr(in, n, "quantize", "input"));
  ZCOLL_CHECK(checkPtr(out, n, "quantize", "output"));
  PinnedFpEnv env;
  if (n > 0) active(QuantOp::kQuantize).quantize(in, dtype, n, p, out);
  return zcollSuccess;
}

Result quantizeChunks(const void* in, zcollDataType_t dtype, size_t chunkElems, size_t nChunks,
                      const int* destOrder, const QuantParams& p, void* out) {
  ZCOLL_CHECK(validate(p));
  ZCOLL_CHECK(checkQuantizable(dtype, "quantizeChunks"));
  size_t total = chunkElems * nChunks;
  ZCOLL_CHECK(checkPtr(in, total, "quantizeChunks", "input"));
  ZCOLL_CHECK(checkPtr(out, total, "quantizeChunks", "output"));
  if (total == 0) return zcollSuccess;
  for (size_t c = 0; destOrder != nullptr && c < nChunks; ++c) {
    if (destOrder[c] < 0 || static_cast<size_t>(destOrder[c]) >= nChunks) {
      return fail(zcollInvalidArgument, "quantizeChunks: destOrder[%zu] = %d, not in [0, %zu)", c,
                  destOrder[c], nChunks);
    }
  }
  PinnedFpEnv env;
  const KernelSet& ks = active(QuantOp::kQuantize);
  size_t slot = quantizedBytes(chunkElems, p), esize = dtypeSize(dtype);
  QuantParams cp = p;
  for (size_t c = 0; c < nChunks; ++c) {
    size_t dst = destOrder ? static_cast<size_t>(destOrder[c]) : c;
    cp.elementOffset = p.elementOffset + c * chunkElems;
    ks.quantize(static_cast<const char*>(in) + c * chunkElems * esize, dtype, chunkElems, cp,
                static_cast<char*>(out) + dst * slot);
  }
  return zcollSuccess;
}

Result dequantize(const void* q, size_t n, const QuantParams& p, void* out,
                  zcollDataType_t dtype) {
  ZCOLL_CHECK(validate(p));
  ZCOLL_CHECK(checkQuantizable(dtype, "dequantize"));
  ZCOLL_CHECK(checkPtr(q, n, "dequantize", "input"));
  ZCOLL_CHECK(checkPtr(out, n, "dequantize", "output"));
  PinnedFpEnv env;
  if (n > 0) active(QuantOp::kDequantize).dequantize(q, n, p, out, dtype);
  return zcollSuccess;
}

Result dequantizeSum(const void* const* chunks, int k, size_t n, const QuantParams& p, float scale,
                     void* out, zcollDataType_t dtype) {
  ZCOLL_CHECK(validate(p));
  ZCOLL_CHECK(checkQuantizable(dtype, "dequantizeSum"));
  ZCOLL_CHECK(checkChunks(chunks, k, n, "dequantizeSum"));
  ZCOLL_CHECK(validateSumScale(scale, "dequantizeSum"));
  ZCOLL_CHECK(checkPtr(out, n, "dequantizeSum", "output"));
  PinnedFpEnv env;
  if (n > 0) active(QuantOp::kSum).dequantizeSum(chunks, k, n, p, scale, out, dtype);
  return zcollSuccess;
}

Result dequantReduceRequant(const void* const* chunks, int k, size_t n, const QuantParams& inParams,
                            const QuantParams& outParams, void* outQ) {
  ZCOLL_CHECK(validate(inParams));
  ZCOLL_CHECK(validate(outParams));
  ZCOLL_CHECK(checkBlockOutput(outParams, "dequantReduceRequant"));
  ZCOLL_CHECK(checkChunks(chunks, k, n, "dequantReduceRequant"));
  ZCOLL_CHECK(checkPtr(outQ, n, "dequantReduceRequant", "output"));
  PinnedFpEnv env;
  if (n > 0) active(QuantOp::kRequantize).requantize(chunks, k, n, inParams, outParams, outQ);
  return zcollSuccess;
}

}  // namespace quant
}  // namespace zcoll
