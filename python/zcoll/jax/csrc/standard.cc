// XLA FFI handlers for the standard collectives: each checks its buffers against the
// communicator and makes the one zcoll call (zcoll.h gives the semantics). Layout of every
// handler: (stream, token in, operands..., token out, results..., attributes...).
#include "ffi_common.h"

namespace zcoll_jax {
namespace {

// out = the ranks' x concatenated in rank order.
ffi::Error AllGather(zcollStream_t stream, ffi::Token, ffi::AnyBuffer x, ffi::Result<ffi::Token>,
                     ffi::Result<ffi::AnyBuffer> out, int64_t handle) {
  constexpr const char* kCall = "zcollAllGather";
  ZCOLL_JAX_ASSIGN(comm, CommFromHandle(handle));
  ZCOLL_JAX_ASSIGN(type, CommonType(kCall, x, *out));
  ZCOLL_JAX_ASSIGN(ranks, RankCount(comm));
  ZCOLL_JAX_CHECK(CheckCount(kCall, "the output", out->element_count(), x.element_count() * ranks));
  return FromZcoll(
      kCall,
      zcollAllGather(x.untyped_data(), out->untyped_data(), x.element_count(), type, comm, stream),
      comm);
}

// out = op over the ranks of this rank's 1/size block of x.
ffi::Error ReduceScatter(zcollStream_t stream, ffi::Token, ffi::AnyBuffer x,
                         ffi::Result<ffi::Token>, ffi::Result<ffi::AnyBuffer> out, int64_t handle,
                         int64_t op_attr) {
  constexpr const char* kCall = "zcollReduceScatter";
  ZCOLL_JAX_ASSIGN(comm, CommFromHandle(handle));
  ZCOLL_JAX_ASSIGN(type, CommonType(kCall, x, *out));
  ZCOLL_JAX_ASSIGN(op, RedOp(op_attr));
  ZCOLL_JAX_ASSIGN(ranks, RankCount(comm));
  ZCOLL_JAX_CHECK(CheckCount(kCall, "the input", x.element_count(), out->element_count() * ranks));
  return FromZcoll(kCall,
                   zcollReduceScatter(x.untyped_data(), out->untyped_data(), out->element_count(),
                                      type, op, comm, stream),
                   comm);
}

// out = op over the ranks of x.
ffi::Error AllReduce(zcollStream_t stream, ffi::Token, ffi::AnyBuffer x, ffi::Result<ffi::Token>,
                     ffi::Result<ffi::AnyBuffer> out, int64_t handle, int64_t op_attr) {
  constexpr const char* kCall = "zcollAllReduce";
  ZCOLL_JAX_ASSIGN(comm, CommFromHandle(handle));
  ZCOLL_JAX_ASSIGN(type, CommonType(kCall, x, *out));
  ZCOLL_JAX_ASSIGN(op, RedOp(op_attr));
  ZCOLL_JAX_CHECK(CheckCount(kCall, "the output", out->element_count(), x.element_count()));
  return FromZcoll(kCall,
                   zcollAllReduce(x.untyped_data(), out->untyped_data(), x.element_count(), type,
                                  op, comm, stream),
                   comm);
}

// Block p of out on rank r = block r of x on rank p (size equal blocks).
ffi::Error AllToAll(zcollStream_t stream, ffi::Token, ffi::AnyBuffer x, ffi::Result<ffi::Token>,
                    ffi::Result<ffi::AnyBuffer> out, int64_t handle) {
  constexpr const char* kCall = "zcollAllToAll";
  ZCOLL_JAX_ASSIGN(comm, CommFromHandle(handle));
  ZCOLL_JAX_ASSIGN(type, CommonType(kCall, x, *out));
  ZCOLL_JAX_ASSIGN(ranks, RankCount(comm));
  const size_t count = x.element_count() / ranks;
  ZCOLL_JAX_CHECK(CheckCount(kCall, "the input", x.element_count(), count * ranks));
  ZCOLL_JAX_CHECK(CheckCount(kCall, "the output", out->element_count(), x.element_count()));
  return FromZcoll(
      kCall, zcollAllToAll(x.untyped_data(), out->untyped_data(), count, type, comm, stream), comm);
}

// out = x of rank `root`.
ffi::Error Broadcast(zcollStream_t stream, ffi::Token, ffi::AnyBuffer x, ffi::Result<ffi::Token>,
                     ffi::Result<ffi::AnyBuffer> out, int64_t handle, int64_t root) {
  constexpr const char* kCall = "zcollBroadcast";
  ZCOLL_JAX_ASSIGN(comm, CommFromHandle(handle));
  ZCOLL_JAX_ASSIGN(type, CommonType(kCall, x, *out));
  ZCOLL_JAX_CHECK(CheckCount(kCall, "the output", out->element_count(), x.element_count()));
  if (root < 0 || root > INT32_MAX) {
    return ffi::Error::InvalidArgument("zcollBroadcast: root " + std::to_string(root) +
                                       " is out of range");
  }
  return FromZcoll(kCall,
                   zcollBroadcast(x.untyped_data(), out->untyped_data(), x.element_count(), type,
                                  static_cast<int>(root), comm, stream),
                   comm);
}

}  // namespace
}  // namespace zcoll_jax

ZCOLL_JAX_TARGETS(ZcollJaxAllGather, zcoll_jax::AllGather, ZCOLL_JAX_ONE_IN_ONE_OUT);
ZCOLL_JAX_TARGETS(ZcollJaxReduceScatter, zcoll_jax::ReduceScatter,
                  ZCOLL_JAX_ONE_IN_ONE_OUT.Attr<int64_t>("op"));
ZCOLL_JAX_TARGETS(ZcollJaxAllReduce, zcoll_jax::AllReduce,
                  ZCOLL_JAX_ONE_IN_ONE_OUT.Attr<int64_t>("op"));
ZCOLL_JAX_TARGETS(ZcollJaxAllToAll, zcoll_jax::AllToAll, ZCOLL_JAX_ONE_IN_ONE_OUT);
ZCOLL_JAX_TARGETS(ZcollJaxBroadcast, zcoll_jax::Broadcast,
                  ZCOLL_JAX_ONE_IN_ONE_OUT.Attr<int64_t>("root"));
