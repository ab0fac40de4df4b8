// Rendezvous: every rank hands its blob (host identity, topology, transport address) to a root
// service, which answers each with every rank's blob once all have arrived. The unique id
// carries the root's address and a random magic; a connection without the magic is refused.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bootstrap/socket.h"
#include "zcoll/zcoll.h"

namespace zcoll {

struct RendezvousId {
  uint64_t magic;
  SockAddr root;
};
static_assert(sizeof(RendezvousId) <= sizeof(zcollUniqueId), "unique id too small");

RendezvousId idFromUnique(const zcollUniqueId& u);
zcollUniqueId uniqueFromId(const RendezvousId& id);

// The bytes of `id` as a unique id, zero-padded (a rendezvous id, or one that starts with one).
template <typename T>
zcollUniqueId packUniqueId(const T& id) {
  static_assert(sizeof(T) <= sizeof(zcollUniqueId), "unique id too small");
  zcollUniqueId u;
  std::memset(&u, 0, sizeof(u));
  std::memcpy(u.internal, &id, sizeof(id));
  return u;
}

// Starts the root service on `listenAddr` (port 0: any) in a background thread that serves one
// rendezvous and gives up after `timeoutSec`. Connections are served concurrently, each with a
// short deadline of its own: idle, slow or garbage connections (scanners, probes, forged hellos)
// are dropped without delaying the ranks. `expectedRanks` > 0 fixes the size (a hello with
// another size is refused); 0 takes the first valid hello's. With `lingerForReuse` the service
// keeps its port after the rendezvous and tells a late hello with the same id that the id was
// already used (until `timeoutSec` after the start).
Result startRendezvousRoot(const SockAddr& listenAddr, uint64_t magic, int expectedRanks,
                           int timeoutSec, bool lingerForReuse, RendezvousId* id);

// Calls off the rendezvous `id` served by this process: the ranks that arrived, and any that
// arrive until its timeout, are refused with kHelloCancelled at once. Nothing when this process
// serves no such rendezvous (any more).
void cancelRendezvousRoot(const RendezvousId& id);

// What a rank of the rendezvous is called in messages ("rank 3"), for rendezvous whose ranks
// are not the communicator's (a grow's).
using RendezvousRankName = std::function<std::string(int rank)>;

// How long a rank waits for the root's immediate answer to its hello, whatever the timeout: a
// zcoll root answers at once (and then waits for the other ranks up to the timeout), so a
// listener that says nothing this long, or says something else, is another program.
constexpr int kRendezvousHandshakeSec = 20;

// Sends `mine` for `rank` of `nranks` and returns all ranks' blobs, indexed by rank. When the
// root times out, the message names the ranks that never arrived (by `nameOf`, if given). A rank
// that says another number of ranks than the rendezvous' (the root's, else the first admitted
// hello's) fails it for every rank, at once, with both numbers. While a rank waits for the
// others, it and the root say so (WARN) every tenth of the timeout (1 to 30 s; first within
// 10 s), the root naming the missing ranks.
Result rendezvousAllGather(const RendezvousId& id, int rank, int nranks, const std::string& mine,
                           int timeoutSec, std::vector<std::string>* all,
                           const RendezvousRankName& nameOf = {});

uint64_t randomMagic();

}  // namespace zcoll
