// The communicator: identity, node layout, transports per peer, health, counters.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/result.h"
#include "core/flight_recorder.h"
#include "exec/engine.h"
#include "exec/scratch.h"
#include "exec/wait_words.h"
#include "topology/node_layout.h"
#include "topology/topology.h"
#include "transport/device_ipc.h"
#include "transport/transport.h"

namespace zcoll {

// What each rank tells the others at bootstrap (fixed part; the transport address follows).
struct PeerInfo {
  int32_t rank;
  int32_t pid;
  // Random, drawn when the rank made its first communicator; a communicator made from another
  // (split, shrink, grow) keeps each member's: it tells which ranks of two communicators are
  // the same (zcollRebuildFromSecondary maps an old layout onto the new ranks by it).
  uint64_t memberId;
  uint64_t hostHash;     // node identity (may be overridden to emulate nodes)
  uint64_t machineHash;  // the real machine + PID namespace: pids are comparable when equal
  char hostName[64];
  TopoSummary topo;
  DeviceIdentity device;  // the rank's device (transport/device_ipc.h); present 0 without one
};

struct Counters {
  std::atomic<uint64_t> sent[zcollNumPaths];
  std::atomic<uint64_t> recv[zcollNumPaths];
  std::atomic<uint64_t> ops;
  void reset() {
    for (int p = 0; p < zcollNumPaths; ++p) {
      sent[p].store(0);
      recv[p].store(0);
    }
    ops.store(0);
  }
};

// Close/failure notices to and from every peer (core/peer_notice.h).
struct PeerNotices {
  bool armed = false;
  uint32_t sent = 0;           // the Notice sent, 0 if none
  uint64_t outbox[2] = {0, 0};  // what every peer is sent: {kind, code}, {cause rank, closed}
  int causeRank = -1;           // the rank whose failure broke this comm (-1: none recorded)
  bool causeClosed = false;     // ... because it destroyed its communicator
  std::vector<uint64_t> inbox;  // per peer, two words each
  std::vector<Request> recvs;   // per peer; sized once (the transports hold pointers)
  std::vector<Request> sends;
  // The gone notices (sendGoneNotices), per peer: one word each way.
  bool goneSent = false;
  uint64_t goneOutbox = 1;
  std::vector<uint64_t> goneInbox;
  std::vector<Request> goneRecvs;
  std::vector<Request> goneSends;
};

}  // namespace zcoll

// A window of device memory registered with a communicator (zcollCommWindowRegister): this
// rank's range, and the registration's id, the same on every rank (registrations are collective
// and made in the comm's order).
struct zcollWindow {
  zcollComm* comm = nullptr;
  uint32_t id = 0;
  void* buff = nullptr;
  size_t size = 0;
};

namespace zcoll {
class TriggerRing;  // trigger/ring.h
}  // namespace zcoll

struct zcollComm {
  uint64_t magic = 0;  // kCommMagic while alive (catches use after destroy, best effort)
  int rank = 0;
  int nranks = 0;
  std::string name;
  // The same on every rank of this comm and, with overwhelming likelihood, different from every
  // other comm of the job, even one over the same ranks with the same name (a torch group and a
  // new_group of it): keys zcoll_info --status and dump paths. Set in finishComm (commIdOf).
  uint64_t id = 0;
  uint32_t splitCount = 0;  // zcollCommSplit calls on this comm (their children's ids)
  int timeoutSec = 300;
  // Ring reductions of fp16/bf16 send fp32 partials (false: the result is rounded once) or
  // partials rounded to the data type at every hop (true, ZCOLL_REDUCE_PARTIALS=dtype: NCCL's
  // choice, half the bytes). Read once at init: every rank of a call must agree.
  bool partialsInDtype = false;
  // ZCOLL_CHECK_CALLS: every collective first checks that all ranks made the same call
  // (api/call_check.h). Read once at init. callNumber counts this rank's collectives.
  bool checkCalls = false;
  std::atomic<uint64_t> callNumber{0};  // a triggered call counts on its caller's thread
                                         // while the progress thread may run queued ones
  // ZCOLL_DEVICE_CALLS: a collective on device buffers returns once enqueued on its stream
  // (true, "async", unless CUDA_DEVICE_MAX_CONNECTIONS=1: exec/device_component.h) or once
  // complete ("sync"). Read once at init (api/launch.h).
  bool deviceCallsAsync = true;
  // ZCOLL_DEVICE_CALLS=stream: all-gather, reduce-scatter and all-reduce on device buffers are
  // submitted whole on the caller's stream at call time (trigger/ring.h) where `trigger` exists;
  // every other device call runs synchronously. Read once at init.
  bool deviceCallsTriggered = false;
  // Read once at init (splits inherit them), never per call: ZCOLL_SPIN_COUNT (-1: chosen at
  // init, see chooseSpinCount) and the ZCOLL_ALGO_<KIND> overrides, indexed by CollKind ("" =
  // chosen by size). spinCount is the count in use.
  int64_t spinSetting = -1;
  int64_t spinCount = 2000;
  std::vector<std::string> forcedAlgorithm;
  std::string hostIdOverride;  // from the config; inherited by splits
  zcoll::NodeLayout layout;
  std::vector<zcoll::PeerInfo> peers;

