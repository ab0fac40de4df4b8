// Communicator construction in named phases: settings, local discovery, exchange, wiring.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/rendezvous.h"
#include "core/comm.h"

namespace zcoll {

struct InitSettings {
  int timeoutSec = 300;
  std::string reducePartials = "fp32";  // ZCOLL_REDUCE_PARTIALS: "fp32" or "dtype"
  std::string checkCalls = "off";       // ZCOLL_CHECK_CALLS: "off" or "on"
  std::string deviceCalls = "auto";     // ZCOLL_DEVICE_CALLS: "auto", "async" or "sync"
  std::string hostId;  // empty: ZCOLL_HOSTID or discovered
  std::string name;
  int64_t spinCount = -1;                    // ZCOLL_SPIN_COUNT (-1: chosen at init)
  std::vector<std::string> forcedAlgorithm;  // ZCOLL_ALGO_<KIND> by CollKind ("" = by size)
};

// Settings of a new communicator before any config: ZCOLL_TIMEOUT and every other parameter a
// communicator keeps (read here, once: a rank whose environment changes later must not choose
// differently from its peers), name "comm".
InitSettings defaultSettings();
// What a communicator made from `parent` (a split, a shrink) starts from: the parent's
// settings, named after it with `suffix`.
InitSettings inheritedSettings(const zcollComm* parent, const char* suffix);
// Validates a caller's config and applies the fields it sets on top of *out (NULL: no change),
// so a split inherits its parent's values for fields the config leaves unset.
Result readConfig(const zcollConfig_t* config, InitSettings* out);

// A new communicator: rendezvous through `id` (NULL only for a lone rank that has no root
// service to meet), then wire the transports. Its phases: startComm, the rendezvous,
// finishComm.
Result createComm(const InitSettings& settings, int nranks, int rank, const RendezvousId* id,
                  zcollComm** out);
// Splits `parent` (a collective on it). color < 0 takes no part. `argError` is the caller's own
// argument error (its message the thread's last error): that rank still takes part in the
// exchange, as does one whose local setup fails, and then every rank fails alike (that rank
// with its error, the others with zcollInvalidUsage naming it), nothing is created and the
// parent stays usable.
Result splitComm(zcollComm* parent, int color, int key, const InitSettings& settings,
                 zcollComm** out, Result argError = zcollSuccess);

// The first phase of a rank that meets its peers through a rendezvous (createComm; a grow's
// joiners, core/grow.h): *comm (rank `rank` of `nranks`, `settings`) with its transports,
// *me (this rank's description, with a fresh member id) and *packed (its addresses).
Result startComm(const InitSettings& settings, int nranks, int rank,
                 std::unique_ptr<zcollComm>* comm, PeerInfo* me, std::string* packed);
// The last phase of every way to make a communicator: `comm` becomes rank `rank` of `peers`
// (every member's description, in rank order; addresses[i] what member i published), with its
// node layout, subgroups, routes and connections, and is registered.
Result finishComm(std::vector<PeerInfo> peers, const std::vector<std::string>& addresses,
                  int rank, std::unique_ptr<zcollComm> comm, zcollComm** out);

// The phases a communicator made from a parent (a split, a shrink) shares with createComm:
// startChildComm makes this rank's part locally (a comm of one rank with `settings`, its
// transports; *packed: what its peers need to connect, transport/addresses.h), before any
// exchange; finishChildComm, once every member's `addresses` (indexed by parent rank) are
// known, makes it the comm of `members` (parent ranks, in new-rank order; this rank among them,
// peers' descriptions from the parent), connects it and registers it.
Result startChildComm(const zcollComm* parent, const InitSettings& settings, bool withPeers,
                      std::unique_ptr<zcollComm>* comm, std::string* packed);
Result finishChildComm(const zcollComm* parent, const std::vector<int>& members,
                       const std::vector<std::string>& addresses, std::unique_ptr<zcollComm> comm,
                       zcollComm** out);

// A communicator's id (zcollComm::id): a hash of `derivation` and its members' ids in rank
// order, so every rank computes the same one. Ranks that met through a rendezvous (init, a
// grow's new ranks) draw fresh member ids, which alone make the id unique: their derivation is
// 0. A split's or shrink's members keep their parent's member ids, so its derivation
// (childDerivation) tells it from every other child of the same members.
uint64_t commIdOf(uint64_t derivation, const std::vector<PeerInfo>& peers);
// The derivation of the child made by the `attempt`th `kind` ("split", "shrink") of `parent`,
// with `detail` (a split's color, a shrink's excluded set) telling siblings apart.
uint64_t childDerivation(const zcollComm* parent, const char* kind, uint64_t attempt,
                         uint64_t detail);

// Tears down transports and frees the communicator. `flushMs` bounds how long endpoints may
// take to deliver what is in flight (0 when the comm is broken or aborted).
void destroyComm(zcollComm* comm, int flushMs);

}  // namespace zcoll
