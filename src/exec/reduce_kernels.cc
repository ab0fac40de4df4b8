#include "exec/reduce_kernels.h"

#include <cstdint>
#include <cstring>

#include "exec/reduce_math.h"

namespace zcoll {

namespace {

using redmath::Acc;
using redmath::add;
using redmath::combine;
using redmath::load;
using redmath::store;

template <typename T, zcollRedOp_t Op, typename In>
void accumulateLoop(typename Acc<T>::type* acc, const In* in, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] = combine<typename Acc<T>::type, Op>(acc[i], load(in[i]));
}

template <typename T, typename In>
void accumulateOp(void* acc, const In* in, zcollRedOp_t op, size_t n) {
  auto* a = static_cast<typename Acc<T>::type*>(acc);
  switch (op) {
    case zcollSum: accumulateLoop<T, zcollSum>(a, in, n); break;
    case zcollProd: accumulateLoop<T, zcollProd>(a, in, n); break;
    case zcollMax: accumulateLoop<T, zcollMax>(a, in, n); break;
    case zcollMin: accumulateLoop<T, zcollMin>(a, in, n); break;
    case zcollAvg: accumulateLoop<T, zcollAvg>(a, in, n); break;
    default: break;
  }
}

template <typename T, zcollRedOp_t Op>
void combineLoop(T* o, const T* a, const T* b, int avgDivisor, size_t n) {
  using A = typename Acc<T>::type;
  if (Op == zcollAvg && avgDivisor > 0) {
    const A div = static_cast<A>(avgDivisor);
    for (size_t i = 0; i < n; ++i) o[i] = redmath::averageOfTwo(a[i], b[i], div);
    return;
  }
  for (size_t i = 0; i < n; ++i) o[i] = store<T>(combine<A, Op>(load(a[i]), load(b[i])));
}

template <typename T> struct Kernels {
  using A = typename Acc<T>::type;
  static void toAcc(void* acc, const void* in, size_t n) {
    auto* a = static_cast<A*>(acc);
    auto* x = static_cast<const T*>(in);
    for (size_t i = 0; i < n; ++i) a[i] = load(x[i]);
  }
  static void accumulate(void* acc, const void* in, bool inIsAcc, zcollRedOp_t op, size_t n) {
    if (inIsAcc) accumulateOp<T>(acc, static_cast<const A*>(in), op, n);
    else accumulateOp<T>(acc, static_cast<const T*>(in), op, n);
  }
  static void combineInto(void* out, const void* a, const void* b, zcollRedOp_t op, int div,
                          size_t n) {
    auto* o = static_cast<T*>(out);
    auto* x = static_cast<const T*>(a);
    auto* y = static_cast<const T*>(b);
    switch (op) {
      case zcollSum: combineLoop<T, zcollSum>(o, x, y, div, n); break;
      case zcollProd: combineLoop<T, zcollProd>(o, x, y, div, n); break;
      case zcollMax: combineLoop<T, zcollMax>(o, x, y, div, n); break;
      case zcollMin: combineLoop<T, zcollMin>(o, x, y, div, n); break;
      case zcollAvg: combineLoop<T, zcollAvg>(o, x, y, div, n); break;
      default: break;
    }
  }
  static void fromAcc(void* out, const void* acc, zcollRedOp_t op, int nranks, size_t n) {
    auto* o = static_cast<T*>(out);
    auto* a = static_cast<const A*>(acc);
    if (op == zcollAvg) {
      const A div = static_cast<A>(nranks);
      for (size_t i = 0; i < n; ++i) o[i] = redmath::divideStore<T>(a[i], div);
    } else {
      for (size_t i = 0; i < n; ++i) o[i] = store<T>(a[i]);
    }
  }
};

template <typename T> struct ToAcc {
  static void run(void* acc, const void* in, size_t n) { Kernels<T>::toAcc(acc, in, n); }
};
template <typename T> struct Accumulate {
  static void run(void* acc, const void* in, bool inIsAcc, zcollRedOp_t op, size_t n) {
    Kernels<T>::accumulate(acc, in, inIsAcc, op, n);
  }
};
template <typename T> struct CombineInto {
  static void run(void* out, const void* a, const void* b, zcollRedOp_t op, int div, size_t n) {
    Kernels<T>::combineInto(out, a, b, op, div, n);
  }
};
template <typename T> struct FromAcc {
  static void run(void* out, const void* acc, zcollRedOp_t op, int nranks, size_t n) {
    Kernels<T>::fromAcc(out, acc, op, nranks, n);
  }
};

template <typename T>
struct ScaleBy {
  static void run(void* out, const void* in, const void* scalar, size_t n) {
    T* o = static_cast<T*>(out);
    const T* x = static_cast<const T*>(in);
    T s;
    std::memcpy(&s, scalar, sizeof(T));
    for (size_t i = 0; i < n; ++i) o[i] = redmath::scaleElement(x[i], s);
  }
};

}  // namespace

size_t accSize(zcollDataType_t dtype) { return isHalfType(dtype) ? 4 : dtypeSize(dtype); }

void toAcc(void* acc, const void* in, zcollDataType_t dtype, size_t n) {
  if (!isHalfType(dtype)) {
    if (acc != in) std::memcpy(acc, in, n * dtypeSize(dtype));
    return;
  }
  redmath::dispatchDtype<ToAcc>(dtype, acc, in, n);
}

void accumulate(void* acc, const void* in, bool inIsAcc, zcollDataType_t dtype, zcollRedOp_t op,
                size_t n) {
  redmath::dispatchDtype<Accumulate>(dtype, acc, in, inIsAcc, op, n);
}

void combineInto(void* out, const void* a, const void* b, zcollDataType_t dtype, zcollRedOp_t op,
                 int avgDivisor, size_t n) {
  redmath::dispatchDtype<CombineInto>(dtype, out, a, b, op, avgDivisor, n);
}

void fromAcc(void* out, const void* acc, zcollDataType_t dtype, zcollRedOp_t op, int nranks,
             size_t n) {
  if (!isHalfType(dtype) && op != zcollAvg) {
    if (out != acc) std::memmove(out, acc, n * dtypeSize(dtype));
    return;
  }
  redmath::dispatchDtype<FromAcc>(dtype, out, acc, op, nranks, n);
}

void scaleBy(void* out, const void* in, const void* scalar, zcollDataType_t dtype, size_t n) {
  redmath::dispatchDtype<ScaleBy>(dtype, out, in, scalar, n);
}

}  // namespace zcoll
