// The rendezvous hello: what a rank sends the root first, and the root's pure parser of one
// connection's bytes (no sockets, so it is unit-tested and fuzzed: tests/fuzz/fuzz_hello.cc).
//
// Wire: Hello {u64 magic, i32 rank, i32 nranks}, then u64 blob length, then the blob (the rank
// description, at most kMaxRankBlob bytes). Host byte order: every rank runs one build.
// The root answers at once, as soon as it has read the hello and blob: kHelloJoined followed by
// the u64 helloGreeting(magic), or a refusal. A joined rank then waits for the outcome:
// kHelloAccepted followed by every rank's blob, or a failure (kHelloRootTimedOut,
// kHelloCancelled, kHelloWorldMismatch). The immediate answer lets a rank tell a zcoll root that
// waits for the other ranks from another program on the port, which never answers so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace zcoll {

struct Hello {
  uint64_t magic;
  int32_t rank;
  int32_t nranks;
};
constexpr size_t kHelloHeaderBytes = sizeof(Hello) + sizeof(uint64_t);  // hello, blob length
constexpr size_t kMaxRankBlob = 1 << 20;

// The root's answers to a rank (the first u32 it reads back).
enum HelloStatus : uint32_t {
  kHelloAccepted = 0,
  kHelloBadMagic = 1,
  kHelloBadRank = 2,  // followed by the int32 number of ranks the rendezvous expects
  kHelloDuplicateRank = 3,
  kHelloRootTimedOut = 4,  // followed by a TimedOutReport: who never arrived
  kHelloAlreadyUsed = 5,
  kHelloTooLarge = 6,  // the rank description is over kMaxRankBlob (no answer is sent)
  kHelloCancelled = 7,  // the root's process called the rendezvous off (cancelRendezvousRoot)
  kHelloJoined = 8,     // admitted, followed by the u64 helloGreeting(magic); the outcome follows
  kHelloWorldMismatch = 9,  // followed by a MismatchReport: a rank said another size
};

// What the root sends after kHelloJoined: derived from the magic, so neither an echo of the hello
// nor another program's bytes pass for it.
constexpr uint64_t helloGreeting(uint64_t magic) { return magic ^ 0x7a636f6c6c2d6f6bull; }

// After kHelloWorldMismatch: the rank whose hello named another size fails the rendezvous for
// every rank (its size is the job's mistake, not a stranger's: its hello had the magic).
struct MismatchReport {
  int32_t rank;     // the rank that said another size
  int32_t nranks;   // the size it said
  int32_t expected; // the rendezvous' size (the root's, or the first admitted hello's)
};

// After kHelloRootTimedOut: how many ranks arrived, and the first missing ones.
struct TimedOutReport {
  int32_t arrived;
  int32_t nranks;
  int32_t missingCount;  // in all; the first min(missingCount, kListed) are listed
  static constexpr int kListed = 8;
  int32_t missing[kListed];
};

// What the root knows when it reads a connection: the rendezvous' magic and, once known, its
// number of ranks (0: the first admitted hello fixes it).
struct HelloRules {
  uint64_t magic;
  int expectedRanks;
};

enum class HelloParse { kNeedMore, kRejected, kComplete };

struct ParsedHello {
  size_t bytesNeeded = kHelloHeaderBytes;  // read at most this many bytes in all
  uint32_t refusal = kHelloAccepted;       // kRejected: why (a HelloStatus)
  Hello header{};
  uint64_t blobBytes = 0;
};

// Parses the first `size` bytes a connection sent. kNeedMore: read up to out->bytesNeeded in
// all; kRejected: out->refusal says why; kComplete: out->header and the blob (bytes
// [kHelloHeaderBytes, kHelloHeaderBytes + blobBytes)) are a well-formed hello for `rules`.
// The magic and rank checks run as soon as the 16 hello bytes are in, before any blob is read.
HelloParse parseHello(const char* bytes, size_t size, const HelloRules& rules, ParsedHello* out);

const char* helloStatusText(uint32_t status);

}  // namespace zcoll
