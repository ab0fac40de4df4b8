// libFuzzer target: the rendezvous root's view of one connection. The bytes arrive in pieces
// (sizes taken from the input's first byte) and go through parseHello exactly as the root's
// poll loop feeds them (never more than it asks for); a complete hello's rank description then
// goes through decodeRankBlob, as every rank does with the descriptions the root hands back.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "bootstrap/hello.h"
#include "core/rank_blob.h"

namespace {
constexpr uint64_t kMagic = 0x7a636f6c6c2d6964ULL;  // the seed corpus uses this magic
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t piece = 1 + data[0] % 32;
  const zcoll::HelloRules rules{kMagic, data[1] % 2 == 0 ? 0 : 4};
  const char* bytes = reinterpret_cast<const char*>(data + 2);
  size = std::min(size - 2, zcoll::kHelloHeaderBytes + zcoll::kMaxRankBlob + 1);
  zcoll::ParsedHello parsed;
  size_t have = 0;
  for (;;) {
    size_t want = parsed.bytesNeeded - have;  // the root never reads past what it needs
    size_t got = std::min({want, piece, size - have});
    if (got == 0) return 0;  // the connection ran dry: the root drops it at its deadline
    have += got;
    zcoll::HelloParse r = zcoll::parseHello(bytes, have, rules, &parsed);
    if (r == zcoll::HelloParse::kRejected) {
      if (parsed.refusal == zcoll::kHelloAccepted) __builtin_trap();  // a refusal says why
      return 0;
    }
    if (r == zcoll::HelloParse::kComplete) {
      const zcoll::Hello& h = parsed.header;
      if (h.magic != kMagic || h.rank < 0 || h.rank >= h.nranks ||
          (rules.expectedRanks > 0 && h.nranks != rules.expectedRanks) ||
          have != zcoll::kHelloHeaderBytes + parsed.blobBytes)
        __builtin_trap();  // accepted something the rules exclude
      zcoll::PeerInfo info;
      std::string address;
      (void)zcoll::decodeRankBlob(
          std::string(bytes + zcoll::kHelloHeaderBytes, parsed.blobBytes), h.rank, &info,
          &address);
      return 0;
    }
    if (parsed.bytesNeeded <= have) __builtin_trap();  // asked for nothing more: would spin
  }
}
