// quant_block_sweep: what the quantization block size trades. For INT8 and INT4 and block
// sizes 64..2048, prints the wire size relative to bf16 and the relative L2 error of
// dequant(quant(x)) on 4M Gaussian values whose magnitude drifts over 4 decades across the
// tensor (as weights and gradients of different layers do), with 0.1% outliers at 20 sigma.
// The defaults in docs/ZEROPP.md ("Defaults") were chosen from its output.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "quant/quant.h"

namespace {

std::vector<float> makeData(size_t n) {
  std::mt19937 rng(7);
  std::normal_distribution<float> gauss(0.f, 1.f);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    float mag = std::pow(10.f, -2.f + 4.f * float((i * 37) % 4096) / 4096.f);
    x[i] = gauss(rng) * mag * ((rng() % 1000) == 0 ? 20.f : 1.f);
  }
  return x;
}

double relativeL2(const std::vector<float>& x, const std::vector<float>& y) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += double(x[i] - y[i]) * (x[i] - y[i]);
    den += double(x[i]) * x[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

int main() {
  const size_t n = size_t(1) << 22;
  std::vector<float> x = makeData(n), y(n);
  std::printf("%5s %6s %14s %18s\n", "bits", "block", "wire / bf16", "relative L2 error");
  for (int bits : {8, 4}) {
    for (int block : {64, 128, 256, 512, 1024, 2048}) {
      zcoll::quant::QuantParams p;
      p.bits = bits;
      p.blockSize = block;
      std::vector<unsigned char> q(zcoll::quant::quantizedBytes(n, p));
      if (zcoll::quant::quantize(x.data(), zcollFloat32, n, p, q.data()) != zcollSuccess ||
          zcoll::quant::dequantize(q.data(), n, p, y.data(), zcollFloat32) != zcollSuccess) {
        std::fprintf(stderr, "quantization failed for %d bits, block %d\n", bits, block);
        return 1;
      }
      std::printf("%5d %6d %14.4f %18.4f\n", bits, block, double(q.size()) / (2.0 * n),
                  relativeL2(x, y));
    }
  }
  return 0;
}
