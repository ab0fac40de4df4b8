#include "core/shrink.h"

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "base/hash.h"
#include "base/tags.h"
#include "core/progress.h"

namespace zcoll {

namespace {

using Clock = std::chrono::steady_clock;

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

// One round of the exchange: sends `mine` to every other stayer and receives theirs[p]
// (recvBytes[p] bytes) from each. The requests and buffers live here until every one is
// complete or cancelled.
class Round {
 public:
  Round(zcollComm* parent, const std::vector<int>& stayers, uint32_t step)
      : parent_(parent), stayers_(stayers), step_(step), theirs_(parent->nranks),
        reqs_(2 * stayers.size()) {}
  ~Round() { cancelPending(); }

  Result run(const std::string& mine, const std::vector<size_t>& recvBytes) {
    const uint32_t attempt = parent_->shrinkAttempts;
    for (int p : stayers_) {
      if (p == parent_->rank) continue;
      theirs_[p].assign(recvBytes[p], '\0');
      ZCOLL_CHECK(postRecv(parent_, p, theirs_[p].data(), recvBytes[p],
                           makeShrinkTag(attempt, p, step_), &reqs_[posted_++]));
      ZCOLL_CHECK(postSend(parent_, p, mine.data(), mine.size(),
                           makeShrinkTag(attempt, parent_->rank, step_), &reqs_[posted_++]));
    }
    return waitForStayers();
  }
  const std::string& from(int p) const { return theirs_[p]; }

 private:
  Result waitForStayers();
  void cancelPending() {
    for (size_t i = 0; i < posted_; ++i)
      if (!reqs_[i].complete() && reqs_[i].transport != nullptr)
        reqs_[i].transport->cancel(&reqs_[i]);
  }

  zcollComm* parent_;
  const std::vector<int>& stayers_;
  uint32_t step_;
  std::vector<std::string> theirs_;  // by parent rank
  std::vector<Request> reqs_;        // sized once: transports hold pointers into it
  size_t posted_ = 0;
};

// Progress until every request is complete, at most the parent's timeout; a stayer that goes
// down fails it at once. The parent's other traffic (a dead rank's failed endpoints) is not
// this wait's business: transport errors count only through these requests.
Result Round::waitForStayers() {
  const auto deadline = Clock::now() + std::chrono::seconds(parent_->timeoutSec);
  Clock::time_point lastCheck{};
  for (int64_t polls = 0;; ++polls) {
    for (const auto& t : parent_->transportList) (void)t->progress();
    size_t done = 0;
    for (size_t i = 0; i < posted_; ++i) {
      if (!reqs_[i].complete()) continue;
      if (reqs_[i].status != zcollSuccess)
        return fail(zcollRemoteError, "zcollCommShrink: the exchange with rank %d failed (%s); "
                    "call zcollCommShrink again, excluding it if it is gone", reqs_[i].peer,
                    resultName(reqs_[i].status));
      ++done;
    }
    if (done == posted_) return zcollSuccess;
    const auto now = Clock::now();
    if (now - lastCheck >= std::chrono::milliseconds(50)) {
      lastCheck = now;
      for (size_t i = 0; i < posted_; ++i) {
        if (reqs_[i].complete()) continue;
        const int p = reqs_[i].peer;
        // Failure notices do not count here (every stayer's parent broke): whyPeerGone.
        if (const char* why = whyPeerGone(parent_, p))
          return fail(zcollRemoteError, "zcollCommShrink: rank %d (pid %d on %s) %s during the "
                      "shrink; call zcollCommShrink again, excluding it too", p,
                      parent_->peers[p].pid, parent_->peers[p].hostName, why);
      }
      if (now > deadline)
        return fail(zcollTimeout, "zcollCommShrink: rank %d waited more than %d s for the other "
                    "ranks that stay (%zu of %zu transfers done): a rank that stays did not call "
                    "zcollCommShrink, or left this rank out of its own set",
                    parent_->rank, parent_->timeoutSec, done, posted_);
    }
    if (polls < 1000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
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

Result shrinkComm(zcollComm* parent, const std::vector<int>& excluded, const InitSettings& s,
                  zcollComm** out) {
  *out = nullptr;
  ++parent->shrinkAttempts;
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
    Round records(parent, stayers, kShrinkRecordStep);  // after myRecord: cancels before it goes
    ZCOLL_CHECK(records.run(myRecord, std::vector<size_t>(parent->nranks, sizeof(ShrinkRecord))));
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
    Round round(parent, stayers, kShrinkAddressStep);
    ZCOLL_CHECK(round.run(address, sizes));
    for (int p : stayers) addresses[p] = p == parent->rank ? address : round.from(p);
  }
  return finishChildComm(parent, stayers, addresses, std::move(comm), out);
}

}  // namespace zcoll
