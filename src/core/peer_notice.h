// Peer notices: how a rank tells every connected peer that its communicator closed or failed,
// so ranks blocked on it (or on anyone) learn within milliseconds instead of a timeout. This
// works over every transport (UCX shared memory has no peer-failure callback) because it is an
// ordinary tagged message on a tag no collective or point-to-point call uses.
//
// - armPeerNotices: after wire-up, one 8-byte receive is posted from every peer.
// - sendPeerNotices: `closed` on a healthy destroy, `failed` when the comm breaks or aborts.
//   Sent once (a failure replaces a close not yet sent); the sender progresses briefly.
// - sendGoneNotices: at destroy or abort after a `failed` was sent, `gone` follows on its own
//   tag (a second receive per peer): ranks that go on using a broken comm (a shrink, which
//   ignores `failed`) learn that this rank will never answer.
// - A received `closed` marks that peer down: waits involving it fail (after the grace period
//   that lets data it sent before leaving be matched). A received `failed` fails every wait on
//   the communicator, and the receiver breaks and sends `failed` in turn, so a failure
//   anywhere reaches every rank.
#pragma once

#include "core/comm.h"

namespace zcoll {

// How long a sender waits for its notices to leave (and destroy for endpoints to flush).
constexpr int kNoticeWaitMs = 200;

enum class Notice : uint32_t { kNone = 0, kClosed = 1, kFailed = 2 };

// Posts the notice receives (after wire-up; callable once).
Result armPeerNotices(zcollComm* comm);

// Tells every peer; waits at most `waitMs` for the sends to leave. Must run on the thread that
// drives the comm's transports (a collective's thread, or destroy once no call is active).
void sendPeerNotices(zcollComm* comm, Notice kind, int waitMs);

// What `peer` told us so far (kNone if nothing). Call after progress.
Notice noticeFrom(const zcollComm* comm, int peer);

// After a `failed` notice went out: tells every peer this rank's communicator is gone; waits at
// most `waitMs` for the sends to leave. Nothing after a `closed` (it says so) or no notice.
void sendGoneNotices(zcollComm* comm, int waitMs);
// Whether `peer`'s communicator is gone: it sent `closed`, or `gone`. Call after progress.
bool peerLeft(const zcollComm* comm, int peer);

// The first peer that reported a failure, or -1.
int failedPeer(const zcollComm* comm);

// Records why this comm broke (first call wins), for the notices it sends: `rank` failed
// (itself, for a local error or timeout), or destroyed its communicator when `closed`.
void recordFailureCause(zcollComm* comm, int rank, bool closed);

// The failure a peer's notice reports, as the message of a zcollRemoteError.
Result failureReportedBy(const zcollComm* comm, int peer);

// Cancels the notice receives and sends still pending (before the transports close).
void retirePeerNotices(zcollComm* comm);

}  // namespace zcoll
