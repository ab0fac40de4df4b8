// Intra-node host transport over shared memory (segments: transport/shm_segment.h).
//
// Every pair of local ranks has one ring per direction in the receiver's segment. A message of
// up to kEagerBytes is copied into the ring and the send completes at once; a larger one posts
// a descriptor of the sender's buffer, and the receiver, once its receive matches, copies the
// data straight from the sender's memory into its own buffer with process_vm_readv (one copy,
// no bounce buffer) and marks the rendezvous done, which completes the send. Matching is by
// exact tag in posting order per peer, as the Transport contract says; messages that arrive
// before their receive wait in an unexpected list. A waiting rank sleeps on its doorbell futex
// and every writer rings it, so idle ranks use no CPU.
//
// Chosen for a peer on the same node and machine when both ranks can share memory
// (shm::probeSharing) and run as the same user (transport/shm_pairing.h); otherwise the peer
// goes to ucx. The same peers' memory is read in place through ShmPeerMemory
// (transport/shm_peer_memory.h), which the transport owns and fills as it connects.
#pragma once

#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "topology/node_layout.h"
#include "transport/peer_memory.h"
#include "transport/registry.h"
#include "transport/shm_pairing.h"
#include "transport/shm_peer_memory.h"
#include "transport/shm_segment.h"
#include "transport/transport.h"

namespace zcoll {

class ShmTransport final : public Transport {
 public:
  // Probes whether this process can share memory and, if so, creates its segment. A transport
  // that cannot share still exists, so that canConnect can say why.
  static Result create(std::unique_ptr<ShmTransport>* out);
  // The table's row (transport/registry.h): none when ZCOLL_TRANSPORT names another transport;
  // ZCOLL_TRANSPORT=shm fails when this process cannot share memory.
  static Result createFor(const TransportSettings& settings, const std::vector<Transport*>& above,
                          std::unique_ptr<Transport>* out);
  ~ShmTransport() override;

  // What peers need to reach this rank's segment (16 bytes; see parseAddress).
  std::string address() const override { return pairing_.address(own_.fd()); }
  bool usable() const { return pairing_.usable(); }
  bool sharesNodeMemory() const override { return usable(); }
  // Peers' addresses (index = comm rank; empty when a peer has no shm transport), needed by
  // canConnect. Malformed ones fail.
  Result learn(const std::vector<std::string>& addresses) override {
    return pairing_.learn(addresses);
  }
  // Host routes: maps this rank's segment and those of args.peers (comm ranks routed here, all
  // on this node), and gives them to the peer memory.
  Result connect(const ConnectArgs& args) override;
  // Delivers queued sends (close notices): flushQueued.
  void close(int flushMs) override { flushQueued(flushMs); }
  // The node peers' host memory, read in place (transport/shm_peer_memory.h).
  PeerMemory* peerMemory() override { return usable() ? &memory_ : nullptr; }
  const shm::PeerRegions& peerRegions() const { return memory_.peerRegions(); }
  // Progresses until queued sends (e.g. close notices) are out or `waitMs` passes.
  void flushQueued(int waitMs);

  const char* name() const override { return "shm"; }
  bool canConnect(const PeerReach& peer, std::string* why) const override {
    return pairing_.canConnect(peer, why);
  }
  Result postSend(int peer, const void* buf, size_t bytes, uint64_t tag, Request* req) override;
  Result postRecv(int peer, void* buf, size_t bytes, uint64_t tag, Request* req) override;
  Result progress() override;
  void cancel(Request* req) override;
  bool waitForEvents(int timeoutMs) override;
  bool pending() const override;
  void settleCancelled(int waitMs) override;

 private:
  struct Outgoing {
    uint32_t kind;
    uint64_t tag;
    const void* buf;
    size_t bytes;
    Request* req;
  };
  struct Posted {
    uint64_t tag;
    void* buf;
    size_t bytes;
    Request* req;
  };
  // A message as a slot describes it.
  struct Message {
    uint32_t kind;
    uint32_t rndvIndex;
    uint64_t tag;
    size_t bytes;
    uint64_t addr;
  };
  // A message that arrived before its receive (an eager payload is copied out of the ring).
  struct Unexpected {
    Message m;
    std::vector<unsigned char> payload;
  };
  struct Peer {
    bool connected = false;
    int pid = -1;
    int local = -1;         // its index on the node
    shm::Segment segment;   // its segment, mapped here
    uint64_t head = 0;      // messages sent to it
    uint64_t tail = 0;      // messages received from it
    std::deque<Outgoing> queued;  // waiting for ring space or a rendezvous state, in order
    std::vector<uint32_t> freeRndv;
    std::vector<uint32_t> rndvInFlight;
    Request* rndvOwner[shm::kRndvSlots] = {};
    std::list<Posted> posted;
    std::list<Unexpected> unexpected;
    // Receives matched to an early rendezvous at post time: read in progress(), after the
    // caller has posted its sends too, so two ranks exchanging read at the same time.
    std::deque<std::pair<Posted, Message>> reads;
  };
  struct Settling {  // a cancelled send the receiver was reading: wait until it is done
    int peer;
    uint32_t index;
  };

  ShmTransport() = default;
  static void complete(Request* req, Result status);
  Result checkConnected(int peer) const;
  // Checks `peer` and makes this transport the owner of `req`.
  Result bindRequest(int peer, size_t bytes, Request* req);
  shm::RndvTable& myRndv(const Peer& p) const { return own_.rndv(p.local); }
  shm::RndvTable& theirRndv(const Peer& p) const { return p.segment.rndv(myLocal_); }

  bool hasRoom(const Peer& p, const Outgoing& o) const;
  bool trySend(Peer& p, const Outgoing& o);
  void writeSlot(Peer& p, const Outgoing& o, uint32_t rndvIndex);
  void pumpQueued(Peer& p);
  void drainInbound(int peer);
  void readMatched(int peer);
  void deliverEager(int peer, const Message& m, const unsigned char* payload,
                    const Posted& recv);
  void deliverRendezvous(int peer, const Message& m, const Posted& recv);
  void finishRendezvous(Peer& p);
  void reclaimSettled();
  bool hasWork() const;

  ShmPairing pairing_;
  shm::Segment own_;
  ShmPeerMemory memory_;
  int myLocal_ = -1;
  std::vector<Peer> peers_;        // by comm rank
  std::vector<int> connected_;     // comm ranks with connected == true
  std::vector<Settling> settling_;
};

}  // namespace zcoll
