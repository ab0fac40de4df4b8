// Inter-node transport (and intra-node where the shm transport cannot run, or with
// ZCOLL_TRANSPORT=ucx) over UCX's UCP tag API: one UCP context and worker per communicator, one
// endpoint per peer, peer error handling on, so a peer that dies or disconnects turns pending
// work into zcollRemoteError instead of a hang. UCX's own shared-memory transports need room in
// /dev/shm, which containers keep small: when UCX cannot start with them and UCX_TLS is not set,
// it starts without them (UCX_TLS=^sm), with a warning.
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "transport/registry.h"
#include "transport/transport.h"

namespace zcoll {

class UcxTransport final : public Transport {
 public:
  // Creates the context and worker; address() is then what peers need to connect.
  // `carriesNodePeers`: UCX may reach ranks on this machine (no zcoll shm for them), which
  // keeps UCX's rendezvous protocol (see tcpEager()).
  static Result create(const std::string& commName, bool carriesNodePeers, UcxTransport** out);
  // The table's row (transport/registry.h): none when ZCOLL_TRANSPORT names another transport;
  // UCX carries node peers unless a transport above shares memory with them.
  static Result createFor(const TransportSettings& settings, const std::vector<Transport*>& above,
                          std::unique_ptr<Transport>* out);
  ~UcxTransport() override;

  std::string address() const override { return address_; }
  // Which peers published a UCX address (canConnect needs it).
  Result learn(const std::vector<std::string>& addresses) override;
  // Host routes: connects to every peer of args.peers (its address non-empty). Asks UCX to
  // report a peer's failure only for peers on another machine: UCX 1.13's shared-memory
  // transports cannot, so asking restricts the endpoint to TCP/IB. Device routes: nothing more
  // (the host endpoints carry device bytes too).
  Result connect(const ConnectArgs& args) override;
  // Flushes and closes every endpoint (closeEndpoints).
  void close(int flushMs) override { closeEndpoints(flushMs); }
  // Host memory; device memory too when UCX reports CUDA memory among the kinds it carries (a
  // UCX built with CUDA: cuda_copy, and GPUDirect RDMA where the NIC allows) and this rank's
  // device is a CUDA device: device buffers may then be given to it directly.
  unsigned memKinds() const override { return memKinds_; }

  const char* name() const override { return "ucx"; }
  // Host bytes: the peers that published an address. Device bytes (after connect): the peers on
  // ucx whose UCX carries device memory on both ranks, unless ZCOLL_DEVICE_TRANSPORT=staged.
  bool canConnect(const PeerReach& peer, std::string* why) const override;
  bool carriesCudaMemory() const { return carriesCuda_; }
  // Large messages go eagerly (UCX_RNDV_THRESH=inf) instead of by rendezvous. Chosen when UCX
  // only has TCP to offer (no RDMA device on this machine), carries no node peers, and the user
  // has not set UCX_RNDV_THRESH: UCX 1.13's rendezvous over TCP sends its handshake in the
  // socket that carries the data going the other way, so two ranks exchanging large messages
  // each wait behind the other's data and a link runs at about half its rate in each direction
  // (perf/LOG.md, "UCX over TCP: eager, not rendezvous").
  bool tcpEager() const { return tcpEager_; }
  Result postSend(int peer, const void* buf, size_t bytes, uint64_t tag, Request* req) override;
  Result postRecv(int peer, void* buf, size_t bytes, uint64_t tag, Request* req) override;
  Result progress() override;
  void cancel(Request* req) override;
  bool peerFailed(int peer) const override { return failed_[peer] != 0; }
  bool waitForEvents(int timeoutMs) override;
  bool pending() const override { return !slots_.empty(); }
  void settleCancelled(int waitMs) override;

  // Flushes and closes every endpoint, waiting at most `waitMs`.
  void closeEndpoints(int waitMs);

 private:
  // Context and worker, UCX's transport list replaced by `tls` unless null; *step names what
  // failed. release() undoes a partial open.
  ucs_status_t open(const std::string& commName, const char* tls, const char** step);
  ucs_status_t configure(ucp_config_t* config, const char* tls) const;
  void release();

  // user_data of a UCX request: lets a cancelled Request be freed before UCX calls back.
  struct Slot {
    UcxTransport* transport;
    Request* owner;  // null once cancelled
    void* ucxRequest;
    int peer;
    // UCX may run the completion callback inside the post call and still return the request
    // (a receive matching a fragmented unexpected message does): while posting, the callback
    // only records the completion and finishPost releases the request and the slot.
    bool posting;
    bool completedWhilePosting;
  };
  struct PeerError {
    UcxTransport* transport;
    int peer;
  };

  UcxTransport() = default;
  // Binds `req` to a new slot and fills the UCX request parameters (callback left to the caller).
  Slot* track(int peer, size_t bytes, Request* req, ucp_request_param_t* p);
  Result finishPost(ucs_status_ptr_t sp, Slot* slot, const char* what, int peer);
  static void onSend(void* request, ucs_status_t status, void* userData);
  static void onRecv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                     void* userData);
  static void onPeerError(void* arg, ucp_ep_h ep, ucs_status_t status);
  // `received`: the bytes a receive got (a receive of a different size fails as a mismatch);
  // kNotReceive for sends and for releases that carry no message.
  static constexpr size_t kNotReceive = SIZE_MAX;
  static void complete(Slot* slot, void* request, ucs_status_t status,
                       size_t received = kNotReceive);
  // Cancelled requests UCX has not finished yet (sends and matched receives it cannot cancel).
  bool anyCancelledInFlight() const;
  // Progresses until no cancelled request is in flight or `deadline` passes.
  void progressCancelledUntil(std::chrono::steady_clock::time_point deadline);
  // Closes the endpoint to `peer` at once, failing everything still in flight on it.
  void forceClose(int peer, int waitMs);

  Result connectEndpoints(const std::vector<std::string>& peerAddresses,
                          const std::vector<char>& peerErrors, int myRank);

  ucp_context_h context_ = nullptr;
  bool carriesCuda_ = false;
  unsigned memKinds_ = kHostMemory;
  bool deviceRoutes_ = true;     // ZCOLL_DEVICE_TRANSPORT is not staged
  std::vector<char> hasAddress_;  // per rank (learn)
  bool tcpEager_ = false;
  ucp_worker_h worker_ = nullptr;
  std::string address_;
  int eventFd_ = -1;  // the worker's wakeup fd (UCP_FEATURE_WAKEUP), -1 if unavailable
  std::vector<ucp_ep_h> eps_;
  std::vector<PeerError> peerErrorArgs_;
  std::unordered_set<Slot*> slots_;
  std::vector<char> failed_;  // per peer
  bool closing_ = false;
};

}  // namespace zcoll
