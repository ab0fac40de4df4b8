// What every zcoll XLA FFI handler shares: the communicator attribute, XLA's element types as
// zcoll's, the quantization attributes as a zcollQuantConfig_t, and zcoll's results as
// ffi::Error carrying zcollGetLastError's text.
#ifndef ZCOLL_JAX_FFI_COMMON_H_
#define ZCOLL_JAX_FFI_COMMON_H_

#include <cstdint>
#include <optional>
#include <string>

#include "xla/ffi/api/ffi.h"
#include "zcoll/zcoll.h"

namespace zcoll_jax {

namespace ffi = xla::ffi;

// The stream a host (CPU) target passes to zcoll: none. A CUDA target takes XLA's stream
// (ffi::PlatformStream<zcollStream_t>; zcollStream_t is cudaStream_t's type, CUstream_st*).
struct HostStream {};

// The checked form of a handler's `comm` attribute (the zcollComm_t address as an integer).
ffi::ErrorOr<zcollComm_t> CommFromHandle(int64_t handle);

// zcoll's type for an XLA element type; nullopt for a type zcoll has none for.
std::optional<zcollDataType_t> ZcollType(ffi::DataType type);

// The reduction named by the `op` attribute (zcollRedOp_t's value), checked.
ffi::ErrorOr<zcollRedOp_t> RedOp(int64_t op);

// The element type of `x`, checked to be one zcoll takes and the same as `out`'s.
ffi::ErrorOr<zcollDataType_t> CommonType(const char* call, ffi::AnyBuffer x,
                                         const ffi::AnyBuffer& out);

// InvalidArgument naming the call, unless `count` == `expected`.
ffi::Error CheckCount(const char* call, const char* what, size_t count, size_t expected);

// The ranks of `comm` (zcollCommCount).
ffi::ErrorOr<int> RankCount(zcollComm_t comm);

// The quantization attributes every quantized handler takes (0 = the call's default).
struct QuantAttrs {
  int64_t bits;
  int64_t intra_bits;
  int64_t block_size;
  int64_t mode;
  int64_t rounding;
  int64_t seed;
  int64_t pipeline_depth;
};
ffi::ErrorOr<zcollQuantConfig_t> QuantConfig(const QuantAttrs& attrs);

// Success, or an ffi::Error saying which call failed, zcoll's result and its last error text.
ffi::Error FromZcoll(const char* call, zcollResult_t result, zcollComm_t comm);

}  // namespace zcoll_jax

// A host target's stream: NULL, without asking XLA (a CPU execution context has none).
template <>
struct xla::ffi::CtxDecoding<zcoll_jax::HostStream> {
  using Type = zcollStream_t;
  static std::optional<Type> Decode(const XLA_FFI_Api*, XLA_FFI_ExecutionContext*,
                                    DiagnosticEngine&) {
    return Type{nullptr};
  }
};

// The `quant` attribute: a dictionary of the QuantAttrs fields.
XLA_FFI_REGISTER_STRUCT_ATTR_DECODING(zcoll_jax::QuantAttrs,
                                      ::xla::ffi::StructMember<int64_t>("bits"),
                                      ::xla::ffi::StructMember<int64_t>("intra_bits"),
                                      ::xla::ffi::StructMember<int64_t>("block_size"),
                                      ::xla::ffi::StructMember<int64_t>("mode"),
                                      ::xla::ffi::StructMember<int64_t>("rounding"),
                                      ::xla::ffi::StructMember<int64_t>("seed"),
                                      ::xla::ffi::StructMember<int64_t>("pipeline_depth"));

// Unwraps an ErrorOr into `var`, or returns its error from the enclosing handler.
#define ZCOLL_JAX_ASSIGN(var, expr)                  \
  auto var##_or = (expr);                            \
  if (var##_or.has_error()) return var##_or.error(); \
  auto var = var##_or.value()

#define ZCOLL_JAX_CHECK(expr)        \
  do {                               \
    ffi::Error err_ = (expr);        \
    if (err_.failure()) return err_; \
  } while (0)

// The bindings' common part: token in, one operand, token out, one result, the communicator.
#define ZCOLL_JAX_ONE_IN_ONE_OUT    \
  .Arg<::xla::ffi::Token>()         \
      .Arg<::xla::ffi::AnyBuffer>() \
      .Ret<::xla::ffi::Token>()     \
      .Ret<::xla::ffi::AnyBuffer>() \
      .Attr<int64_t>("comm")

// Two exported targets per collective, one binding: <Name>Host (CPU: host buffers, the call
// blocks) and <Name>Cuda (XLA's CUDA stream: device buffers, the call is enqueued on it).
// Every binding starts with the ordering token (argument and result, zcoll.jax's ordered
// effect) and then the handler's own arguments.
#define ZCOLL_JAX_TARGETS(Name, impl, binding)                                                   \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(Name##Host, impl,                                                \
                                ::xla::ffi::Ffi::Bind().Ctx<::zcoll_jax::HostStream>() binding); \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(                                                                 \
      Name##Cuda, impl,                                                                          \
      ::xla::ffi::Ffi::Bind().Ctx<::xla::ffi::PlatformStream<zcollStream_t>>() binding)

#endif  // ZCOLL_JAX_FFI_COMMON_H_
