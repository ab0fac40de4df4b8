// Posting and waiting: the one place that routes a message to its transport, counts its bytes
// per path, and waits with a deadline, abort checks and CPU yielding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/comm.h"

namespace zcoll {

// `exec` is the call's executor (null: host memory, nothing to order): a device call's
// non-empty message goes over the peer's device route (comm->deviceRoute: cuda_ipc or staged;
// zcollUnsupported when this rank has none), every other message over its host route. Both ends
// of a message must be calls of one memory kind. The message's bytes must not be touched before
// the executor's work issued so far is done (it may write the buffer to send, or still read the
// buffer to receive into): a device route whose copies wait for a fence gets one
// (Executor::fence, Transport::postSendAfter), any other route waits for it here (flush).
Result postSend(zcollComm* comm, int peer, const void* buf, size_t bytes, uint64_t tag,
                Request* req, Executor* exec = nullptr);
Result postRecv(zcollComm* comm, int peer, void* buf, size_t bytes, uint64_t tag, Request* req,
                Executor* exec = nullptr);


// Counts `bytes` moved to (sending) or from `peer` outside postSend/postRecv (one-sided reads)
// in the comm's per-path statistics.
void countTransfer(zcollComm* comm, int peer, size_t bytes, bool sending);

// Drives progress until every request is complete. Spins comm->spinCount polls, then sleeps on
// the transport's events or yields the CPU between polls. Fails with zcollTimeout past the comm's timeout, zcollRemoteError on
// abort or peer failure; on failure cancels the rest and puts the comm in the error state.
Result waitAll(zcollComm* comm, Request* reqs, size_t n);

// The peers the incomplete requests of reqs[0..n) wait on, e.g. "rank 3 (receive), rank 1
// (send, receive)"; "no peer" when all are complete.
std::string pendingPeers(const Request* reqs, size_t n);

// Why `peer` (not this rank) will never answer again, or nullptr while it may: its
// communicator is closed (a close or gone notice, core/peer_notice.h), its transport reported
// it, or its process on this machine ended. A failure notice alone is not such a reason: the
// peer may be alive (a shrink waits on such peers).
const char* whyPeerGone(const zcollComm* comm, int peer);

// Puts the communicator in the error state (first error wins). The first error also dumps its
// flight record (ZCOLL_DEBUG_DUMP, if set; reason "timeout", "revoke" or "error"), unless an
// abort is under way (zcollCommAbort dumps "abort").
void breakComm(zcollComm* comm, Result error);
// breakComm, then the failure notice to every peer (once per comm): peers blocked on this rank
// in the same collective learn at once instead of at their timeout.
void breakAndNotify(zcollComm* comm, Result error);

}  // namespace zcoll

namespace zcoll {
// Scratch space of at least `bytes` that `exec` can work on (host, or device memory for a
// device executor), from the comm's reusable region of that kind (one region per call).
Result scratchGet(zcollComm* comm, const Executor& exec, size_t bytes, void** out);
}  // namespace zcoll
