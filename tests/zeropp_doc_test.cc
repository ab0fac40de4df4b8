// docs/ZEROPP.md's byte numbers against the code: every control-message size the page states
// (hpZ's stage B read in place, qgZ's window references and release token) is read from the
// page and compared with the structures the code sends (support/wire_notices.h); the wire
// ratios it quotes (the block-size table, "0.508x", "0.516 C") with quant::quantizedBytes; and
// the Q(C) formula it gives with the library's size query. The byte tests
// (zeropp_allgather_test.cc, zeropp_reducescatter_test.cc) assert the same formulas against
// zcollCommGetStats after real calls, so a number on the page cannot drift from the code
// unnoticed.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "quant/quant.h"
#include "support/values.h"
#include "support/wire_notices.h"

using namespace zcoll::test;

namespace {

// docs/ZEROPP.md with every run of whitespace made one space (sentences wrap anywhere).
std::string zeroppPage() {
  const std::string path = std::string(ZCOLL_DOCS_DIR) + "/ZEROPP.md";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream all;
  all << in.rdbuf();
  return std::regex_replace(all.str(), std::regex("\\s+"), " ");
}

// The numbers `pattern`'s groups capture in the page; fails the test when it is not there.
std::vector<std::string> find(const std::string& page, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(page, m, std::regex(pattern))) {
    ADD_FAILURE() << "docs/ZEROPP.md no longer says: " << pattern;
    return {};
  }
  return std::vector<std::string>(m.begin() + 1, m.end());
}

uint64_t number(const std::string& s) { return std::stoull(s); }

// Q(n)/(2n) for a large n: the wire size of a bf16 tensor quantized with these settings.
double wireRatio(int bits, int block) {
  zcoll::quant::QuantParams p;
  p.bits = bits;
  p.blockSize = block;
  const size_t n = size_t(1) << 22;
  return static_cast<double>(zcoll::quant::quantizedBytes(n, p)) / (2.0 * n);
}

TEST(ZeroppDoc, HpzReadInPlaceBytesAreTheStructuresSent) {
  const std::string page = zeroppPage();
  auto got = find(page, "Stage B read in place adds `\\(L-1\\) \\* (\\d+)` bytes on the host "
                        "\\(`\\(L-1\\) \\* (\\d+)` on a device\\)");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(number(got[0]), kHpzHostReadBytes);
  EXPECT_EQ(number(got[1]), kHpzDeviceReadBytes);
  got = find(page, "the published secondary \\((\\d+) bytes on the host: address, size and "
                   "flags, (\\d+) bytes, then shm's (\\d+)-byte region reference; (\\d+) on a "
                   "device, with cuda_ipc's (\\d+)-byte registration reference\\) and a (\\d+)-byte "
                   "release token");
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(number(got[0]), kHostRangeBytes);
  EXPECT_EQ(number(got[1]), kRangeFixedBytes);
  EXPECT_EQ(number(got[2]), zcoll::ShmPeerMemory::kHandleBytes);
  EXPECT_EQ(number(got[3]), kDeviceRangeBytes);
  EXPECT_EQ(number(got[4]), zcoll::CudaIpcPeerMemory::kHandleBytes);
  EXPECT_EQ(number(got[5]), kTokenBytes);
  // The worked example: 2x2, fp32, C = 1: N*C*es of shards and the notices, to L-1 = 1 peer.
  got = find(page, "At 2x2 with fp32 and C = 1 that is (\\d+) bytes per rank \\((\\d+) of "
                   "shards, (\\d+) of notices\\)");
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(number(got[1]), 2u * 1u * 4u);
  EXPECT_EQ(number(got[2]), kHpzHostReadBytes);
  EXPECT_EQ(number(got[0]), 2u * 1u * 4u + kHpzHostReadBytes);
}

