// Shrinking a communicator (zcollCommShrink): the ranks that stay build a new communicator
// without the excluded ones (dead, hung, or dropped on purpose), exchanging what they need over
// the parent's own connections between them. No rendezvous (its root may be among the dead),
// nothing from an excluded rank, and it works on a parent that is broken or revoked.
//   1. Stayers S = the parent's ranks not excluded, in parent order; rank i of the new comm is
//      S[i] (NCCL's renumbering).
//   2. Each stayer makes its part locally (core/init.h startChildComm) and sends every other
//      stayer a record {hash of the excluded set, its address's size, its local error}, then its
//      address, on tags no collective uses (base/tags.h makeShrinkTag, with the call's attempt
//      number: a later attempt never takes a message of an earlier, failed one). The API counts
//      every call on the parent as an attempt, one that takes no part or fails before the
//      exchange included, so the n-th call of every rank uses the same number.
//   3. It waits for theirs, bounded by the parent's timeout, and fails at once when a stayer
//      goes down (its process ended, its transport failed, it destroyed its comm): a rank that
//      dies during the shrink fails it on every stayer, and a second call that excludes it too
//      can succeed. Failure notices from stayers do not count: the parent broke on all of them.
//   4. Every stayer checks that all excluded the same ranks and set up their part; if not, all
//      fail alike, naming the rank, and nothing is created.
//   5. The new comm is wired as a split's (core/init.h finishChildComm): it has its own
//      transports, node layout and subgroups for the new membership.
#pragma once

#include <vector>

#include "core/comm.h"
#include "core/init.h"

namespace zcoll {

// `excluded`: sorted, distinct parent ranks, not this one (the API checks the arguments).
// `attempt`: this call's number among the zcollCommShrink calls on the parent (from 1). The
// parent is used in its turn (nothing else runs on it meanwhile); *out: the new comm.
Result shrinkComm(zcollComm* parent, const std::vector<int>& excluded, uint32_t attempt,
                  const InitSettings& settings, zcollComm** out);

}  // namespace zcoll