  zcoll::PeerNotices notices;  // before the transports: outlives their cancellations
  // Every transport of this comm, owned, from the transport table (transport/registry.h), in
  // lifecycle order: the host-carrying ones by priority (self, shm, ucx), then the device-only
  // ones (cuda_ipc, staged: they send over the host ones). Progressed in this order, closed and
  // destroyed in reverse.
  std::vector<std::unique_ptr<zcoll::Transport>> transportList;
  std::vector<zcoll::Transport*> route;   // rank -> transport (transport/select.h)
  std::vector<std::string> routeWhy;      // rank -> "<transport>: <why it was chosen>"
  // Device buffers: each peer's device route, chosen at init (core/init.cc) among the
  // transports that carry device memory, by priority: cuda_ipc (device to device) for the node
  // peers where both ranks agreed, ucx where both ranks' UCX carries device memory, staged
  // (pinned host memory, in pipelined chunks over route[]) for the rest. They exist only when
  // this rank has a device; without one, device calls cannot move bytes.
  std::vector<zcoll::Transport*> deviceRoute;  // rank -> cuda_ipc, ucx or staged (null: none)
  std::vector<std::string> deviceRouteWhy;     // rank -> "<transport | none> (<why>)"

  std::atomic<int> asyncError{zcollSuccess};
  std::atomic<bool> aborting{false};
  std::atomic<bool> revoked{false};  // zcollCommRevoke: broken on purpose, kept for a shrink
  // zcollCommShrink calls on this comm (their tags): every call counts, one that takes no part
  // or fails included, so the ranks' n-th calls meet on the same tags (api/shrink.cc).
  std::atomic<uint32_t> shrinkAttempts{0};
  uint32_t growAttempts = 0;         // zcollCommGrow calls on this comm (their tags)
  // Made by zcollCommShrink: the parent as it was (its layout, its members' ids in rank order),
  // so a rebuild after the shrink can read it once the parent is gone (zcollRebuildFrom*
  // with oldComm NULL). Empty otherwise.
  zcoll::NodeLayout parentLayout;
  std::vector<uint64_t> parentMemberIds;
  // The id zcollCommGetUniqueId handed out for a grow of this comm, until a zcollCommGrow on
  // this comm takes it or it expires (its rendezvous service gives up at the timeout).
  bool growIdActive = false;
  zcollUniqueId growId{};
  std::chrono::steady_clock::time_point growIdExpires{};
  std::atomic<int> activeCalls{0};
  // A device call gave up waiting for its stream (an abort, or its timeout) with work still
  // queued there: the device memory that work may use (scratch) is never freed.
  std::atomic<bool> deviceWorkAbandoned{false};

  uint32_t collSeq = 0;
  std::vector<uint32_t> sendSeq;  // point-to-point, per peer
  std::vector<uint32_t> recvSeq;

  // Windows registered and not yet deregistered (their handles; the transports keep the
  // mappings), and the id the next registration takes.
  std::vector<std::unique_ptr<zcollWindow>> windows;
  uint32_t nextWindowId = 0;

  zcoll::Counters stats;
  zcoll::FlightRecorder recorder;  // the last operations (core/flight_recorder.h)
  zcoll::Scratch scratch;        // host scratch
  zcoll::Scratch deviceScratch;  // scratch of the device calls (exec/executor.h MemoryOps)
  // The words queued device calls hold their callers' streams on (exec/wait_words.h), made at
  // init when this rank has a device and queues device calls; null otherwise.
  std::unique_ptr<zcoll::WaitWords> waitWords;
  // The flags and window slots of stream-triggered calls (trigger/ring.h), made at init with
  // ZCOLL_DEVICE_CALLS=stream where the comm qualifies; null otherwise (triggerWhy says why).
  // Released before the transports close (its window is cuda_ipc's).
  std::shared_ptr<zcoll::TriggerRing> trigger;
  std::string triggerWhy;

  std::mutex lastErrorMu;
  std::string lastError;

  // The order of every call on this comm (exec/engine.h). Last: destroyed first, after
  // destroyComm has stopped it, so its progress thread never outlives what it uses.
  zcoll::Engine engine;

  // Every transport of this comm, in lifecycle order (transportList).
  std::vector<zcoll::Transport*> transports() const {
    std::vector<zcoll::Transport*> all;
    for (const auto& t : transportList) all.push_back(t.get());
    return all;
  }
  // The transport named `name` (transport/registry.h), null when this comm has none.
  zcoll::Transport* transportNamed(const std::string& name) const {
    for (const auto& t : transportList)
      if (name == t->name()) return t.get();
    return nullptr;
  }
  // A device call's bytes to `peer` have a way to travel (cuda_ipc or staged).
  bool deviceRouted(int peer) const {
    return !deviceRoute.empty() && deviceRoute[peer] != nullptr;
  }
  int node() const { return layout.nodeOf[rank]; }
  // How long a device call's waits for its streams may last (Executor::limitWaits).
  zcoll::WaitLimits deviceWaitLimits() {
    return zcoll::WaitLimits{&aborting, timeoutSec * 1000, &deviceWorkAbandoned};
  }
  bool sameMachine(int peer) const { return peers[peer].machineHash == peers[rank].machineHash; }
  zcollPath_t pathTo(int peer) const {
    if (peer == rank) return zcollPathSelf;
    return layout.nodeOf[peer] == layout.nodeOf[rank] ? zcollPathIntra : zcollPathInter;
  }
};
