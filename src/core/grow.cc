#include "core/grow.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/tags.h"
#include "bootstrap/hello.h"
#include "bootstrap/root_address.h"
#include "core/member_exchange.h"
#include "core/rank_blob.h"

namespace zcoll {

namespace {

// ---- The bytes a grow moves: length-prefixed fields, every length checked on the way in ------

void putU32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }
void putString(std::string* out, const std::string& s) {
  const uint64_t n = s.size();
  out->append(reinterpret_cast<const char*>(&n), sizeof(n));
  out->append(s);
}

class Reader {
 public:
  explicit Reader(const std::string& bytes) : b_(bytes) {}
  bool u32(uint32_t* v) { return take(v, sizeof(*v)); }
  bool string(std::string* s, uint64_t max) {
    uint64_t n = 0;
    if (!take(&n, sizeof(n)) || n > max || n > b_.size() - at_) return false;
    s->assign(b_, at_, n);
    at_ += n;
    return true;
  }
  bool done() const { return at_ == b_.size(); }

 private:
  bool take(void* p, size_t n) {
    if (b_.size() - at_ < n) return false;
    std::memcpy(p, b_.data() + at_, n);
    at_ += n;
    return true;
  }
  const std::string& b_;
  size_t at_ = 0;
};

constexpr uint32_t kBundleMarker = 0x7a677262u;  // "zgrb"
constexpr uint64_t kMaxSetting = 4096;

}  // namespace

std::string encodeGrowBundle(const InitSettings& s, const std::vector<std::string>& memberBlobs) {
  std::string b;
  putU32(&b, kBundleMarker);
  putU32(&b, static_cast<uint32_t>(memberBlobs.size()));
  putU32(&b, static_cast<uint32_t>(s.timeoutSec));
  putString(&b, s.name);
  putString(&b, s.reducePartials);
  putString(&b, s.checkCalls);
  putU32(&b, static_cast<uint32_t>(s.forcedAlgorithm.size()));
  for (const std::string& a : s.forcedAlgorithm) putString(&b, a);
  for (const std::string& m : memberBlobs) putString(&b, m);
  return b;
}

namespace {

Result malformed(const char* what) {
  return fail(zcollRemoteError, "zcollCommGrow: the coordinator's %s is malformed (a process "
              "that is not a zcoll rank of this build answered the grow id?)", what);
}

}  // namespace

Result decodeGrowBundle(const std::string& bytes, int n, InitSettings* s,
                        std::vector<PeerInfo>* peers, std::vector<std::string>* addresses) {
  Reader r(bytes);
  uint32_t marker = 0, members = 0, timeout = 0, algos = 0;
  if (!r.u32(&marker) || marker != kBundleMarker || !r.u32(&members) ||
      members != static_cast<uint32_t>(n) || !r.u32(&timeout) || timeout == 0 ||
      timeout > INT32_MAX || !r.string(&s->name, kMaxSetting) ||
      !r.string(&s->reducePartials, kMaxSetting) || !r.string(&s->checkCalls, kMaxSetting) ||
      !r.u32(&algos) || algos > 64)
    return malformed("settings");
  s->timeoutSec = static_cast<int>(timeout);
  s->forcedAlgorithm.assign(algos, "");
  for (std::string& a : s->forcedAlgorithm)
    if (!r.string(&a, kMaxSetting)) return malformed("settings");
  for (int m = 0; m < n; ++m) {
    std::string blob;
    if (!r.string(&blob, kMaxRankBlob)) return malformed("member list");
    ZCOLL_CHECK(decodeRankBlob(blob, m, &(*peers)[m], &(*addresses)[m]));
  }
  return r.done() ? zcollSuccess : malformed("member list");
}

