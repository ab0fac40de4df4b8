// Run-time values -> compile-time template arguments, for the kernels templated over dtype,
// bits and flags (CPU kernels in src/quant, CUDA launchers in cuda/). Host code only.
#pragma once

#include <type_traits>

#include "base/dtype.h"
#include "zcoll/zcoll.h"

namespace zcoll {
namespace quant {

template <class T>
struct TypeTag {
  using type = T;
};

template <class F>
void withDtype(zcollDataType_t dt, F&& f) {
  if (dt == zcollFloat16) {
    f(TypeTag<half_t>{});
  } else if (dt == zcollBfloat16) {
    f(TypeTag<bf16_t>{});
  } else {
    f(TypeTag<float>{});
  }
}

template <class F>
void withBits(int bits, F&& f) {
  if (bits == 4) {
    f(std::integral_constant<int, 4>{});
  } else {
    f(std::integral_constant<int, 8>{});
  }
}

// The 16-bit float of bits-16 data (QuantParams::wire16): fp16, else bf16.
template <class F>
void withWire16(zcollDataType_t dt, F&& f) {
  if (dt == zcollFloat16) {
    f(TypeTag<half_t>{});
  } else {
    f(TypeTag<bf16_t>{});
  }
}

template <class F>
void withBool(bool b, F&& f) {
  if (b) {
    f(std::true_type{});
  } else {
    f(std::false_type{});
  }
}

}  // namespace quant
}  // namespace zcoll
