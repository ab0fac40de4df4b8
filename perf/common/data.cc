// Deterministic test values and typed buffer access (one template per operation, dispatched
// once per buffer on the dtype).
#include "common/data.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "base/dtype.h"

namespace zcoll {
namespace perf {
namespace {

constexpr size_t kMaxValue = 120;  // every value and every result stays in [0, 120]

template <class T>
T fromDouble(double v) {
  return static_cast<T>(v);
}
template <>
half_t fromDouble<half_t>(double v) {
  return floatToHalf(static_cast<float>(v));
}
template <>
bf16_t fromDouble<bf16_t>(double v) {
  return floatToBf16(static_cast<float>(v));
}

template <class T>
double toDouble(T v) {
  return static_cast<double>(v);
}
template <>
double toDouble<half_t>(half_t v) {
  return halfToFloat(v);
}
template <>
double toDouble<bf16_t>(bf16_t v) {
  return bf16ToFloat(v);
}

// Calls f(T{}) with T the storage type of t.
template <class F>
void withType(zcollDataType_t t, F&& f) {
  switch (t) {
    case zcollInt8: f(int8_t{}); break;
    case zcollUint8: f(uint8_t{}); break;
    case zcollInt32: f(int32_t{}); break;
    case zcollUint32: f(uint32_t{}); break;
    case zcollInt64: f(int64_t{}); break;
    case zcollUint64: f(uint64_t{}); break;
    case zcollFloat16: f(half_t{}); break;
    case zcollFloat32: f(float{}); break;
    case zcollFloat64: f(double{}); break;
    case zcollBfloat16: f(bf16_t{}); break;
    default: std::abort();  // options are validated before any buffer is touched
  }
}

double combine(zcollRedOp_t op, double a, double b) {
  switch (op) {
    case zcollProd: return a * b;
    case zcollMax: return std::max(a, b);
    case zcollMin: return std::min(a, b);
    default: return a + b;  // Sum, and Avg before the division
  }
}

// Largest per-rank value such that the sum over n ranks stays <= kMaxValue.
size_t sumShare(int n) { return std::max<size_t>(1, kMaxValue / size_t(n)); }

}  // namespace

double movedValue(int rank, size_t i) {
  // 31 is coprime with 121, so two ranks never agree at the same index.
  return double((size_t(rank) * 31 + i * 7) % (kMaxValue + 1));
}

double reduceInput(const Pattern& p, int rank, size_t i) {
  size_t n = size_t(p.nranks), r = size_t(rank);
  switch (p.op) {
    case zcollSum:
      return double((i * 7 + r * 3) % (sumShare(p.nranks) + 1));
    case zcollProd: {
      // t of the ranks (which ones moves with i) hold 2, the others 1: product 2^t <= 64.
      size_t t = i % (std::min<size_t>(n, 6) + 1);
      return (i + r) % n < t ? 2.0 : 1.0;
    }
    case zcollMax:
    case zcollMin:
      return movedValue(rank, i);
    default: {
      // Avg: a common base plus one rank holding +n, so the sum is a multiple of n and the
      // average is exact even in integer types.
      size_t base = (i * 7) % sumShare(p.nranks);
      return double(base + ((i + r) % n == 0 ? n : 0));
    }
  }
}

double reduceResult(const Pattern& p, size_t i) {
  double acc = reduceInput(p, 0, i);
  for (int r = 1; r < p.nranks; ++r) acc = combine(p.op, acc, reduceInput(p, r, i));
  return p.op == zcollAvg ? acc / p.nranks : acc;
}

void fillValues(void* buf, zcollDataType_t t, size_t n, const Pattern& p, int rank,
                const ValueFn& value) {
  withType(t, [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(buf);
    for (size_t i = 0; i < n; ++i) out[i] = fromDouble<T>(value(p, rank, i));
  });
}

void fillConstant(void* buf, zcollDataType_t t, size_t n, double value) {
  withType(t, [&](auto tag) {
    using T = decltype(tag);
    std::fill_n(static_cast<T*>(buf), n, fromDouble<T>(value));
  });
}

Verdict verifyValues(const void* buf, zcollDataType_t t, size_t n, const Pattern& p, int rank,
                     const ValueFn& expected, double tolerance) {
  Verdict v;
  withType(t, [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(buf);
    for (size_t i = 0; i < n; ++i) {
      double err = std::fabs(toDouble(in[i]) - expected(p, rank, i));
      if (!(err <= tolerance)) ++v.wrong;  // also counts NaN
      if (err > v.maxError || std::isnan(err)) v.maxError = err;
    }
  });
  return v;
}

void spoilValue(void* buf, zcollDataType_t t, size_t i) {
  withType(t, [&](auto tag) {
    using T = decltype(tag);
    static_cast<T*>(buf)[i] = fromDouble<T>(kPoison + 1);
  });
}

}  // namespace perf
}  // namespace zcoll
