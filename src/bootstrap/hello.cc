#include "bootstrap/hello.h"

#include <cstring>

namespace zcoll {

HelloParse parseHello(const char* bytes, size_t size, const HelloRules& rules, ParsedHello* out) {
  out->bytesNeeded = kHelloHeaderBytes;
  if (size < sizeof(Hello)) return HelloParse::kNeedMore;
  std::memcpy(&out->header, bytes, sizeof(Hello));
  const Hello& h = out->header;
  if (h.magic != rules.magic) {
    out->refusal = kHelloBadMagic;
    return HelloParse::kRejected;
  }
  int expected = rules.expectedRanks > 0 ? rules.expectedRanks : h.nranks;
  if (h.nranks <= 0 || h.nranks != expected || h.rank < 0 || h.rank >= expected) {
    out->refusal = kHelloBadRank;
    return HelloParse::kRejected;
  }
  if (size < kHelloHeaderBytes) return HelloParse::kNeedMore;
  std::memcpy(&out->blobBytes, bytes + sizeof(Hello), sizeof(out->blobBytes));
  if (out->blobBytes > kMaxRankBlob) {
    out->refusal = kHelloTooLarge;
    return HelloParse::kRejected;
  }
  out->bytesNeeded = kHelloHeaderBytes + static_cast<size_t>(out->blobBytes);
  return size < out->bytesNeeded ? HelloParse::kNeedMore : HelloParse::kComplete;
}

const char* helloStatusText(uint32_t status) {
  switch (status) {
    case kHelloBadMagic:
      return "its key does not match the root's: another unique id (zcollCommInitRank), or "
             "another ZCOLL_AUTH_TOKEN or rendezvous address (zcollCommInitFromEnv)";
    case kHelloBadRank: return "its rank or nranks disagrees with the other ranks";
    case kHelloDuplicateRank: return "another process already joined with the same rank";
    case kHelloRootTimedOut: return "not every rank arrived before the timeout";
    case kHelloAlreadyUsed:
      return "this unique id was already used by a completed initialization (each id serves "
             "one zcollCommInitRank round: create a new one with zcollGetUniqueId)";
    case kHelloTooLarge: return "its rank description is larger than the root accepts";
    case kHelloCancelled:
      return "the process that serves the rendezvous called it off (zcollCommGrow: the "
             "communicator's members failed the grow; their zcollGetLastError says why)";
    case kHelloWorldMismatch: return "a rank said another number of ranks than the others";
    default: return "unknown status";
  }
}

}  // namespace zcoll
