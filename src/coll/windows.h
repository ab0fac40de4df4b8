// Registering caller device memory with a communicator (zcollCommWindowRegister), so its node
// peers read it in place (transport/peer_memory.h: only memory mapped before a call is read in
// place on a device). Collective over the comm, in its order, with control messages over the
// host routes; every mapping is opened or closed while no stream of the process is held
// (base/stream_holds.h).
//
// Registration `id`, in two rounds over every rank:
//   1. each rank registers its range with its device's peer memory (exported) and sends the
//      description, with its own outcome, to every rank;
//   2. each rank maps the ranges of the peers its peer memory connects to, and sends whether
//      that worked.
// A failure on any rank, in either round, undoes the registration on every rank, which then
// fails naming the rank: no rank keeps a registration its peers lack.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coll/coll.h"

namespace zcoll {

Result registerWindow(zcollComm* comm, uint32_t id, void* buff, size_t bytes);
// Closes every rank's mappings of registration `id` and forgets it; returns once every rank has
// (a token from each), so the owner may free the memory.
Result deregisterWindow(zcollComm* comm, uint32_t id);

}  // namespace zcoll
