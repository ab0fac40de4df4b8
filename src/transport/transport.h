// The narrow interface every transport implements: post a tagged send or receive to a peer,
// make progress, cancel. Completion is reported through the Request the caller owns.
//
// Tags are matched exactly (all 64 bits); the source rank is encoded in the tag by the caller
// (see base/tags.h), so a transport need not know who sent a message. Messages with the same
// tag from the same peer match in posting order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/result.h"

namespace zcoll {

class Transport;

// What a transport is told about a peer when asked whether it can reach it.
struct PeerReach {
  int rank = -1;              // the peer's comm rank
  bool self = false;         // the peer is this rank
  bool sameMachine = false;  // same host, boot and PID namespace: memory can be shared
  bool sameNode = false;     // same node of the comm (ZCOLL_HOSTID may split a machine)
  bool hasNetAddress = false;  // the peer published a network (UCX) address
  // For device transports (cuda_ipc), from the device identities ranks exchange at init:
  bool deviceIpc = false;   // both ranks have a device of one kind whose memory can be shared
  bool sameDevice = false;  // ... and it is the same device (two ranks on one GPU)
  int devicePath = -1;      // the path class between the two devices (topology.h GpuPath),
                            // -1 when the topology does not locate them
};

struct Request {
  // Completion is signalled from inside progress(), on the thread that drives the transport,
  // so plain fields suffice.
  int done = 0;                      // set to 1 by the transport when complete
  Result status = zcollSuccess;      // valid once done
  size_t bytes = 0;                  // bytes the operation carries
  void* impl = nullptr;              // transport-private handle
  Transport* transport = nullptr;    // who completes it
  int peer = -1;
  bool receive = false;              // set by postRecv (core/progress.cc)

  void reset() {
    done = 0;
    status = zcollSuccess;
    bytes = 0;
    impl = nullptr;
    transport = nullptr;
    peer = -1;
    receive = false;
  }
  bool complete() const { return done != 0; }
  // A transport taking the request for a `n`-byte transfer with `peerRank`, `handle` its own.
  void bind(Transport* t, void* handle, int peerRank, size_t n) {
    reset();
    transport = t;
    impl = handle;
    peer = peerRank;
    bytes = n;
  }
  // Marks it complete with `s` (from the transport's progress; its handle is gone).
  void finish(Result s) {
    status = s;
    impl = nullptr;
    done = 1;
  }
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;

  // Whether this transport can carry messages to `peer`; `why` says how, or why not (for the
  // route log and zcoll_info --routes). Asked in priority order: transport/select.h.
  virtual bool canConnect(const PeerReach& peer, std::string* why) const = 0;

  // Post operations; `req` must stay alive until complete() or cancel().
  virtual Result postSend(int peer, const void* buf, size_t bytes, uint64_t tag, Request* req) = 0;
  virtual Result postRecv(int peer, void* buf, size_t bytes, uint64_t tag, Request* req) = 0;

  // Advances outstanding operations. Returns an error only if the transport itself broke.
  virtual Result progress() = 0;

  // True once the transport learned that `peer` failed or disconnected. Requests already
  // satisfied (data that arrived before) still complete; the caller fails the rest.
  virtual bool peerFailed(int peer) const {
    (void)peer;
    return false;
  }

  // Sleeps until the transport may have work (a message arrived, a send completed) or
  // `timeoutMs` passed. Returns false if this transport cannot block; the caller then yields.
  virtual bool waitForEvents(int timeoutMs) {
    (void)timeoutMs;
    return false;
  }

  // Whether operations posted here are still under way. A rank waiting on another transport's
  // events sleeps only while this is false: what this one needs (a shm read the receiver does,
  // a device copy) would otherwise wait for that sleep to end.
  virtual bool pending() const { return false; }

  // Gives up an incomplete request (timeout, abort, error). Afterwards it is safe to free it.
  virtual void cancel(Request* req) = 0;

  // After cancels: makes sure no cancelled transfer still reads or writes a caller's buffer,
  // waiting at most about 2 x `waitMs` (a transport may close a peer's connection for it).
  virtual void settleCancelled(int waitMs) { (void)waitMs; }
};

}  // namespace zcoll
