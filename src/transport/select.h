// Per-peer transport choice, in the shape of NCCL's selectTransport/canConnect: every transport
// of the communicator, in priority order, is asked whether it can reach a peer; the first that
// can carries every message to that peer. The choice and its reason are logged at INFO and
// shown by `zcoll_info --routes`. Intra-node transports (cuda_ipc, shm) slot in above `ucx`.
#pragma once

#include <string>
#include <vector>

#include "transport/transport.h"

namespace zcoll {

struct Route {
  Transport* transport = nullptr;
  std::string why;  // "<transport> (<reason>)"
};

// Chooses a route to every peer. A transport that says yes without a reason of its own (the
// fallback: staged for device bytes) takes the reason the first transport refused with. When
// no transport can reach a peer: with `noneWhy`, its route is {null, "none (<noneWhy>)"};
// without, this fails naming the peer and every transport's reason.
Result selectRoutes(const std::vector<Transport*>& byPriority, const std::vector<PeerReach>& peers,
                    std::vector<Route>* routes, const char* noneWhy = nullptr);

// One line per distinct route, with the ranks it covers, in order of their lowest rank, e.g.
// "ranks 0-2,5 -> ucx (same machine: ...)".
std::vector<std::string> summarizeRoutes(const std::vector<Route>& routes);

}  // namespace zcoll
