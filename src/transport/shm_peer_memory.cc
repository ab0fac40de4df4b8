#include "transport/shm_peer_memory.h"

#include <cstring>

#include "transport/host_memory.h"
#include "transport/shm_segment.h"

namespace zcoll {

static_assert(sizeof(shm::RegionRef) <= sizeof(ExposedRange::handle), "a region fits a range");
static_assert(sizeof(shm::WindowRef) <= sizeof(ExposedRange::handle), "a window fits a range");

void ShmPeerMemory::startConnect(int myRank, int nranks) {
  myRank_ = myRank;
  peers_ = std::vector<Peer>(static_cast<size_t>(nranks));
}

void ShmPeerMemory::addPeer(int peer, int pid) {
  peers_[peer].pid = pid;
  peers_[peer].connected = true;
}

Result ShmPeerMemory::checkConnected(int peer) const {
  if (peer < 0 || peer >= static_cast<int>(peers_.size()) || !peers_[peer].connected)
    return fail(zcollInternalError, "shm: rank %d is not connected", peer);
  return zcollSuccess;
}

bool ShmPeerMemory::pairsConnected(const std::vector<int>& ranks) const {
  for (int r : ranks)
    if (r != myRank_ && (r < 0 || static_cast<size_t>(r) >= peers_.size() ||
                         !peers_[r].connected))
      return false;
  return true;
}

Result ShmPeerMemory::expose(const void* ptr, size_t bytes, ExposedRange* out) {
  *out = ExposedRange{};
  out->addr = reinterpret_cast<uintptr_t>(ptr);
  out->bytes = bytes;
  const shm::RegionRef region = shm::findHostMemory(ptr, bytes);
  out->mappable = region.fd >= 0 && bytes > 0;
  std::memcpy(out->handle, &region, sizeof(region));
  return zcollSuccess;
}

Result ShmPeerMemory::map(int peer, const ExposedRange& r, bool writable, PeerView* view) {
  *view = PeerView{};
  ZCOLL_CHECK(checkConnected(peer));
  shm::RegionRef region;
  std::memcpy(&region, r.handle, sizeof(region));
  if (!r.mappable) {
    peerRegions_.noteFrees(peers_[peer].pid, region.frees);
    return zcollSuccess;
  }
  std::shared_ptr<const shm::PeerMapping> held;
  ZCOLL_CHECK(peerRegions_.view(peers_[peer].pid, region, r.bytes, writable, &held, &view->at));
  if (writable) view->writable = held->writableBase() + (view->at - held->base());
  view->hold = std::move(held);
  return zcollSuccess;
}

Result ShmPeerMemory::read(int peer, const ExposedRange& r, size_t offset, void* dst,
                           size_t bytes) {
  ZCOLL_CHECK(checkConnected(peer));
  return shm::readProcess(peers_[peer].pid, r.addr + offset, dst, bytes);
}

Result ShmPeerMemory::ownWindow(size_t bytes, char** base, ExposedRange* ref) {
  ZCOLL_CHECK(window_.reserve(bytes));
  *base = window_.base();
  const shm::WindowRef w = window_.ref();
  *ref = ExposedRange{};
  ref->addr = reinterpret_cast<uintptr_t>(*base);
  ref->bytes = w.bytes;
  ref->mappable = 1;
  std::memcpy(ref->handle, &w, sizeof(w));
  return zcollSuccess;
}

Result ShmPeerMemory::mapWindow(int peer, const ExposedRange& ref, const char** base) {
  ZCOLL_CHECK(checkConnected(peer));
  shm::WindowRef w;
  std::memcpy(&w, ref.handle, sizeof(w));
  return peers_[peer].window.map(peers_[peer].pid, w, base);
}

}  // namespace zcoll
