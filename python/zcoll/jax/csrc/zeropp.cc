// XLA FFI handlers for the ZeRO++ collectives (qwZ, hpZ, qgZ, the quantized all-reduce): each
// checks its buffers against the communicator, turns the `quant` attribute into a
// zcollQuantConfig_t and makes the one zcoll call (zcoll.h and docs/ZEROPP.md give the
// semantics and bounds). hpZ's secondary shard is a result of the forward gather and an
// operand of the backward one, so it lives in XLA's buffers like any array.
#include <utility>

#include "ffi_common.h"

namespace zcoll_jax {
namespace {

// The secondary shard's element count for a gather of `sendcount` elements per rank.
ffi::ErrorOr<size_t> SecondaryCount(zcollComm_t comm, size_t sendcount) {
  size_t count = 0;
  ffi::Error err = FromZcoll("zcollSecondaryShardCount",
                             zcollSecondaryShardCount(comm, sendcount, &count), comm);
  if (err.failure()) return ffi::Unexpected(std::move(err));
  return count;
}

// qwZ: out = the ranks' x, each dequant(quant(x)), concatenated in rank order.
ffi::Error QuantizedAllGather(zcollStream_t stream, ffi::Token, ffi::AnyBuffer x,
                              ffi::Result<ffi::Token>, ffi::Result<ffi::AnyBuffer> out,
                              int64_t handle, QuantAttrs attrs) {
  constexpr const char* kCall = "zcollQuantizedAllGather";
  ZCOLL_JAX_ASSIGN(comm, CommFromHandle(handle));
  ZCOLL_JAX_ASSIGN(type, CommonType(kCall, x, *out));
  ZCOLL_JAX_ASSIGN(quant, QuantConfig(attrs));
  ZCOLL_JAX_ASSIGN(ranks, RankCount(comm));
  ZCOLL_JAX_CHECK(CheckCount(kCall, "the output", out->element_count(), x.element_count() * ranks));
  return FromZcoll(kCall,
                   zcollQuantizedAllGather(x.untyped_data(), out->untyped_data(), x.element_count(),
                                           type, &quant, comm, stream),
                   comm);
}

// hpZ forward: out as all_gather (quantized on the inter-node hop when `quantized`), and the
// secondary shard (zcollSecondaryShardCount elements) for all_gather_from_secondary.
ffi::Error AllGatherHier(zcollStream_t stream, ffi::Token, ffi::AnyBuffer x,
                         ffi::Result<ffi::Token>, ffi::Result<ffi::AnyBuffer> out,
                         ffi::Result<ffi::AnyBuffer> secondary, int64_t handle, int64_t quantized,
                         QuantAttrs attrs) {
  constexpr const char* kCall = "zcollAllGatherHier";
  ZCOLL_JAX_ASSIGN(comm, CommFromHandle(handle));
  ZCOLL_JAX_ASSIGN(type, CommonType(kCall, x, *out));
  if (secondary->element_type() != x.element_type()) {
    return ffi::Error::InvalidArgument(
        "zcollAllGatherHier: the secondary shard's element type differs from the input's");
  }
  ZCOLL_JAX_ASSIGN(quant, QuantConfig(attrs));
  ZCOLL_JAX_ASSIGN(ranks, RankCount(comm));
  ZCOLL_JAX_ASSIGN(secondary_count, SecondaryCount(comm, x.element_count()));
  ZCOLL_JAX_CHECK(CheckCount(kCall, "the output", out->element_count(), x.element_count() * ranks));
  ZCOLL_JAX_CHECK(
      CheckCount(kCall, "the secondary shard", secondary->element_count(), secondary_count));
  return FromZcoll(
      kCall,
      zcollAllGatherHier(x.untyped_data(), out->untyped_data(), secondary->untyped_data(),
                         x.element_count(), type, quantized != 0 ? &quant : nullptr, comm, stream),
      comm);
}

// hpZ backward: out = the forward gather's out, from the secondary shard (intra-node only).
ffi::Error AllGatherFromSecondary(zcollStream_t stream, ffi::Token, ffi::AnyBuffer secondary,
                                  ffi::Result<ffi::Token>, ffi::Result<ffi::AnyBuffer> out,
                                  int64_t handle) {
  constexpr const char* kCall = "zcollAllGatherFromSecondary";
  ZCOLL_JAX_ASSIGN(comm, CommFromHandle(handle));
  ZCOLL_JAX_ASSIGN(type, CommonType(kCall, secondary, *out));
  ZCOLL_JAX_ASSIGN(ranks, RankCount(comm));
  const size_t sendcount = out->element_count() / ranks;
  ZCOLL_JAX_CHECK(CheckCount(kCall, "the output", out->element_count(), sendcount * ranks));
  ZCOLL_JAX_ASSIGN(secondary_count, SecondaryCount(comm, sendcount));
  ZCOLL_JAX_CHECK(
      CheckCount(kCall, "the secondary shard", secondary.element_count(), secondary_count));
  return FromZcoll(kCall,
                   zcollAllGatherFromSecondary(secondary.untyped_data(), out->untyped_data(),
                                               sendcount, type, comm, stream),
                   comm);
}

// qgZ: out = Sum (or Avg) over the ranks of this rank's block of x, quantized traffic.
ffi::Error QuantizedReduceScatter(zcollStream_t stream, ffi::Token, ffi::AnyBuffer x,
                                  ffi::Result<ffi::Token>, ffi::Result<ffi::AnyBuffer> out,
                                  int64_t handle, int64_t op_attr, QuantAttrs attrs) {
  constexpr const char* kCall = "zcollQuantizedReduceScatter";
  ZCOLL_JAX_ASSIGN(comm, CommFromHandle(handle));
  ZCOLL_JAX_ASSIGN(type, CommonType(kCall, x, *out));
  ZCOLL_JAX_ASSIGN(op, RedOp(op_attr));
  ZCOLL_JAX_ASSIGN(quant, QuantConfig(attrs));
  ZCOLL_JAX_ASSIGN(ranks, RankCount(comm));
  ZCOLL_JAX_CHECK(CheckCount(kCall, "the input", x.element_count(), out->element_count() * ranks));
  return FromZcoll(
      kCall,
      zcollQuantizedReduceScatter(x.untyped_data(), out->untyped_data(), out->element_count(), type,
                                  op, &quant, comm, stream),
      comm);
}

// out = Sum (or Avg) over the ranks of x, quantized traffic; identical bits on every rank.
ffi::Error QuantizedAllReduce(zcollStream_t stream, ffi::Token, ffi::AnyBuffer x,
                              ffi::Result<ffi::Token>, ffi::Result<ffi::AnyBuffer> out,
                              int64_t handle, int64_t op_attr, QuantAttrs attrs) {
  constexpr const char* kCall = "zcollQuantizedAllReduce";
  ZCOLL_JAX_ASSIGN(comm, CommFromHandle(handle));
  ZCOLL_JAX_ASSIGN(type, CommonType(kCall, x, *out));
  ZCOLL_JAX_ASSIGN(op, RedOp(op_attr));
  ZCOLL_JAX_ASSIGN(quant, QuantConfig(attrs));
  ZCOLL_JAX_CHECK(CheckCount(kCall, "the output", out->element_count(), x.element_count()));
  return FromZcoll(kCall,
                   zcollQuantizedAllReduce(x.untyped_data(), out->untyped_data(), x.element_count(),
                                           type, op, &quant, comm, stream),
                   comm);
}

}  // namespace
}  // namespace zcoll_jax

