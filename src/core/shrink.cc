#include "core/shrink.h"

#include <cstring>
#include <string>

#include "base/hash.h"
#include "base/tags.h"
#include "core/member_exchange.h"

namespace zcoll {

namespace {

// What every stayer sends every other one first.
struct ShrinkRecord {
  uint64_t excludedHash;
  uint64_t addressBytes;
  int32_t error;  // its local setup's failure (zcollSuccess: none)
  int32_t excludedCount;
};

constexpr uint64_t kMaxAddressBytes = 64 << 10;  // as a split's

uint64_t hashOf(const std::vector<int>& excluded) {
  return fnv1a64(std::string_view(reinterpret_cast<const char*>(excluded.data()),
                                  excluded.size() * sizeof(int)));
}

std::vector<int> stayersOf(const zcollComm* parent, const std::vector<int>& excluded) {
  std::vector<int> stayers;
  size_t next = 0;  // excluded is sorted
  for (int r = 0; r < parent->nranks; ++r) {
    if (next < excluded.size() && excluded[next] == r) {
      ++next;
      continue;
    }
    stayers.push_back(r);
  }
  return stayers;
}

// The exchange's failures say what to do next (core/member_exchange.h).
ExchangeContext shrinkContext(uint32_t attempt) {
  ExchangeContext c;
  c.fn = "zcollCommShrink";
  c.during = "during the shrink";
  c.retry = "call zcollCommShrink again, excluding it too";
  c.whoWaits = "the other ranks that stay";
  c.whyLate =
      "a rank that stays did not call zcollCommShrink, or left this rank out of its own set";
  c.tag = makeShrinkTag;
  c.attempt = attempt;
  return c;
}

// The first stayer whose record disagrees with this rank's, as a failure; success if none.
Result checkRecords(const zcollComm* parent, const std::vector<int>& stayers,
                    const ShrinkRecord& mine, const std::vector<ShrinkRecord>& recs) {
  for (int p : stayers) {
    const ShrinkRecord& r = recs[p];
    if (r.error != zcollSuccess)
      return fail(zcollInvalidUsage, "zcollCommShrink: rank %d could not set up its part (%s, "
                  "see its zcollGetLastError); no communicator was created", p,
                  resultName(static_cast<Result>(r.error)));
    if (r.excludedHash != mine.excludedHash || r.excludedCount != mine.excludedCount)
      return fail(zcollInvalidUsage, "zcollCommShrink: rank %d excluded other ranks than rank "
                  "%d did (%d ranks against %d): every rank that stays must pass the same "
                  "excludeRanks; no communicator was created", p, parent->rank,
                  r.excludedCount, mine.excludedCount);
    if (r.addressBytes > kMaxAddressBytes)
      return fail(zcollRemoteError, "zcollCommShrink: rank %d sent a %llu-byte transport "
                  "address (limit %llu): corrupt or foreign peer", p,
                  static_cast<unsigned long long>(r.addressBytes),
                  static_cast<unsigned long long>(kMaxAddressBytes));
  }
  return zcollSuccess;
}

}  // namespace

Result shrinkComm(zcollComm* parent, const std::vector<int>& excluded, uint32_t attempt,
                  const InitSettings& s, zcollComm** out) {
  *out = nullptr;
  const std::vector<int> stayers = stayersOf(parent, excluded);
  std::unique_ptr<zcollComm> comm;
  std::string address;
  const Result local = startChildComm(parent, s, stayers.size() > 1, &comm, &address);
  const std::string why = local != zcollSuccess ? threadLastError() : std::string();
  if (local != zcollSuccess) address.clear();

  // Round 1: the records; a rank whose part failed still sends its own, so nobody waits.
  ShrinkRecord mine{hashOf(excluded), address.size(), local,
                    static_cast<int32_t>(excluded.size())};
  const std::string myRecord(reinterpret_cast<const char*>(&mine), sizeof(mine));
  std::vector<ShrinkRecord> recs(parent->nranks, mine);
  {
    // After myRecord: cancels before it goes.
    MemberExchange records(parent, shrinkContext(attempt), kShrinkRecordStep);
    ZCOLL_CHECK(records.run(stayers, myRecord,
                            std::vector<size_t>(parent->nranks, sizeof(ShrinkRecord))));
    for (int p : stayers)
      if (p != parent->rank) std::memcpy(&recs[p], records.from(p).data(), sizeof(ShrinkRecord));
  }
  if (local != zcollSuccess) {
    const std::string prefix = std::string(resultName(local)) + ": ";
    const size_t skip = why.rfind(prefix, 0) == 0 ? prefix.size() : 0;
    return fail(local, "%s (no communicator was created)", why.c_str() + skip);
  }
  ZCOLL_CHECK(checkRecords(parent, stayers, mine, recs));

  // Round 2: the addresses, then the new comm, wired as a split's.
  std::vector<size_t> sizes(parent->nranks, 0);
  for (int p : stayers) sizes[p] = recs[p].addressBytes;
  std::vector<std::string> addresses(parent->nranks);
  {
    MemberExchange round(parent, shrinkContext(attempt), kShrinkAddressStep);
    ZCOLL_CHECK(round.run(stayers, address, sizes));
    for (int p : stayers) addresses[p] = p == parent->rank ? address : round.from(p);
  }
  comm->id = childDerivation(parent, "shrink", parent->shrinkAttempts, mine.excludedHash);
  ZCOLL_CHECK(finishChildComm(parent, stayers, addresses, std::move(comm), out));
  (*out)->parentLayout = parent->layout;
  for (const PeerInfo& p : parent->peers) (*out)->parentMemberIds.push_back(p.memberId);
  return zcollSuccess;
}

}  // namespace zcoll