namespace {

// The joiners' descriptions, ranks n..n+j-1, as the coordinator passes them to the members.
Result decodeJoiners(const std::string& bytes, int n, std::vector<PeerInfo>* peers,
                     std::vector<std::string>* addresses) {
  Reader r(bytes);
  for (size_t k = n; k < peers->size(); ++k) {
    std::string blob;
    if (!r.string(&blob, kMaxRankBlob)) return malformed("list of new ranks");
    ZCOLL_CHECK(decodeRankBlob(blob, static_cast<int>(k), &(*peers)[k], &(*addresses)[k]));
  }
  return r.done() ? zcollSuccess : malformed("list of new ranks");
}

// In the coordinator's rendezvous, slot 0 is the coordinator and slot k new rank n+k-1.
RendezvousRankName slotNames(int n) {
  return [n](int slot) {
    return slot == 0 ? std::string("the coordinating member (the rank that called "
                                   "zcollCommGetUniqueId)")
                     : "new rank " + std::to_string(n + slot - 1);
  };
}

// ---- The members' exchange -------------------------------------------------------------------

struct GrowRecord {
  int32_t nRanks;
  int32_t holdsId;
  int32_t error;  // its local setup's failure (zcollSuccess: none)
  int32_t pad;
  uint64_t addressBytes;
};

// The coordinator's word to every member once it met the joiners (or failed to).
struct GrowOutcome {
  int32_t error;
  int32_t pad;
  uint64_t joinersBytes;
  char message[480];
};

constexpr int kOutcomeGraceSec = 5;  // members wait the coordinator's rendezvous out, and this

ExchangeContext growContext(const zcollComm* parent) {
  ExchangeContext c;
  c.fn = "zcollCommGrow";
  c.during = "during the grow";
  c.retry = "no communicator was created: shrink the communicator without it, then grow it";
  c.whoWaits = "the other members";
  c.whyLate = "a member did not call zcollCommGrow";
  c.tag = makeGrowTag;
  c.attempt = parent->growAttempts;
  return c;
}

// The other members wait for the coordinator's word while it waits for the new ranks (at most
// the timeout), and a little more.
ExchangeContext outcomeContext(const zcollComm* parent) {
  ExchangeContext c = growContext(parent);
  c.whoWaits = "the coordinating member's word";
  c.whyLate = "it never came back from its rendezvous with the new ranks";
  c.extraWaitSec = kOutcomeGraceSec;
  return c;
}

// The thread's last message without its "zcollTimeout: " prefix.
std::string lastMessageOf(Result r) {
  const std::string why = threadLastError();
  const std::string prefix = std::string(resultName(r)) + ": ";
  return why.rfind(prefix, 0) == 0 ? why.substr(prefix.size()) : why;
}

// The first record that disagrees with this rank's, as a failure; *coordinator: the member
// that holds the id.
Result checkRecords(const zcollComm* parent, const GrowRecord& mine,
                    const std::vector<GrowRecord>& recs, int* coordinator) {
  constexpr uint64_t kMaxAddressBytes = 64 << 10;
  *coordinator = -1;
  for (int p = 0; p < parent->nranks; ++p) {
    const GrowRecord& r = recs[p];
    if (r.error != zcollSuccess)
      return fail(zcollInvalidUsage, "zcollCommGrow: member %d could not set up its part (%s, "
                  "see its zcollGetLastError); no communicator was created", p,
                  resultName(static_cast<Result>(r.error)));
    if (r.nRanks != mine.nRanks)
      return fail(zcollInvalidUsage, "zcollCommGrow: member %d asked for %d ranks, member %d "
                  "for %d: every rank must pass the same nRanks; no communicator was created",
                  p, r.nRanks, parent->rank, mine.nRanks);
    if (r.addressBytes > kMaxAddressBytes)
      return fail(zcollRemoteError, "zcollCommGrow: member %d sent a %llu-byte transport "
                  "address (limit %llu): corrupt or foreign peer", p,
                  static_cast<unsigned long long>(r.addressBytes),
                  static_cast<unsigned long long>(kMaxAddressBytes));
    if (!r.holdsId) continue;
    if (*coordinator >= 0)
      return fail(zcollInvalidUsage, "zcollCommGrow: members %d and %d both passed a uniqueId: "
                  "only the member that called zcollCommGetUniqueId passes it, the others NULL; "
                  "no communicator was created", *coordinator, p);
    *coordinator = p;
  }
  if (*coordinator < 0)
    return fail(zcollInvalidUsage, "zcollCommGrow: no member passed the uniqueId: the member "
                "that called zcollCommGetUniqueId passes it (the others NULL); no communicator "
                "was created");
  return zcollSuccess;
}

// Calls the coordinator's rendezvous off unless disarmed: every failure before the joiners
// were met tells them at once.
class CallOff {
 public:
  explicit CallOff(const GrowId* id) : id_(id) {}
  ~CallOff() {
    if (id_ != nullptr) cancelRendezvousRoot(id_->rendezvous);
  }
  void disarm() { id_ = nullptr; }