TEST(ZeroppDoc, QgzWindowReferencesAreTheStructuresSent) {
  const std::string page = zeroppPage();
  auto got = find(page, "step 2 only sends every local peer a window reference \\((\\d+) bytes on "
                        "the host, (\\d+) on a device\\)");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(number(got[0]), kHostRangeBytes);
  EXPECT_EQ(number(got[1]), kDeviceRangeBytes);
  got = find(page, "R bytes per piece: (\\d+) for host buffers, (\\d+) for device buffers\\) "
                   "and the release token \\((\\d+) byte\\)");
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(number(got[0]), kHostRangeBytes);
  EXPECT_EQ(number(got[1]), kDeviceRangeBytes);
  EXPECT_EQ(number(got[2]), kTokenBytes);
}

// The Q(C) the page gives is the one the tests' byte assertions use (support/values.h
// documentedWireBytes, written from the page) and the library's own size query.
TEST(ZeroppDoc, TheQuantizedSizeFormulaIsTheLibrarys) {
  find(zeroppPage(), "`Q\\(C\\) = \\(symmetric \\? 1 : 2\\) \\* a16\\(4 \\* ceil\\(C/B\\)\\) \\+ "
                     "a16\\(bits == 8 \\? C : ceil\\(C/2\\)\\)`");
  for (int bits : {4, 8})
    for (int block : {32, 64, 256, 4096})
      for (bool symmetric : {true, false})
        for (size_t n : {size_t(0), size_t(1), size_t(31), size_t(257), size_t(4099), size_t(100003)}) {
          zcoll::quant::QuantParams p;
          p.bits = bits;
          p.blockSize = block;
          p.symmetric = symmetric;
          EXPECT_EQ(zcoll::quant::quantizedBytes(n, p), documentedWireBytes(n, block, bits, symmetric))
              << "bits " << bits << " block " << block << " symmetric " << symmetric << " n " << n;
        }
  // qgZ's intra-node hop at intraBits 16: 16-bit floats, no scales.
  find(zeroppPage(), "at `intraBits = 16` `Qa\\(n\\) = a16\\(2n\\)`");
  for (zcollDataType_t wire : {zcollBfloat16, zcollFloat16})
    for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(257), size_t(100003)}) {
      zcoll::quant::QuantParams p;
      p.bits = 16;
      p.wire16 = wire;
      EXPECT_EQ(zcoll::quant::quantizedBytes(n, p), documentedWireBytes(n, 256, 16, true))
          << "bits 16 n " << n;
      EXPECT_EQ(zcoll::quant::quantizedBytes(n, p), (2 * n + 15) / 16 * 16) << "bits 16 n " << n;
    }
}

TEST(ZeroppDoc, WireRatiosAreTheLibrarys) {
  const std::string page = zeroppPage();
  // The block-size table: | block | INT8 wire | INT8 error | INT4 wire | INT4 error |.
  const std::regex row("\\| \\**(\\d+)\\** \\| \\**([0-9.]+)\\** \\| \\**[0-9.]+\\** \\| "
                       "\\**([0-9.]+)\\** \\| \\**[0-9.]+\\** \\|");
  int rows = 0;
  for (std::sregex_iterator it(page.begin(), page.end(), row), end; it != end; ++it, ++rows) {
    const int block = std::stoi((*it)[1]);
    EXPECT_NEAR(std::stod((*it)[2]), wireRatio(8, block), 0.00006) << "block " << block;
    EXPECT_NEAR(std::stod((*it)[3]), wireRatio(4, block), 0.00006) << "block " << block;
  }
  EXPECT_EQ(rows, 6) << "the block-size table's rows (64 to 2048)";
  auto got = find(page, "Q\\(C\\)/2C: ([0-9.]+)x for INT8 with block 256, ([0-9.]+)x for INT4");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_NEAR(std::stod(got[0]), wireRatio(8, 256), 0.0006);
  EXPECT_NEAR(std::stod(got[1]), wireRatio(4, 256), 0.0006);
  got = find(page, "`Qe\\(C\\) ~= ([0-9.]+) C` bytes");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_NEAR(std::stod(got[0]), 2 * wireRatio(4, 256), 0.0006);
}

}  // namespace
