#include "support/values.h"

#include <cmath>

#include "base/dtype.h"

namespace zcoll::test {

const zcollDataType_t kAllTypes[10] = {zcollInt8,    zcollUint8,   zcollInt32,   zcollUint32,
                                       zcollInt64,   zcollUint64,  zcollFloat16, zcollFloat32,
                                       zcollFloat64, zcollBfloat16};
const zcollRedOp_t kAllOps[5] = {zcollSum, zcollProd, zcollMax, zcollMin, zcollAvg};

size_t typeSize(zcollDataType_t t) { return zcoll::dtypeSize(t); }

bool isSigned(zcollDataType_t t) {
  return t == zcollInt8 || t == zcollInt32 || t == zcollInt64 || isFloat(t);
}

bool isFloat(zcollDataType_t t) {
  return t == zcollFloat16 || t == zcollFloat32 || t == zcollFloat64 || t == zcollBfloat16;
}

void setElement(void* buf, zcollDataType_t t, size_t i, double v) {
  switch (t) {
    case zcollInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); break;
    case zcollUint8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); break;
    case zcollInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case zcollUint32: static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(v); break;
    case zcollInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case zcollUint64: static_cast<uint64_t*>(buf)[i] = static_cast<uint64_t>(v); break;
    case zcollFloat16: static_cast<half_t*>(buf)[i] = floatToHalf(static_cast<float>(v)); break;
    case zcollFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case zcollFloat64: static_cast<double*>(buf)[i] = v; break;
    case zcollBfloat16: static_cast<bf16_t*>(buf)[i] = floatToBf16(static_cast<float>(v)); break;
    default: break;
  }
}

double getElement(const void* buf, zcollDataType_t t, size_t i) {
  switch (t) {
    case zcollInt8: return static_cast<const int8_t*>(buf)[i];
    case zcollUint8: return static_cast<const uint8_t*>(buf)[i];
    case zcollInt32: return static_cast<const int32_t*>(buf)[i];
    case zcollUint32: return static_cast<const uint32_t*>(buf)[i];
    case zcollInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case zcollUint64: return static_cast<double>(static_cast<const uint64_t*>(buf)[i]);
    case zcollFloat16: return halfToFloat(static_cast<const half_t*>(buf)[i]);
    case zcollFloat32: return static_cast<const float*>(buf)[i];
    case zcollFloat64: return static_cast<const double*>(buf)[i];
    case zcollBfloat16: return bf16ToFloat(static_cast<const bf16_t*>(buf)[i]);
    default: return NAN;
  }
}

uint64_t valueHash(uint64_t rank, uint64_t i) {
  uint64_t x = (rank << 48) ^ i ^ 0x9e3779b97f4a7c15ull;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

// Distinct integer values per dtype such that sums over up to 14 ranks stay exact and in range:
// int8/uint8 and bf16 (integers exact to 256) 9 values, fp16 (exact to 2048) 99, others 999.
int valueLevels(zcollDataType_t t) {
  if (t == zcollInt8 || t == zcollUint8 || t == zcollBfloat16) return 9;
  return t == zcollFloat16 ? 99 : 999;
}

double inputValue(zcollDataType_t t, zcollRedOp_t op, int rank, int nranks, size_t i) {
  uint64_t h = valueHash(static_cast<uint64_t>(rank), i);
  if (op == zcollProd) {
    // One rank per element contributes 2, the others +-1: products stay in {+-1, +-2}.
    if (static_cast<int>(valueHash(~uint64_t{0}, i) % nranks) == rank) return 2;
    return (isSigned(t) && (h & 1)) ? -1 : 1;
  }
  int levels = valueLevels(t);
  int v = static_cast<int>(h % static_cast<uint64_t>(levels));
  return isSigned(t) ? v - levels / 2 : v;
}

double expectedValue(zcollDataType_t t, zcollRedOp_t op, int nranks, size_t i) {
  double acc = inputValue(t, op, 0, nranks, i);
  for (int r = 1; r < nranks; ++r) {
    double x = inputValue(t, op, r, nranks, i);
    switch (op) {
      case zcollSum:
      case zcollAvg: acc += x; break;
      case zcollProd: acc *= x; break;
      case zcollMax: acc = std::fmax(acc, x); break;
      case zcollMin: acc = std::fmin(acc, x); break;
      default: break;
    }
  }
  if (op != zcollAvg) return acc;
  if (t == zcollFloat64) return acc / nranks;
  if (isFloat(t)) return static_cast<float>(acc) / static_cast<float>(nranks);
  return std::trunc(acc / nranks);  // integer division truncates toward zero
}

std::vector<unsigned char> makeBuffer(zcollDataType_t t, size_t n) {
  return std::vector<unsigned char>(n * typeSize(t) + 1, kGuardByte);
}

bool guardIntact(const std::vector<unsigned char>& buf) {
  return !buf.empty() && buf.back() == kGuardByte;
}

}  // namespace zcoll::test
