#include "premulsum.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "comm.h"
#include "errors.h"
#include "types.h"

namespace zcoll_nccl {
namespace {

float halfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  uint32_t bits = exp == 31 ? (sign | 0x7f800000u | (man << 13))
                            : (sign | ((exp + 112) << 23) | (man << 13));
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToHalf(float f) {  // round to nearest even
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow
  if (absx < 0x38800000u) {  // subnormal or zero
    const float a = std::fabs(f) * 16777216.0f;  // 2^24
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a)));
  }
  const uint32_t mant = absx & 0x7fffffu;
  uint32_t h = ((absx >> 23) - 112) << 10 | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float bf16ToFloat(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

double readScalar(const void* p, ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return *static_cast<const int8_t*>(p);
    case ncclUint8: return *static_cast<const uint8_t*>(p);
    case ncclInt32: return *static_cast<const int32_t*>(p);
    case ncclUint32: return *static_cast<const uint32_t*>(p);
    case ncclInt64: return static_cast<double>(*static_cast<const int64_t*>(p));
    case ncclUint64: return static_cast<double>(*static_cast<const uint64_t*>(p));
    case ncclFloat16: return halfToFloat(*static_cast<const uint16_t*>(p));
    case ncclBfloat16: return bf16ToFloat(*static_cast<const uint16_t*>(p));
    case ncclFloat32: return *static_cast<const float*>(p);
    case ncclFloat64: return *static_cast<const double*>(p);
    default: return 0;
  }
}

template <typename T>
void scaleInt(const void* src, void* dst, size_t n, double s) {
  const T* in = static_cast<const T*>(src);
  T* out = static_cast<T*>(dst);
  const T k = static_cast<T>(s);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(in[i] * k);
}

void scale(const void* src, void* dst, size_t n, ncclDataType_t t, double s) {
  switch (t) {
    case ncclInt8: scaleInt<int8_t>(src, dst, n, s); break;
    case ncclUint8: scaleInt<uint8_t>(src, dst, n, s); break;
    case ncclInt32: scaleInt<int32_t>(src, dst, n, s); break;
    case ncclUint32: scaleInt<uint32_t>(src, dst, n, s); break;
    case ncclInt64: scaleInt<int64_t>(src, dst, n, s); break;
    case ncclUint64: scaleInt<uint64_t>(src, dst, n, s); break;
    case ncclFloat32: {
      const float* in = static_cast<const float*>(src);
      float* out = static_cast<float*>(dst);
      const float k = static_cast<float>(s);
      for (size_t i = 0; i < n; ++i) out[i] = in[i] * k;
      break;
    }
    case ncclFloat64: {
      const double* in = static_cast<const double*>(src);
      double* out = static_cast<double*>(dst);
      for (size_t i = 0; i < n; ++i) out[i] = in[i] * s;
      break;
    }
    case ncclFloat16: case ncclBfloat16: {
      const uint16_t* in = static_cast<const uint16_t*>(src);
      uint16_t* out = static_cast<uint16_t*>(dst);
      const float k = static_cast<float>(s);
      for (size_t i = 0; i < n; ++i)
        out[i] = t == ncclFloat16 ? floatToHalf(halfToFloat(in[i]) * k)
                                  : floatToBf16(bf16ToFloat(in[i]) * k);
      break;
    }
    default: break;
  }
}

}  // namespace

ncclResult_t resolveOp(ncclComm_t comm, ncclRedOp_t op, ncclDataType_t type, const char* call,
                       ResolvedOp* out) {
  if (builtinOp(op)) {
    out->op = static_cast<zcollRedOp_t>(op);
    return ncclSuccess;
  }
  std::lock_guard<std::mutex> lock(comm->mutex);
  const size_t i = static_cast<size_t>(op) - ncclNumOps;
  if (op < ncclNumOps || i >= comm->preMulOps.size() || !comm->preMulOps[i].live)
    return fail(ncclInvalidArgument, "%s: op %d is neither a built-in operator nor a PreMulSum "
                "of this comm", call, static_cast<int>(op));
  if (comm->preMulOps[i].datatype != type)
    return fail(ncclInvalidArgument, "%s: PreMulSum op %d was made for %s, the call is on %s",
                call, static_cast<int>(op), typeName(comm->preMulOps[i].datatype), typeName(type));
  out->op = zcollSum;
  out->preMul = true;
  out->scalar = comm->preMulOps[i].scalar;
  return ncclSuccess;
}

ncclResult_t preMultiply(const ResolvedOp& op, const void* src, size_t count, ncclDataType_t type,
                         const char* call, std::vector<unsigned char>* scratch, const void** out) {
  *out = src;
  if (!op.preMul || count == 0) return ncclSuccess;
  int device = 0;
  zcollGetDeviceSupport(&device);
  if (device)
    return fail(ncclInvalidUsage, "%s with a PreMulSum operator is not served by zcoll in a "
                "process with device support (zcoll scales on the host; docs/NCCL.md)", call);
  if (src == nullptr) return fail(ncclInvalidArgument, "%s: sendbuff is NULL", call);
  scratch->resize(count * typeSize(type));
  scale(src, scratch->data(), count, type, op.scalar);
  *out = scratch->data();
  return ncclSuccess;
}

}  // namespace zcoll_nccl

using namespace zcoll_nccl;

extern "C" {

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  ncclResult_t r = readyComm(comm, "ncclRedOpCreatePreMulSum");
  if (r != ncclSuccess) return r;
  if (op == nullptr || scalar == nullptr)
    return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op or scalar is NULL");
  if (!servedType(datatype))
    return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: datatype %d is not one zcoll "
                "reduces", static_cast<int>(datatype));
  if (residence != ncclScalarHostImmediate && residence != ncclScalarDevice)
    return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: residence %d", residence);
  if (residence == ncclScalarDevice) {
    int device = 0;
    zcollGetDeviceSupport(&device);
    if (device)
      return fail(ncclInvalidUsage, "ncclRedOpCreatePreMulSum: a scalar in device memory "
                  "(ncclScalarDevice) is not served by zcoll (docs/NCCL.md)");
  }
  std::lock_guard<std::mutex> lock(comm->mutex);
  comm->preMulOps.push_back({readScalar(scalar, datatype), datatype, true});
  *op = static_cast<ncclRedOp_t>(ncclNumOps + comm->preMulOps.size() - 1);
  return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  ncclResult_t r = readyComm(comm, "ncclRedOpDestroy");
  if (r != ncclSuccess) return r;
  std::lock_guard<std::mutex> lock(comm->mutex);
  const size_t i = static_cast<size_t>(op) - ncclNumOps;
  if (op < ncclNumOps || i >= comm->preMulOps.size() || !comm->preMulOps[i].live)
    return fail(ncclInvalidArgument, "ncclRedOpDestroy: op %d is not a live PreMulSum of this "
                "comm", static_cast<int>(op));
  comm->preMulOps[i].live = false;
  return ncclSuccess;
}

}  // extern "C"
