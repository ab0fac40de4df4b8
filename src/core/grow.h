// Growing a communicator (zcollCommGrow, NCCL's ncclCommGrow contract): its members and new
// ranks ("joiners") make a larger communicator; members keep their ranks, joiners take theirs
// from the parent's size up. One member, the coordinator, handed out a grow id
// (zcollCommGetUniqueId: a rendezvous service in its process) that the joiners got out of band.
//   1. Members: each makes its part locally (startChildComm) and sends every other member a
//      record {the size asked for, whether it holds the id, its local error, its address's
//      size}, then its address, over the parent's own connections (core/member_exchange.h): no
//      rendezvous among members, and a member that goes down fails the grow on the others at
//      once (within about 50 ms on one machine).
//   2. Every member checks that all asked for the same size, that exactly one holds the id and
//      that all set up their part; if not, all fail alike naming the rank, nothing is created,
//      and the coordinator calls its rendezvous off, so waiting joiners fail at once too.
//   3. The coordinator meets the joiners at its rendezvous (as its rank 0): it hands them the
//      communicator's settings and every member's description and address (the bundle), and
//      gets theirs. It then sends every member the outcome: the joiners' descriptions, or why
//      it failed (a joiner that never came: at the timeout), so every member fails alike.
//   4. Everyone wires the new comm (core/init.h finishComm): routes, node layout and subgroups
//      (NODE, RAIL, NODE_LEADERS) for the new membership, then init's barrier.
// Joiners take the settings every rank must share from the bundle (timeout, reduction partials,
// call check, forced algorithms); their own config gives their host identity and, if set, the
// communicator's name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bootstrap/rendezvous.h"
#include "core/init.h"

namespace zcoll {

// What a zcollUniqueId holds when zcollCommGetUniqueId made it.
struct GrowId {
  RendezvousId rendezvous;  // the coordinator's service
  uint32_t marker;          // kGrowIdMarker: not an id from zcollGetUniqueId
  int32_t parentRanks;      // the parent's size: joiners are numbered from here
};
constexpr uint32_t kGrowIdMarker = 0x7a67726fu;  // "zgro"

// Starts a rendezvous service for a grow of `parent` (bounded by its timeout) and fills *id.
Result makeGrowId(const zcollComm* parent, GrowId* id);
// The grow id inside `u`; zcollInvalidArgument when `u` is not one.
Result readGrowId(const zcollUniqueId& u, GrowId* id);
zcollUniqueId toUniqueId(const GrowId& id);

// The coordinator's bundle for the new ranks: the settings every rank must share, then every
// member's description and address (encodeRankBlob), in rank order. decodeGrowBundle is what a
// new rank reads of it from the network: it checks every length and field (zcollRemoteError
// otherwise) and fills *settings and entries 0..members-1 of *peers and *addresses
// (tests/fuzz/fuzz_grow_bundle.cc).
std::string encodeGrowBundle(const InitSettings& settings,
                             const std::vector<std::string>& memberBlobs);
Result decodeGrowBundle(const std::string& bytes, int members, InitSettings* settings,
                        std::vector<PeerInfo>* peers, std::vector<std::string>* addresses);

// A member's side (the parent used in its turn); `id` is non-NULL on the coordinator only.
Result growComm(zcollComm* parent, int nRanks, const GrowId* id, const InitSettings& settings,
                zcollComm** out);
// A joiner's side: rank `rank` (>= id.parentRanks) of `nRanks`. `ownName`: the joiner's config
// named the communicator (otherwise it takes the members' name).
Result joinComm(const GrowId& id, int nRanks, int rank, const InitSettings& settings,
                bool ownName, zcollComm** out);

}  // namespace zcoll
