// The element-wise reduction rules, written once for the CPU kernels (reduce_kernels.cc) and the
// CUDA kernels (cuda/reduce_cuda.cu), so both give the same bits: 16-bit floats combine in fp32
// (the accumulator type) and round once when stored; integer sums and products wrap (two's
// complement); max/min keep the first operand unless the second compares greater/smaller; the
// average divides the accumulated sum by the divisor in the accumulator type.
#pragma once

#include <cstdint>
#include <type_traits>

#include "base/dtype.h"

namespace zcoll {
namespace redmath {

// Storage type -> accumulator type and conversions.
template <typename T> struct Acc { using type = T; };
template <> struct Acc<half_t> { using type = float; };
template <> struct Acc<bf16_t> { using type = float; };

template <typename T> ZCOLL_HD typename Acc<T>::type load(T v) { return v; }
ZCOLL_HD float load(half_t v) { return halfToFloat(v); }
ZCOLL_HD float load(bf16_t v) { return bf16ToFloat(v); }

template <typename T> ZCOLL_HD T store(typename Acc<T>::type v) { return v; }
template <> ZCOLL_HD half_t store<half_t>(float v) { return floatToHalf(v); }
template <> ZCOLL_HD bf16_t store<bf16_t>(float v) { return floatToBf16(v); }

template <typename A> ZCOLL_HD A add(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <typename A> ZCOLL_HD A mul(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::conditional_t<(sizeof(A) < sizeof(unsigned)), unsigned, std::make_unsigned_t<A>>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

template <typename A, zcollRedOp_t Op> ZCOLL_HD A combine(A a, A b) {
  if constexpr (Op == zcollSum || Op == zcollAvg) return add(a, b);
  if constexpr (Op == zcollProd) return mul(a, b);
  if constexpr (Op == zcollMax) return b > a ? b : a;
  if constexpr (Op == zcollMin) return b < a ? b : a;
}

// out = (a + b) / divisor, rounded to the storage type once.
template <typename T> ZCOLL_HD T averageOfTwo(T a, T b, typename Acc<T>::type divisor) {
  return store<T>(static_cast<typename Acc<T>::type>(add(load(a), load(b)) / divisor));
}

// acc / divisor in the accumulator type, rounded to the storage type once.
template <typename T> ZCOLL_HD T divideStore(typename Acc<T>::type acc, typename Acc<T>::type divisor) {
  return store<T>(static_cast<typename Acc<T>::type>(acc / divisor));
}

// in * scalar in the accumulator type, rounded to the storage type once (16-bit floats through
// fp32; integers wrap): NCCL's PreMulSum scaling (Executor::scale).
template <typename T> ZCOLL_HD T scaleElement(T in, T scalar) {
  return store<T>(mul(load(in), load(scalar)));
}

// Run-time dtype -> storage type, for host-side dispatch (F<T>::run(args...)).
template <template <typename> class F, typename... Args>
void dispatchDtype(zcollDataType_t dtype, Args&&... args) {
  switch (dtype) {
    case zcollInt8: F<int8_t>::run(args...); break;
    case zcollUint8: F<uint8_t>::run(args...); break;
    case zcollInt32: F<int32_t>::run(args...); break;
    case zcollUint32: F<uint32_t>::run(args...); break;
    case zcollInt64: F<int64_t>::run(args...); break;
    case zcollUint64: F<uint64_t>::run(args...); break;
    case zcollFloat16: F<half_t>::run(args...); break;
    case zcollFloat32: F<float>::run(args...); break;
    case zcollFloat64: F<double>::run(args...); break;
    case zcollBfloat16: F<bf16_t>::run(args...); break;
    default: break;
  }
}

}  // namespace redmath
}  // namespace zcoll
