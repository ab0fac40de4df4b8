#include "transport/cuda_ipc_peer_memory.h"

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "base/stream_holds.h"

namespace zcoll {

// ---- The transport's connect and close ----------------------------------------------------

Result CudaIpcPeerMemory::makeWindow(const char* commName, int rank) {
  if (windowRequested_ == 0 || ipc_ == nullptr) return zcollSuccess;
  return streams::whenNoneHeld(copyWaitMs_, "cuda_ipc: allocating its window", [&]() -> Result {
    void* w = nullptr;
    Result r = ipc_->allocShared(windowRequested_, &w);
    if (r == zcollSuccess) r = ipc_->exportRange(w, windowRequested_, &windowHandle_);
    if (r != zcollSuccess) {
      ZCOLL_WARN(LogSubsys::kNet, "%s rank %d: no cuda_ipc window of %zu bytes: %s", commName,
                 rank, windowRequested_, zcollGetLastError(nullptr));
      if (w != nullptr) ipc_->freeShared(w);
      windowHandle_ = IpcHandle{};
      return zcollSuccess;
    }
    window_ = w;
    windowBytes_ = windowRequested_;
    return zcollSuccess;
  });
}

void CudaIpcPeerMemory::startConnect(int nranks) {
  peerWindow_.assign(nranks, nullptr);
  peerWindowBytes_.assign(nranks, 0);
  windowMappedBy_.assign(nranks, 0);
}

std::string CudaIpcPeerMemory::offer() const {
  const uint64_t bytes = windowBytes_;
  std::string o(reinterpret_cast<const char*>(&windowHandle_), sizeof(IpcHandle));
  o.append(reinterpret_cast<const char*>(&bytes), sizeof(bytes));
  return o;
}

void CudaIpcPeerMemory::mapPeerWindow(int peer, const char* offer) {
  IpcHandle h;
  uint64_t bytes = 0;
  std::memcpy(&h, offer, sizeof(h));
  std::memcpy(&bytes, offer + sizeof(h), sizeof(bytes));
  if (h.base == 0 || bytes == 0) return;  // the peer has no window
  const void* at = nullptr;
  Result m = streams::whenNoneHeld(copyWaitMs_, "cuda_ipc: mapping a peer's window",
                                   [&] { return ipc_->map(h, &at, MapUse::kHeld); });
  if (m != zcollSuccess) {
    ZCOLL_WARN(LogSubsys::kNet, "cuda_ipc: mapping rank %d's window failed: %s", peer,
               zcollGetLastError(nullptr));
    return;
  }
  peerWindow_[peer] = static_cast<const char*>(at);
  peerWindowBytes_[peer] = bytes;
}

Result CudaIpcPeerMemory::tradeRows(const ConnectArgs& a, const std::vector<char>& trades,
                                    const std::vector<char>& agreed) {
  const int n = static_cast<int>(trades.size());
  rank_ = a.rank;
  std::string row(n, '\0');
  for (int r = 0; r < n; ++r) {
    const bool pair = r < static_cast<int>(agreed.size()) && agreed[r];
    const bool window = pair && mapsWindowOf(r) && windowMappedBy_[r];
    row[r] = static_cast<char>((pair ? kPairBit : 0) | (window ? kWindowBit : 0));
  }
  std::vector<std::string> mine(n, row), theirs;
  ZCOLL_CHECK(a.exchange(trades, static_cast<size_t>(n), mine, &theirs));
  rows_.assign(n, std::string());
  rows_[a.rank] = row;
  for (int r = 0; r < n; ++r)
    if (trades[r]) rows_[r] = theirs[r];
  return zcollSuccess;
}

void CudaIpcPeerMemory::peerMayStillMap(int peer) {
  if (peer >= 0 && static_cast<size_t>(peer) < windowMappedBy_.size() && windowMappedBy_[peer])
    windowKept_ = true;
}

void* CudaIpcPeerMemory::releaseWindow() {
  void* w = windowKept_ ? nullptr : window_;
  window_ = nullptr;
  return w;
}

// ---- PeerMemory -----------------------------------------------------------------------------

static_assert(sizeof(IpcHandle) <= sizeof(ExposedRange::handle), "a handle fits a range");

bool CudaIpcPeerMemory::pairBit(int a, int b, unsigned bit) const {
  if (a < 0 || static_cast<size_t>(a) >= rows_.size() || rows_[a].empty()) return false;
  if (b < 0 || static_cast<size_t>(b) >= rows_[a].size()) return false;
  return (static_cast<unsigned char>(rows_[a][b]) & bit) != 0;
}

bool CudaIpcPeerMemory::pairsConnected(const std::vector<int>& ranks) const {
  for (int a : ranks)
    for (int b : ranks)
      if (a != b && !pairBit(a, b, kPairBit)) return false;
  return true;
}

size_t CudaIpcPeerMemory::windowLimit(const std::vector<int>& ranks) const {
  size_t limit = windowBytes_;
  for (int a : ranks) {
    if (a == rank_) continue;
    if (static_cast<size_t>(a) >= peerWindowBytes_.size()) return 0;
    limit = std::min(limit, peerWindowBytes_[a]);
    for (int b : ranks)
      if (a != b && !pairBit(a, b, kWindowBit)) return 0;
  }
  return limit;
}

namespace {

// What a range of registered memory or of a window carries to the peers at call time: which
// registration, and where in it (the peers mapped it when it was made).
struct RegisteredRef {
  uint32_t id;
  uint32_t reserved;
  uint64_t offset;
};
static_assert(sizeof(RegisteredRef) == CudaIpcPeerMemory::kHandleBytes, "what a range carries");
constexpr uint32_t kWindowId = ~uint32_t{0};  // the rank's window (mapped at connect)

}  // namespace

const CudaIpcPeerMemory::Registration* CudaIpcPeerMemory::findRegistration(
    const std::vector<Registration>& all, uint32_t id) {
  for (const auto& r : all)
    if (r.id == id) return &r;
  return nullptr;
}

Result CudaIpcPeerMemory::expose(const void* ptr, size_t bytes, ExposedRange* out) {
  *out = ExposedRange{};
  out->addr = reinterpret_cast<uintptr_t>(ptr);
  out->bytes = bytes;
  const char* p = static_cast<const char*>(ptr);
  for (const Registration& r : registered_) {
    if (p < r.at || bytes > r.bytes || p - r.at > static_cast<ptrdiff_t>(r.bytes - bytes))
      continue;
    const RegisteredRef ref{r.id, 0, static_cast<uint64_t>(p - r.at)};
    out->mappable = 1;
    std::memcpy(out->handle, &ref, sizeof(ref));
    break;
  }
  return zcollSuccess;  // outside every registration: not mappable (nothing is opened in a call)
}

Result CudaIpcPeerMemory::map(int peer, const ExposedRange& r, bool writable, PeerView* view) {
  *view = PeerView{};
  if (!r.mappable) return zcollSuccess;
  RegisteredRef ref;
  std::memcpy(&ref, r.handle, sizeof(ref));
  const Registration* reg =
      peer >= 0 && static_cast<size_t>(peer) < peerRegistered_.size()
          ? findRegistration(peerRegistered_[peer], ref.id)
          : nullptr;
  if (reg == nullptr || ref.offset > reg->bytes || r.bytes > reg->bytes - ref.offset)
    return fail(zcollInternalError, "cuda_ipc: rank %d's range lies in no registration mapped "
                "here (registration %u, offset %llu, %llu bytes)", peer, ref.id,
                static_cast<unsigned long long>(ref.offset),
                static_cast<unsigned long long>(r.bytes));
  view->at = reg->at + ref.offset;
  // An IPC mapping is readable and writable (cudaIpcOpenMemHandle maps with both).
  if (writable) view->writable = const_cast<char*>(view->at);
  return zcollSuccess;
}

Result CudaIpcPeerMemory::registerOwn(uint32_t id, void* ptr, size_t bytes, ExposedRange* out) {
  Registration reg;
  reg.id = id;
  reg.at = static_cast<const char*>(ptr);
  reg.bytes = bytes;
  ZCOLL_CHECK(ipc_->exportRange(ptr, bytes, &reg.handle));
  registered_.push_back(reg);
  *out = ExposedRange{};
  out->addr = reinterpret_cast<uintptr_t>(ptr);
  out->bytes = bytes;
  out->mappable = 1;
  std::memcpy(out->handle, &reg.handle, sizeof(reg.handle));
  return zcollSuccess;
}

Result CudaIpcPeerMemory::registerPeer(int peer, uint32_t id, const ExposedRange& r) {
  if (!pairBit(rank_, peer, kPairBit) || !r.mappable)
    return zcollSuccess;  // not a pair of cuda_ipc, or nothing to map
  Registration reg;
  reg.id = id;
  reg.bytes = r.bytes;
  std::memcpy(&reg.handle, r.handle, sizeof(reg.handle));
  const void* at = nullptr;
  ZCOLL_CHECK(ipc_->map(reg.handle, &at, MapUse::kHeld));
  reg.at = static_cast<const char*>(at);
  if (peerRegistered_.size() < rows_.size()) peerRegistered_.resize(rows_.size());
  peerRegistered_[peer].push_back(reg);
  return zcollSuccess;
}

Result CudaIpcPeerMemory::deregister(uint32_t id) {
  auto mine = [id](const Registration& r) { return r.id == id; };
  registered_.erase(std::remove_if(registered_.begin(), registered_.end(), mine),
                    registered_.end());
  for (auto& regs : peerRegistered_) {
    for (const Registration& r : regs)
      if (r.id == id) ipc_->unmap(r.handle);
    regs.erase(std::remove_if(regs.begin(), regs.end(), mine), regs.end());
  }
  return zcollSuccess;
}

Result CudaIpcPeerMemory::read(int peer, const ExposedRange&, size_t, void*, size_t) {
  return fail(zcollUnsupported, "cuda_ipc: rank %d's device memory can only be read mapped",
              peer);
}

Result CudaIpcPeerMemory::ownWindow(size_t bytes, char** base, ExposedRange* ref) {
  if (window_ == nullptr || bytes > windowBytes_)
    return fail(zcollInternalError, "cuda_ipc: a window of %zu bytes asked for, %zu made at init",
                bytes, windowBytes_);
  *base = static_cast<char*>(window_);
  *ref = ExposedRange{};
  ref->addr = reinterpret_cast<uintptr_t>(window_);
  ref->bytes = windowBytes_;
  ref->mappable = 1;
  const RegisteredRef window{kWindowId, 0, 0};
  std::memcpy(ref->handle, &window, sizeof(window));
  return zcollSuccess;
}

Result CudaIpcPeerMemory::mapWindow(int peer, const ExposedRange&, const char** base) {
  if (peer < 0 || static_cast<size_t>(peer) >= peerWindow_.size() || !peerWindow_[peer])
    return fail(zcollInternalError, "cuda_ipc: rank %d's window is not mapped here", peer);
  *base = peerWindow_[peer];
  return zcollSuccess;
}

}  // namespace zcoll