#define ZCOLL_JAX_QUANT_ATTR .Attr<::zcoll_jax::QuantAttrs>("quant")

ZCOLL_JAX_TARGETS(ZcollJaxQuantizedAllGather, zcoll_jax::QuantizedAllGather,
                  ZCOLL_JAX_ONE_IN_ONE_OUT ZCOLL_JAX_QUANT_ATTR);
ZCOLL_JAX_TARGETS(ZcollJaxAllGatherHier, zcoll_jax::AllGatherHier,
                  .Arg<::xla::ffi::Token>()
                      .Arg<::xla::ffi::AnyBuffer>()
                      .Ret<::xla::ffi::Token>()
                      .Ret<::xla::ffi::AnyBuffer>()
                      .Ret<::xla::ffi::AnyBuffer>()
                      .Attr<int64_t>("comm")
                      .Attr<int64_t>("quantized") ZCOLL_JAX_QUANT_ATTR);
ZCOLL_JAX_TARGETS(ZcollJaxAllGatherFromSecondary, zcoll_jax::AllGatherFromSecondary,
                  ZCOLL_JAX_ONE_IN_ONE_OUT);
ZCOLL_JAX_TARGETS(ZcollJaxQuantizedReduceScatter, zcoll_jax::QuantizedReduceScatter,
                  ZCOLL_JAX_ONE_IN_ONE_OUT.Attr<int64_t>("op") ZCOLL_JAX_QUANT_ATTR);
ZCOLL_JAX_TARGETS(ZcollJaxQuantizedAllReduce, zcoll_jax::QuantizedAllReduce,
                  ZCOLL_JAX_ONE_IN_ONE_OUT.Attr<int64_t>("op") ZCOLL_JAX_QUANT_ATTR);
