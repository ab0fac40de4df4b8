// Typed element access through doubles, and inputs whose reductions are exact in every dtype,
// so unquantized collectives can be checked for exact equality.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "zcoll/zcoll.h"

namespace zcoll::test {

size_t typeSize(zcollDataType_t t);
bool isSigned(zcollDataType_t t);
bool isFloat(zcollDataType_t t);

// Writes/reads element i of a typed buffer (value converted with the dtype's rounding).
void setElement(void* buf, zcollDataType_t t, size_t i, double v);
double getElement(const void* buf, zcollDataType_t t, size_t i);

// Input of `rank` at element i for `op`: small integers (sums/products stay exact and in range),
// from a hash of (rank, i): no period, and no two ranks alike, so a block landing at the wrong
// offset or in another rank's place does not compare equal.
double inputValue(zcollDataType_t t, zcollRedOp_t op, int rank, int nranks, size_t i);
// op over ranks 0..nranks-1 of inputValue(.., i), rounded as zcoll documents (one rounding in
// the output type; Avg divides in the accumulator type).
double expectedValue(zcollDataType_t t, zcollRedOp_t op, int nranks, size_t i);

// Buffer of `n` elements followed by one guard byte (kGuardByte); guardIntact checks that no
// call wrote past the n elements.
constexpr unsigned char kGuardByte = 0xa5;
std::vector<unsigned char> makeBuffer(zcollDataType_t t, size_t n);
bool guardIntact(const std::vector<unsigned char>& buf);

// Bytes of n elements block-quantized, by the formula of docs/ZEROPP.md (Q(C)), written
// independently of the library: scales, then zeros (asymmetric), then values, each part padded to
// 16 bytes on its own; bits 16 (qgZ's intra hop as 16-bit floats): a16(2n).
inline size_t documentedWireBytes(size_t n, size_t block, int bits, bool symmetric) {
  if (n == 0) return 0;
  auto a16 = [](size_t b) { return (b + 15) / 16 * 16; };
  if (bits == 16) return a16(2 * n);
  size_t params = a16(4 * ((n + block - 1) / block));
  return (symmetric ? 1 : 2) * params + a16(bits == 8 ? n : (n + 1) / 2);
}

extern const zcollDataType_t kAllTypes[10];
extern const zcollRedOp_t kAllOps[5];

}  // namespace zcoll::test
