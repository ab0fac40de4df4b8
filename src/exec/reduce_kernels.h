// Element-wise reduction in an accumulator type: fp32 for fp16/bf16, the type itself otherwise.
// Reductions stage partial results in the accumulator type, so 16-bit data is rounded once, at
// the end, whatever the number of ranks.
#pragma once

#include <cstddef>

#include "base/dtype.h"

namespace zcoll {

// Bytes of one accumulator element of `dtype`.
size_t accSize(zcollDataType_t dtype);

// acc[i] = (accumulator) in[i]
void toAcc(void* acc, const void* in, zcollDataType_t dtype, size_t n);
// acc[i] = op(acc[i], in[i]); `in` holds dtype elements, or accumulator elements if inIsAcc.
void accumulate(void* acc, const void* in, bool inIsAcc, zcollDataType_t dtype, zcollRedOp_t op,
                size_t n);
// out[i] = (dtype) op(a[i], b[i]) with a, b and out in dtype (16-bit types combine in fp32 and
// round once); divided by `avgDivisor` first when op is Avg and avgDivisor > 0. `out` may alias
// `a` or `b`.
void combineInto(void* out, const void* a, const void* b, zcollDataType_t dtype, zcollRedOp_t op,
                 int avgDivisor, size_t n);
// out[i] = (dtype) acc[i], dividing by `nranks` first when op is Avg.
void fromAcc(void* out, const void* acc, zcollDataType_t dtype, zcollRedOp_t op, int nranks,
             size_t n);
// out[i] = in[i] * *scalar (one element of dtype; reduce_math.h scaleElement); out may be in.
void scaleBy(void* out, const void* in, const void* scalar, zcollDataType_t dtype, size_t n);

}  // namespace zcoll
