#include "transport/ucx_transport.h"

#include <dirent.h>
#include <poll.h>
#include <sys/statvfs.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "base/log.h"

namespace zcoll {

namespace {

Result ucxFail(ucs_status_t st, const char* what) {
  return fail(zcollSystemError, "UCX %s failed: %s", what, ucs_status_string(st));
}

// Free space in /dev/shm, for the messages ("unknown" where it cannot be read).
std::string devShmFree() {
  struct statvfs v;
  if (statvfs("/dev/shm", &v) != 0) return "unknown";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%llu KiB",
                static_cast<unsigned long long>(v.f_bavail) * v.f_frsize / 1024);
  return buf;
}

// Whether this machine has an RDMA device (InfiniBand, RoCE, iWARP): UCX's network transports
// are then more than TCP.
bool machineHasRdma() {
  DIR* d = opendir("/sys/class/infiniband");
  if (d == nullptr) return false;
  bool any = false;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') any = true;
  closedir(d);
  return any;
}

}  // namespace

ucs_status_t UcxTransport::configure(ucp_config_t* config, const char* tls) const {
  ucs_status_t st = UCS_OK;
  if (tls != nullptr) st = ucp_config_modify(config, "TLS", tls);
  if (st == UCS_OK && tcpEager_) st = ucp_config_modify(config, "RNDV_THRESH", "inf");
  return st;
}

ucs_status_t UcxTransport::open(const std::string& commName, const char* tls, const char** step) {
  ucp_config_t* config = nullptr;
  *step = "config read";
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return st;
  st = configure(config, tls);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.name = commName.c_str();
  if (st == UCS_OK) {
    *step = "init";
    st = ucp_init(&params, config, &context_);
  }
  ucp_config_release(config);
  if (st != UCS_OK) return st;
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  *step = "context query";
  st = ucp_context_query(context_, &attr);
  if (st != UCS_OK) return st;
  carriesCuda_ = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_EVENTS;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  wp.events = UCP_WAKEUP_TAG_SEND | UCP_WAKEUP_TAG_RECV;
  *step = "worker create";
  return ucp_worker_create(context_, &wp, &worker_);
}

void UcxTransport::release() {
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
  worker_ = nullptr;
  context_ = nullptr;
}

Result UcxTransport::create(const std::string& commName, bool carriesNodePeers,
                           UcxTransport** out) {
  *out = nullptr;
  std::unique_ptr<UcxTransport> t(new UcxTransport());
  t->tcpEager_ = !carriesNodePeers && std::getenv("UCX_RNDV_THRESH") == nullptr &&
                 !machineHasRdma();
  if (t->tcpEager_)
    ZCOLL_INFO(LogSubsys::kNet, "UCX: TCP only (no RDMA device), node peers on shm: large "
               "messages go eagerly (UCX_RNDV_THRESH=inf; set UCX_RNDV_THRESH to choose)");
  const char* userTls = std::getenv("UCX_TLS");
  const char* step = "";
  ucs_status_t st = t->open(commName, nullptr, &step);
  if (st != UCS_OK && userTls == nullptr) {
    ZCOLL_WARN(LogSubsys::kNet, "UCX %s failed (%s) with its shared-memory transports "
               "(/dev/shm: %s free); starting it without them (UCX_TLS=^sm): node peers go over "
               "zcoll's shm transport (memfd, not /dev/shm) or UCX's network transports. A "
               "larger /dev/shm (docker run --shm-size) gives UCX its shared memory back",
               step, ucs_status_string(st), devShmFree().c_str());
    t->release();
    st = t->open(commName, "^sm", &step);
  }
  if (st != UCS_OK)
    return fail(zcollSystemError, "UCX %s failed: %s (/dev/shm: %s free; UCX_TLS=%s)", step,
                ucs_status_string(st), devShmFree().c_str(),
                userTls ? userTls : "^sm, after the default failed");
  if (ucp_worker_get_efd(t->worker_, &t->eventFd_) != UCS_OK) t->eventFd_ = -1;

  ucp_address_t* addr = nullptr;
  size_t len = 0;
  st = ucp_worker_get_address(t->worker_, &addr, &len);
  if (st != UCS_OK) return ucxFail(st, "worker address");
  t->address_.assign(reinterpret_cast<const char*>(addr), len);
  ucp_worker_release_address(t->worker_, addr);
  *out = t.release();
  return zcollSuccess;
}