 private:
  const GrowId* id_;
};

// The coordinator at its rendezvous: hands the joiners the bundle, returns theirs (checked),
// as the payload members get.
Result meetJoiners(const zcollComm* parent, int nRanks, const GrowId& id, const InitSettings& s,
                   const std::vector<std::string>& addresses, std::string* joiners) {
  const int n = parent->nranks;
  std::vector<std::string> memberBlobs(n);
  for (int m = 0; m < n; ++m) memberBlobs[m] = encodeRankBlob(parent->peers[m], addresses[m]);
  std::vector<std::string> all;
  ZCOLL_CHECK(rendezvousAllGather(id.rendezvous, 0, nRanks - n + 1, encodeGrowBundle(s, memberBlobs),
                                  parent->timeoutSec, &all, slotNames(n)));
  for (int k = 1; k <= nRanks - n; ++k) {
    PeerInfo info;
    std::string address;
    ZCOLL_CHECK(decodeRankBlob(all[k], n + k - 1, &info, &address));
    putString(joiners, all[k]);
  }
  return zcollSuccess;
}

// The coordinator tells every other member how meeting the joiners went (`why`: the failure).
Result tellMembers(zcollComm* parent, int coordinator, Result met, const std::string& why,
                   const std::string& joiners) {
  GrowOutcome o{};
  o.error = met;
  o.joinersBytes = met == zcollSuccess ? joiners.size() : 0;
  if (met != zcollSuccess) std::snprintf(o.message, sizeof(o.message), "%s", why.c_str());
  std::vector<int> others;
  for (int p = 0; p < parent->nranks; ++p)
    if (p != coordinator) others.push_back(p);
  {
    MemberExchange outcome(parent, growContext(parent), kGrowResultStep);
    ZCOLL_CHECK(outcome.run(others, std::string(reinterpret_cast<const char*>(&o), sizeof(o)),
                            {}, {}));
  }
  if (o.joinersBytes == 0) return zcollSuccess;
  MemberExchange list(parent, growContext(parent), kGrowJoinersStep);
  return list.run(others, joiners, {}, {});
}

// A member other than the coordinator: the outcome, then the joiners' descriptions.
Result hearFromCoordinator(zcollComm* parent, int coordinator, int joinerCount,
                           std::string* joiners) {
  std::vector<size_t> bytes(parent->nranks, 0);
  bytes[coordinator] = sizeof(GrowOutcome);
  GrowOutcome o{};
  {
    MemberExchange outcome(parent, outcomeContext(parent), kGrowResultStep);
    ZCOLL_CHECK(outcome.run({}, "", {coordinator}, bytes));
    std::memcpy(&o, outcome.from(coordinator).data(), sizeof(o));
  }
  o.message[sizeof(o.message) - 1] = '\0';
  if (o.error != zcollSuccess) {
    const Result code = o.error == zcollTimeout ? zcollTimeout : zcollRemoteError;
    return fail(code, "zcollCommGrow: the coordinating member (rank %d) could not meet the new "
                "ranks: %s", coordinator, o.message);
  }
  if (o.joinersBytes > uint64_t(joinerCount) * (kMaxRankBlob + sizeof(uint64_t)))
    return malformed("outcome");
  bytes[coordinator] = o.joinersBytes;
  MemberExchange list(parent, growContext(parent), kGrowJoinersStep);
  ZCOLL_CHECK(list.run({}, "", {coordinator}, bytes));
  *joiners = list.from(coordinator);
  return zcollSuccess;
}

}  // namespace

Result makeGrowId(const zcollComm* parent, GrowId* id) {
  SockAddr addr{};
  std::string from;
  ZCOLL_CHECK(pickRootAddress(&addr, &from));
  std::memset(id, 0, sizeof(*id));
  ZCOLL_CHECK(startRendezvousRoot(addr, randomMagic(), 0, parent->timeoutSec, true,
                                  &id->rendezvous));
  id->marker = kGrowIdMarker;
  id->parentRanks = parent->nranks;
  ZCOLL_INFO(LogSubsys::kInit, "%s rank %d: grow id on %s (%s), for ranks from %d",
             parent->name.c_str(), parent->rank, addrToString(id->rendezvous.root).c_str(),
             from.c_str(), parent->nranks);
  return zcollSuccess;
}

Result readGrowId(const zcollUniqueId& u, GrowId* id) {
  static_assert(sizeof(GrowId) <= sizeof(zcollUniqueId), "unique id too small");
  std::memcpy(id, u.internal, sizeof(*id));
  if (id->marker != kGrowIdMarker || id->parentRanks < 1 || id->rendezvous.magic == 0)
    return fail(zcollInvalidArgument, "zcollCommGrow: uniqueId is not a grow id (make it with "
                "zcollCommGetUniqueId on the communicator to grow, not zcollGetUniqueId)");
  return zcollSuccess;
}

zcollUniqueId toUniqueId(const GrowId& id) { return packUniqueId(id); }

