// Where the rendezvous root of zcollGetUniqueId listens. (zcollCommInitFromEnv's root listens
// on the address its ranks connect to: ZCOLL_COMM_ID's, or MASTER_ADDR's.)
#pragma once

#include <string>

#include "base/result.h"
#include "bootstrap/socket.h"

namespace zcoll {

// The address for a zcollGetUniqueId root, port 0, and where it came from (for the log):
//   1. ZCOLL_SOCKET_IFNAME set: the interface it selects (pickInterfaceAddress);
//   2. else MASTER_ADDR set and an address of this machine (one a socket can be bound to; a
//      name is resolved): that address. torchrun, Slurm scripts and zcollrun set it to where the
//      other ranks reach rank 0, so the root listens there (MASTER_ADDR=127.0.0.1: loopback
//      only, not eth0). A host name that resolves to a loopback address here (Debian's
//      /etc/hosts entry 127.0.1.1 for the machine's own name) is not taken: other machines
//      resolve it elsewhere; "localhost" and numeric addresses are;
//   3. else the first up interface that is not loopback or docker, else lo
//      (pickInterfaceAddress). A MASTER_ADDR that is not this machine's is logged at INFO.
Result pickRootAddress(SockAddr* out, std::string* from);

}  // namespace zcoll