Result UcxTransport::createFor(const TransportSettings& s, const std::vector<Transport*>& above,
                              std::unique_ptr<Transport>* out) {
  out->reset();
  if (!s.forced.empty() && s.forced != "ucx") return zcollSuccess;
  bool nodePeersElsewhere = false;
  for (const Transport* t : above) nodePeersElsewhere = nodePeersElsewhere || t->sharesNodeMemory();
  UcxTransport* ucx = nullptr;
  ZCOLL_CHECK(create(s.commName, !nodePeersElsewhere, &ucx));
  out->reset(ucx);
  ucx->deviceRoutes_ = s.deviceMode != "staged";
  if (ucx->carriesCuda_ && s.device.present && std::strcmp(s.device.kind, "cuda") == 0)
    ucx->memKinds_ |= kDeviceMemory;
  return zcollSuccess;
}

Result UcxTransport::learn(const std::vector<std::string>& addresses) {
  hasAddress_.assign(addresses.size(), 0);
  for (size_t r = 0; r < addresses.size(); ++r) hasAddress_[r] = !addresses[r].empty();
  return zcollSuccess;
}

UcxTransport::~UcxTransport() {
  closeEndpoints(0);
  for (Slot* s : slots_) {
    if (s->ucxRequest != nullptr) {
      ucp_request_cancel(worker_, s->ucxRequest);
      ucp_request_free(s->ucxRequest);
    }
    delete s;
  }
  release();
}

bool UcxTransport::canConnect(const PeerReach& peer, std::string* why) const {
  if (peer.device) {
    const bool both = peer.mine != nullptr && peer.theirs != nullptr && peer.mine->netDirect &&
                      peer.theirs->netDirect;
    if (!deviceRoutes_) *why = "ZCOLL_DEVICE_TRANSPORT=staged";
    else if (peer.self) *why = "not used for this rank";
    else if (peer.hostRoute != this) *why = "the peer's host route is not ucx";
    else if (!both) *why = "UCX does not carry CUDA memory on both ranks";
    else return *why = "GPUDirect: UCX carries CUDA memory on both ranks", true;
    return false;
  }
  if (peer.self) {
    *why = "not used for this rank";
    return false;
  }
  const bool hasAddress = peer.rank >= 0 && static_cast<size_t>(peer.rank) < hasAddress_.size() &&
                          hasAddress_[peer.rank];
  if (!hasAddress) {
    *why = "the peer has no UCX address";
    return false;
  }
  if (!peer.sameMachine)
    *why = "another machine: UCX's network transports, TCP or InfiniBand; failures reported";
  else if (peer.sameNode)
    *why = "same machine: UCX shared memory unless UCX_TLS excludes it";
  else
    *why = "same machine, another emulated node: UCX shared memory or loopback, as UCX_TLS allows";
  return true;
}

Result UcxTransport::connect(const ConnectArgs& args) {
  if (args.kind != kHostMemory) return zcollSuccess;
  const size_t n = args.addresses.size();
  std::vector<std::string> routed(n);
  std::vector<char> peerErrors(n);
  for (int r : args.peers) routed[r] = args.addresses[r];
  for (size_t r = 0; r < n; ++r) peerErrors[r] = !args.sameMachine[r];
  return connectEndpoints(routed, peerErrors, args.rank);
}

Result UcxTransport::connectEndpoints(const std::vector<std::string>& peerAddresses,
                                      const std::vector<char>& peerErrors, int myRank) {
  eps_.assign(peerAddresses.size(), nullptr);
  failed_.assign(peerAddresses.size(), 0);
  peerErrorArgs_.resize(peerAddresses.size());
  for (size_t p = 0; p < peerAddresses.size(); ++p) {
    if (static_cast<int>(p) == myRank || peerAddresses[p].empty()) continue;
    peerErrorArgs_[p] = PeerError{this, static_cast<int>(p)};
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(peerAddresses[p].data());
    ep.err_mode = peerErrors[p] ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    ep.err_handler.cb = &UcxTransport::onPeerError;
    ep.err_handler.arg = &peerErrorArgs_[p];
    ucs_status_t st = ucp_ep_create(worker_, &ep, &eps_[p]);
    if (st != UCS_OK) return ucxFail(st, "endpoint create");
  }
  return zcollSuccess;
}

