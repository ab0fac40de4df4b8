#include "ffi_common.h"

#include <string>
#include <utility>

namespace zcoll_jax {

namespace {

// An InvalidArgument error, as the error of an ErrorOr.
ffi::Unexpected<ffi::Error> Invalid(std::string message) {
  return ffi::Error::InvalidArgument(std::move(message));
}

}  // namespace

ffi::ErrorOr<zcollComm_t> CommFromHandle(int64_t handle) {
  if (handle == 0) {
    return Invalid(
        ("zcoll.jax: the comm attribute is 0 (a destroyed or never created communicator)"));
  }
  return reinterpret_cast<zcollComm_t>(static_cast<intptr_t>(handle));
}

std::optional<zcollDataType_t> ZcollType(ffi::DataType type) {
  switch (type) {
    case ffi::DataType::S8:
      return zcollInt8;
    case ffi::DataType::U8:
      return zcollUint8;
    case ffi::DataType::S32:
      return zcollInt32;
    case ffi::DataType::U32:
      return zcollUint32;
    case ffi::DataType::S64:
      return zcollInt64;
    case ffi::DataType::U64:
      return zcollUint64;
    case ffi::DataType::F16:
      return zcollFloat16;
    case ffi::DataType::F32:
      return zcollFloat32;
    case ffi::DataType::F64:
      return zcollFloat64;
    case ffi::DataType::BF16:
      return zcollBfloat16;
    default:
      return std::nullopt;
  }
}

ffi::ErrorOr<zcollRedOp_t> RedOp(int64_t op) {
  if (op < 0 || op >= zcollNumOps) {
    return Invalid(
        ("zcoll.jax: op attribute " + std::to_string(op) + " is not a zcollRedOp_t (0..4)"));
  }
  return static_cast<zcollRedOp_t>(op);
}

ffi::ErrorOr<zcollDataType_t> CommonType(const char* call, ffi::AnyBuffer x,
                                         const ffi::AnyBuffer& out) {
  std::optional<zcollDataType_t> type = ZcollType(x.element_type());
  if (!type) {
    return Invalid(
        std::string(call) + ": element type " + std::to_string(static_cast<int>(x.element_type())) +
        " (XLA's code) has no zcoll type; use int8/uint8/int32/uint32/int64/uint64/float16/"
        "bfloat16/float32/float64");
  }
  if (out.element_type() != x.element_type()) {
    return Invalid((std::string(call) + ": the output's element type differs from the input's"));
  }
  return *type;
}

ffi::Error CheckCount(const char* call, const char* what, size_t count, size_t expected) {
  if (count == expected) return ffi::Error::Success();
  return ffi::Error::InvalidArgument(std::string(call) + ": " + what + " has " +
                                     std::to_string(count) + " elements, expected " +
                                     std::to_string(expected));
}

ffi::ErrorOr<int> RankCount(zcollComm_t comm) {
  int count = 0;
  if (ffi::Error err = FromZcoll("zcollCommCount", zcollCommCount(comm, &count), comm);
      err.failure()) {
    return ffi::Unexpected(std::move(err));
  }
  return count;
}

ffi::ErrorOr<zcollQuantConfig_t> QuantConfig(const QuantAttrs& a) {
  const int64_t fields[] = {a.bits, a.intra_bits, a.block_size,
                            a.mode, a.rounding,   a.pipeline_depth};
  for (int64_t v : fields) {
    if (v < 0 || v > INT32_MAX) {
      return Invalid(
          ("zcoll.jax: quantization attribute " + std::to_string(v) + " is out of range"));
    }
  }
  zcollQuantConfig_t q = ZCOLL_QUANT_CONFIG_INITIALIZER;
  q.bits = static_cast<int>(a.bits);
  q.intraBits = static_cast<int>(a.intra_bits);
  q.blockSize = static_cast<int>(a.block_size);
  q.mode = static_cast<int>(a.mode);
  q.rounding = static_cast<int>(a.rounding);
  q.seed = static_cast<unsigned long long>(a.seed);  // the seed's 64 bits, as given
  q.pipelineDepth = static_cast<int>(a.pipeline_depth);
  return q;
}

namespace {

ffi::ErrorCode CodeOf(zcollResult_t result) {
  switch (result) {
    case zcollInvalidArgument:
      return ffi::ErrorCode::kInvalidArgument;
    case zcollInvalidUsage:
      return ffi::ErrorCode::kFailedPrecondition;
    case zcollTimeout:
      return ffi::ErrorCode::kDeadlineExceeded;
    case zcollRemoteError:
      return ffi::ErrorCode::kUnavailable;
    case zcollUnsupported:
      return ffi::ErrorCode::kUnimplemented;
    default:
      return ffi::ErrorCode::kInternal;
  }
}

}  // namespace

ffi::Error FromZcoll(const char* call, zcollResult_t result, zcollComm_t comm) {
  if (result == zcollSuccess) return ffi::Error::Success();
  const char* detail = zcollGetLastError(comm);
  return ffi::Error(CodeOf(result), std::string(call) + " failed: " + zcollGetErrorString(result) +
                                        ": " + (detail != nullptr ? detail : ""));
}

}  // namespace zcoll_jax
