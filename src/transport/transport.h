// The narrow interface every transport implements: a lifecycle (address, learn, connect, close:
// core/init.cc drives it for every transport alike) and the data path (post a tagged send or
// receive to a peer, make progress, cancel). Completion is reported through the Request the
// caller owns. Which transports exist, and in which order they are asked, is the transport
// table's business (transport/registry.h).
//
// Tags are matched exactly (all 64 bits); the source rank is encoded in the tag by the caller
// (see base/tags.h), so a transport need not know who sent a message. Messages with the same
// tag from the same peer match in posting order.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/device_fence.h"
#include "base/result.h"
#include "topology/node_layout.h"
#include "transport/device_ipc.h"
#include "transport/peer_memory.h"

namespace zcoll {

class Transport;

// The memory kinds a transport carries (a bit set): every peer has a route per kind.
enum MemKindBits : unsigned {
  kHostMemory = 1u << 0,
  kDeviceMemory = 1u << 1,
};

// What a transport is told about a peer when asked whether it can reach it.
struct PeerReach {
  int rank = -1;              // the peer's comm rank
  bool self = false;         // the peer is this rank
  bool sameMachine = false;  // same host, boot and PID namespace: memory can be shared
  bool sameNode = false;     // same node of the comm (ZCOLL_HOSTID may split a machine)
  // Device routes (asked after the device transports connected: connect(kDeviceMemory)):
  bool device = false;                  // the question is about device bytes
  Transport* hostRoute = nullptr;       // the peer's host route
  const DeviceIdentity* mine = nullptr;    // this rank's device, as exchanged at init
  const DeviceIdentity* theirs = nullptr;  // the peer's
  // For cuda_ipc's own check (it fills these in its connect), from the device identities:
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

// What connect() is told: the routes chosen for one memory kind, and what the peers published.
struct ConnectArgs {
  unsigned kind = kHostMemory;  // kHostMemory: before the init barrier; kDeviceMemory: after it
  const char* commName = "";
  int rank = -1;           // this rank
  std::vector<int> peers;  // host: the ranks routed to this transport; device: every rank
  std::vector<std::string> addresses;  // per rank, its address for this transport ("" none)
  std::vector<int> pids;               // per rank
  std::vector<char> sameMachine;       // per rank: pids are comparable, memory can be shared
  const NodeLayout* layout = nullptr;
  std::vector<DeviceIdentity> devices;  // per rank
  std::vector<Transport*> hostRoutes;   // device: per rank, its host route (working by then)
  // device: set once the communicator is being aborted: waits for the transport's own device
  // copies (cancel, close) then give up at once, leaving the copies and what they use alone.
  const std::atomic<bool>* aborting = nullptr;
  // device: sends mine[r] (`bytes` long) to every rank r with with[r] set and receives theirs[r]
  // (as long) from it, over the host routes (every such pair must call it on both sides, with
  // the same `bytes`; successive calls match in order).
  std::function<Result(const std::vector<char>& with, size_t bytes,
                       const std::vector<std::string>& mine, std::vector<std::string>* theirs)>
      exchange;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;

  // ---- Lifecycle (core/init.cc, the same for every transport) ----
  // The memory kinds this transport carries, as created (a subset of its table row's).
  virtual unsigned memKinds() const { return kHostMemory; }
  // What peers need to reach this rank ("" if nothing): published at init by name
  // (transport/addresses.h).
  virtual std::string address() const { return std::string(); }
  // The peers' addresses for this transport (index = comm rank; "" when a peer published
  // none), before canConnect is asked. Malformed ones fail naming the rank.
  virtual Result learn(const std::vector<std::string>& addresses) {
    (void)addresses;
    return zcollSuccess;
  }
  // Whether this transport carries node peers through memory shared with them (shm, once its
  // probe passed): a transport below it then need not (ucx's choice of protocol).
  virtual bool sharesNodeMemory() const { return false; }
  // Whether this transport can carry messages of the memory kind asked (peer.device) to `peer`;
  // `why` says how, or why not (for the route log and zcoll_info --routes). Asked in priority
  // order: transport/select.h; host routes before connect, device routes after it. An empty
  // `why` with true: the fallback, whose route names why the first transport refused.
  virtual bool canConnect(const PeerReach& peer, std::string* why) const = 0;
  // Connects to the peers routed to it (args.kind says for which memory kind); called for every
  // transport that carries the kind, routed peers or not.
  virtual Result connect(const ConnectArgs& args) {
    (void)args;
    return zcollSuccess;
  }
  // Before destruction: delivers what is queued (close notices), waiting at most `flushMs`.
  // Called in reverse order, so device transports close before the host ones they send over.
  virtual void close(int flushMs) { (void)flushMs; }
  // Requests complete while posting, or at the post of their match by this same thread (self):
  // a waiting rank never sleeps on this transport's events.
  virtual bool completesOnPost() const { return false; }
  // Its peers' memory read in place (transport/peer_memory.h), for the memory kinds it carries;
  // null when it offers none (after connect: shm once its probe passed, cuda_ipc when on).
  virtual PeerMemory* peerMemory() { return nullptr; }

  // ---- Data path ----

  // Post operations; `req` must stay alive until complete() or cancel().
  virtual Result postSend(int peer, const void* buf, size_t bytes, uint64_t tag, Request* req) = 0;
  virtual Result postRecv(int peer, void* buf, size_t bytes, uint64_t tag, Request* req) = 0;
  // Device transports whose copies run on the device's copy engine: the copies of a message
  // posted with postSendAfter/postRecvAfter wait for `after` (the call's device work up to the
  // post, base/device_fence.h), so the caller need not wait for that work on the host.
  virtual bool waitsForFences() const { return false; }
  virtual Result postSendAfter(int peer, const void* buf, size_t bytes, uint64_t tag,
                               Request* req, std::shared_ptr<DeviceFence> after) {
    (void)after;
    return postSend(peer, buf, bytes, tag, req);
  }
  virtual Result postRecvAfter(int peer, void* buf, size_t bytes, uint64_t tag, Request* req,
                               std::shared_ptr<DeviceFence> after) {
    (void)after;
    return postRecv(peer, buf, bytes, tag, req);
  }

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

// A device transport whose copies run on the device's copy engine and wait for the call's fence
// (cuda_ipc, staged): every post goes through postSendAfter/postRecvAfter, without a fence
// (after = null) when posted with plain postSend/postRecv.
class FencedTransport : public Transport {
 public:
  Result postSend(int peer, const void* buf, size_t bytes, uint64_t tag, Request* req) final {
    return postSendAfter(peer, buf, bytes, tag, req, nullptr);
  }
  Result postRecv(int peer, void* buf, size_t bytes, uint64_t tag, Request* req) final {
    return postRecvAfter(peer, buf, bytes, tag, req, nullptr);
  }
  bool waitsForFences() const final { return true; }
  Result postSendAfter(int peer, const void* buf, size_t bytes, uint64_t tag, Request* req,
                       std::shared_ptr<DeviceFence> after) override = 0;
  Result postRecvAfter(int peer, void* buf, size_t bytes, uint64_t tag, Request* req,
                       std::shared_ptr<DeviceFence> after) override = 0;
};

}  // namespace zcoll