void UcxTransport::onPeerError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* pe = static_cast<PeerError*>(arg);
  UcxTransport* t = pe->transport;
  if (t->closing_) return;
  t->failed_[pe->peer] = 1;
  ZCOLL_INFO(LogSubsys::kNet, "UCX reports peer %d failed: %s", pe->peer,
             ucs_status_string(status));
}

void UcxTransport::complete(Slot* slot, void* request, ucs_status_t status, size_t received) {
  if (Request* req = slot->owner) {
    if (status == UCS_OK && received != kNotReceive && received != req->bytes) {
      req->status = fail(zcollInvalidUsage,
                         "a message of %zu bytes from rank %d matched a receive of %zu bytes "
                         "(mismatched counts or types across ranks?)",
                         received, req->peer, req->bytes);
    } else if (status == UCS_OK) {
      req->status = zcollSuccess;
    } else if (status == UCS_ERR_MESSAGE_TRUNCATED) {
      req->status = fail(zcollInvalidUsage,
                         "a message from rank %d is larger than the %zu bytes posted for it "
                         "(mismatched counts or types across ranks?)",
                         req->peer, req->bytes);
    } else {
      req->status = fail(zcollRemoteError, "transfer with rank %d failed: %s", req->peer,
                         ucs_status_string(status));
    }
    req->impl = nullptr;
    req->done = 1;
  }
  if (slot->posting) {  // inside the post call: finishPost releases the request and the slot
    slot->owner = nullptr;
    slot->completedWhilePosting = true;
    return;
  }
  if (request != nullptr) ucp_request_free(request);
  slot->transport->slots_.erase(slot);
  delete slot;
}

void UcxTransport::onSend(void* request, ucs_status_t status, void* userData) {
  complete(static_cast<Slot*>(userData), request, status);
}

void UcxTransport::onRecv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                          void* userData) {
  complete(static_cast<Slot*>(userData), request, status,
           status == UCS_OK && info != nullptr ? info->length : kNotReceive);
}

Result UcxTransport::finishPost(ucs_status_ptr_t sp, Slot* slot, const char* what, int peer) {
  slot->posting = false;
  if (slot->completedWhilePosting) {  // the callback ran inside the post call
    complete(slot, UCS_PTR_IS_PTR(sp) ? sp : nullptr, UCS_OK);
    return zcollSuccess;
  }
  if (UCS_PTR_IS_ERR(sp)) {
    ucs_status_t st = UCS_PTR_STATUS(sp);
    slot->owner = nullptr;
    complete(slot, nullptr, UCS_OK);
    return fail(zcollRemoteError, "UCX %s to rank %d failed: %s", what, peer,
                ucs_status_string(st));
  }
  if (sp == nullptr) {  // completed in place; UCX will not call back
    complete(slot, nullptr, UCS_OK);
    return zcollSuccess;
  }
  slot->ucxRequest = sp;
  slot->owner->impl = slot;
  return zcollSuccess;
}

UcxTransport::Slot* UcxTransport::track(int peer, size_t bytes, Request* req,
                                        ucp_request_param_t* p) {
  req->transport = this;
  req->peer = peer;
  req->bytes = bytes;
  auto* slot = new Slot{this, req, nullptr, peer, true, false};
  slots_.insert(slot);
  *p = ucp_request_param_t{};
  p->op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p->user_data = slot;
  return slot;
}

Result UcxTransport::postSend(int peer, const void* buf, size_t bytes, uint64_t tag,
                              Request* req) {
  if (peer < 0 || peer >= static_cast<int>(eps_.size()) || eps_[peer] == nullptr)
    return fail(zcollInternalError, "no UCX endpoint to rank %d", peer);
  ucp_request_param_t p;
  Slot* slot = track(peer, bytes, req, &p);
  p.cb.send = &UcxTransport::onSend;
  return finishPost(ucp_tag_send_nbx(eps_[peer], buf, bytes, tag, &p), slot, "send", peer);
}

