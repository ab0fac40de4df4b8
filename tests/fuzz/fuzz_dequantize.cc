// libFuzzer target: a quantized chunk as it arrives from a peer (docs/WIRE_FORMAT.md). The
// wire is header-free, so every byte pattern is a valid chunk for the parameters both sides
// agreed on: scales and minima may be NaN, Inf, denormal or huge. Every CPU variant must read
// exactly quantizedBytes(n) and never crash: dequantize, dequantizeSum and the qgZ middle hop
// (dequantize + reduce + requantize). The first 6 bytes pick the parameters.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "quant/isa.h"
#include "quant/quant.h"

namespace q = zcoll::quant;

namespace {

q::QuantParams paramsFrom(uint8_t a, uint8_t b) {
  q::QuantParams p;
  p.bits = (a & 1) ? 4 : 8;
  p.symmetric = (a & 2) != 0;
  p.stochastic = (a & 4) != 0;
  p.blockSize = b % 8 == 7 ? 4096 : 32 * (1 + b % 8);  // 32..224, and the largest
  return p;
}

// An exact-size heap copy, so reading one byte past the chunk is an ASan error.
std::unique_ptr<uint8_t[]> chunkFrom(const uint8_t* data, size_t size, size_t bytes) {
  std::unique_ptr<uint8_t[]> c(new uint8_t[bytes]);
  for (size_t i = 0; i < bytes; ++i) c[i] = size == 0 ? 0 : data[i % size];
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 6) return 0;
  const q::QuantParams in = paramsFrom(data[0], data[1]);
  const q::QuantParams out = paramsFrom(data[2], data[3]);
  const zcollDataType_t dtypes[] = {zcollFloat32, zcollFloat16, zcollBfloat16};
  const zcollDataType_t dt = dtypes[(data[0] >> 3) % 3];
  const size_t n = 1 + ((size_t{data[4]} << 8 | data[5]) % 5000);
  data += 6;
  size -= 6;
  const size_t bytes = q::quantizedBytes(n, in);
  if (bytes == 0) __builtin_trap();
  auto c0 = chunkFrom(data, size, bytes);
  auto c1 = chunkFrom(data + size / 2, size - size / 2, bytes);
  const void* chunks[2] = {c0.get(), c1.get()};
  std::unique_ptr<uint8_t[]> plain(new uint8_t[q::dequantizedBytes(n, dt)]);
  std::unique_ptr<uint8_t[]> requant(new uint8_t[q::requantizedBytes(n, out)]);
  for (q::Isa isa : {q::Isa::kScalar, q::Isa::kAvx2, q::Isa::kAvx512}) {
    if (!q::isaSupported(isa)) continue;
    if (q::setIsaOverride(isa) != zcollSuccess) __builtin_trap();
    if (q::dequantize(c0.get(), n, in, plain.get(), dt) != zcollSuccess) __builtin_trap();
    if (q::dequantizeSum(chunks, 2, n, in, 0.5f, plain.get(), dt) != zcollSuccess)
      __builtin_trap();
    if (q::dequantReduceRequant(chunks, 2, n, in, out, requant.get()) != zcollSuccess)
      __builtin_trap();
  }
  q::clearIsaOverride();
  return 0;
}
