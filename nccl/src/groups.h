// NCCL's group calls over zcoll's, plus what NCCL adds: ncclCommInitRank* inside a group is
// started at once on a thread of its own and ncclGroupEnd waits for it (as NCCL runs grouped
// inits at the group's end, so one thread can init several ranks).
#pragma once

#include <nccl.h>

#include <functional>

namespace zcoll_nccl {

int groupDepth();
// A comm whose init runs on its own thread, to be waited for at the outermost ncclGroupEnd.
void deferToGroupEnd(ncclComm_t comm);
// A child made inside a group whose fallback communicator (fallback.h) is made at the outermost
// ncclGroupEnd, after zcoll's group ends, in the order the children were made.
void deferFallbackToGroupEnd(ncclComm_t child);
// Runs `release` after the outermost ncclGroupEnd's zcollGroupEnd, which issues the group's
// calls: the scratch of a grouped PreMulSum call (premulsum.h) is given back only then.
void releaseAtGroupEnd(std::function<void()> release);

}  // namespace zcoll_nccl