Result UcxTransport::postRecv(int peer, void* buf, size_t bytes, uint64_t tag, Request* req) {
  ucp_request_param_t p;
  Slot* slot = track(peer, bytes, req, &p);
  p.cb.recv = &UcxTransport::onRecv;
  // Always through the callback, which reports the received length: UCX 1.13's immediate
  // completion leaves recv_info unfilled, so a short message would go unnoticed there.
  p.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  return finishPost(ucp_tag_recv_nbx(worker_, buf, bytes, tag, ~uint64_t{0}, &p), slot,
                    "receive", peer);
}

Result UcxTransport::progress() {
  while (ucp_worker_progress(worker_) != 0) {
  }
  return zcollSuccess;
}

bool UcxTransport::waitForEvents(int timeoutMs) {
  if (eventFd_ < 0) return false;
  ucs_status_t st = ucp_worker_arm(worker_);
  if (st == UCS_ERR_BUSY) return true;  // events already pending: progress instead
  if (st != UCS_OK) return false;
  pollfd p{eventFd_, POLLIN, 0};
  ::poll(&p, 1, timeoutMs);
  return true;
}

void UcxTransport::cancel(Request* req) {
  auto* slot = static_cast<Slot*>(req->impl);
  if (slot == nullptr || req->complete()) return;
  slot->owner = nullptr;  // the callback now only frees the slot
  req->impl = nullptr;
  ucp_request_cancel(worker_, slot->ucxRequest);
}

bool UcxTransport::anyCancelledInFlight() const {
  for (const Slot* s : slots_)
    if (s->owner == nullptr && s->ucxRequest != nullptr) return true;
  return false;
}

void UcxTransport::progressCancelledUntil(std::chrono::steady_clock::time_point deadline) {
  while (anyCancelledInFlight() && std::chrono::steady_clock::now() < deadline) {
    ucp_worker_progress(worker_);
    std::this_thread::yield();
  }
}

// UCX documents a forced close as completing at once (UCP_EP_CLOSE_FLAG_FORCE "forces immediate
// completion"); the wait for it is bounded all the same, as closeEndpoints' is, so that it can
// never hold a failing call (and the shrink its caller starts next) past `waitMs`.
void UcxTransport::forceClose(int peer, int waitMs) {
  ucp_ep_h& ep = eps_[peer];
  if (ep == nullptr) return;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t sp = ucp_ep_close_nbx(ep, &p);
  ep = nullptr;
  if (sp == nullptr || UCS_PTR_IS_ERR(sp)) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs);
  while (ucp_request_check_status(sp) == UCS_INPROGRESS &&
         std::chrono::steady_clock::now() < deadline)
    ucp_worker_progress(worker_);
  if (ucp_request_check_status(sp) == UCS_INPROGRESS) ucp_request_cancel(worker_, sp);
  ucp_request_free(sp);
}

// UCX cannot cancel a send, or a receive whose data is already moving: such a request would go
// on reading or writing the caller's buffer after the failing call returned. Give it `waitMs`
// to finish, then close its peer's endpoint, which fails it at once.
void UcxTransport::settleCancelled(int waitMs) {
  if (!anyCancelledInFlight()) return;
  progressCancelledUntil(std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs));
  std::vector<int> stuck;
  for (const Slot* s : slots_)
    if (s->owner == nullptr && s->ucxRequest != nullptr) stuck.push_back(s->peer);
  for (int peer : stuck) {
    ZCOLL_INFO(LogSubsys::kNet, "a cancelled transfer with rank %d did not stop: closing the "
               "connection to it", peer);
    forceClose(peer, waitMs);
  }
  progressCancelledUntil(std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs));
}

void UcxTransport::closeEndpoints(int waitMs) {
  closing_ = true;
  std::vector<ucs_status_ptr_t> pending;
  for (ucp_ep_h& ep : eps_) {
    if (ep == nullptr) continue;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = waitMs > 0 ? 0 : UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t sp = ucp_ep_close_nbx(ep, &p);
    if (sp != nullptr && !UCS_PTR_IS_ERR(sp)) pending.push_back(sp);
    ep = nullptr;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs);
  for (ucs_status_ptr_t sp : pending) {
    while (ucp_request_check_status(sp) == UCS_INPROGRESS &&
           std::chrono::steady_clock::now() < deadline) {
      ucp_worker_progress(worker_);
      std::this_thread::yield();
    }
    if (ucp_request_check_status(sp) == UCS_INPROGRESS) ucp_request_cancel(worker_, sp);
    ucp_request_free(sp);
  }
}

}  // namespace zcoll