Result growComm(zcollComm* parent, int nRanks, const GrowId* id, const InitSettings& s,
                zcollComm** out) {
  *out = nullptr;
  ++parent->growAttempts;
  CallOff callOff(id);
  const int n = parent->nranks;
  std::vector<int> members(n);
  for (int m = 0; m < n; ++m) members[m] = m;
  std::unique_ptr<zcollComm> comm;
  std::string address;
  const Result local = startChildComm(parent, s, true, &comm, &address);
  const std::string why = local != zcollSuccess ? lastMessageOf(local) : std::string();
  if (local != zcollSuccess) address.clear();

  // Round 1: the records; a member whose part failed still sends its own, so nobody waits.
  GrowRecord mine{nRanks, id != nullptr, local, 0, address.size()};
  std::vector<GrowRecord> recs(n, mine);
  {
    MemberExchange records(parent, growContext(parent), kGrowRecordStep);
    ZCOLL_CHECK(records.run(members, std::string(reinterpret_cast<const char*>(&mine),
                                                 sizeof(mine)),
                            std::vector<size_t>(n, sizeof(GrowRecord))));
    for (int p = 0; p < n; ++p)
      if (p != parent->rank) std::memcpy(&recs[p], records.from(p).data(), sizeof(GrowRecord));
  }
  if (local != zcollSuccess) return fail(local, "%s (no communicator was created)", why.c_str());
  int coordinator = -1;
  ZCOLL_CHECK(checkRecords(parent, mine, recs, &coordinator));

  // Round 2: the members' addresses.
  std::vector<size_t> sizes(n);
  for (int p = 0; p < n; ++p) sizes[p] = recs[p].addressBytes;
  std::vector<PeerInfo> peers(nRanks);
  std::vector<std::string> addresses(nRanks);
  {
    MemberExchange round(parent, growContext(parent), kGrowAddressStep);
    ZCOLL_CHECK(round.run(members, address, sizes));
    for (int p = 0; p < n; ++p) {
      peers[p] = parent->peers[p];
      addresses[p] = p == parent->rank ? address : round.from(p);
    }
  }

  // The joiners, through the coordinator.
  std::string joiners;
  if (parent->rank == coordinator) {
    const Result met = meetJoiners(parent, nRanks, *id, s, addresses, &joiners);
    if (met == zcollSuccess) callOff.disarm();
    const std::string why = met == zcollSuccess ? std::string() : lastMessageOf(met);
    ZCOLL_CHECK(tellMembers(parent, coordinator, met, why, joiners));
    if (met != zcollSuccess)
      return fail(met, "zcollCommGrow: this rank, the coordinating member, could not meet the "
                  "new ranks: %s", why.c_str());
  } else {
    ZCOLL_CHECK(hearFromCoordinator(parent, coordinator, nRanks - n, &joiners));
  }
  ZCOLL_CHECK(decodeJoiners(joiners, n, &peers, &addresses));
  return finishComm(std::move(peers), addresses, parent->rank, std::move(comm), out);
}

Result joinComm(const GrowId& id, int nRanks, int rank, const InitSettings& s, bool ownName,
                zcollComm** out) {
  *out = nullptr;
  const int n = id.parentRanks;
  std::unique_ptr<zcollComm> comm;
  PeerInfo me{};
  std::string address;
  ZCOLL_CHECK(startComm(s, nRanks, rank, &comm, &me, &address));
  std::vector<std::string> all;
  ZCOLL_CHECK(rendezvousAllGather(id.rendezvous, rank - n + 1, nRanks - n + 1,
                                  encodeRankBlob(me, address), s.timeoutSec, &all, slotNames(n)));
  std::vector<PeerInfo> peers(nRanks);
  std::vector<std::string> addresses(nRanks);
  InitSettings shared;
  ZCOLL_CHECK(decodeGrowBundle(all[0], n, &shared, &peers, &addresses));
  for (int k = 1; k <= nRanks - n; ++k)
    ZCOLL_CHECK(decodeRankBlob(all[k], n + k - 1, &peers[n + k - 1], &addresses[n + k - 1]));
  // What every rank must share, from the members (their init read it once).
  comm->timeoutSec = shared.timeoutSec;
  comm->partialsInDtype = shared.reducePartials == "dtype";
  comm->checkCalls = shared.checkCalls == "on";
  comm->forcedAlgorithm = shared.forcedAlgorithm;
  if (!ownName) comm->name = shared.name;
  return finishComm(std::move(peers), addresses, rank, std::move(comm), out);
}

}  // namespace zcoll
