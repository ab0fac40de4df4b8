// The peer allocations a process has mapped (DeviceIpc::map: CUDA IPC opens), one entry per
// exported allocation, whatever range of it was asked for. Two kinds of use share an entry:
//  - held: slots, windows, registrations and probes map an allocation for as long as they
//    live and unmap it when they end. Every hold is counted: two windows carved from one
//    allocation (any caching allocator hands those out) share one mapping, and the mapping is
//    closed only when the last of them lets go. A held mapping is never evicted.
//  - cached: a call's user buffer, mapped on first use and kept for later calls; the least
//    recently used one that nobody holds is closed when the table is full.
// The table only keeps the books; opening and closing (and draining copies first) is the
// DeviceIpc's. CUDA-free, so the stand-in device and the tests use the same rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <list>
#include <string>
#include <unordered_map>
#include <utility>

#include "transport/device_ipc.h"

namespace zcoll {

template <typename Mapping>
class IpcMappings {
 public:
  // The allocation a handle names: its handle bytes, its address and process in the exporter.
  static std::string keyOf(const IpcHandle& h) {
    std::string k(reinterpret_cast<const char*>(h.opaque), sizeof(h.opaque));
    k.append(reinterpret_cast<const char*>(&h.base), sizeof(h.base));
    k.append(reinterpret_cast<const char*>(&h.pid), sizeof(h.pid));
    k.append(reinterpret_cast<const char*>(&h.reserved), sizeof(h.reserved));
    k.append(reinterpret_cast<const char*>(&h.process), sizeof(h.process));
    return k;
  }

  // The mapping of h's allocation, or NULL; a find counts as a use (most recent) and, for
  // MapUse::kHeld, as one more hold.
  Mapping* find(const IpcHandle& h, MapUse use) {
    auto it = entries_.find(keyOf(h));
    if (it == entries_.end()) return nullptr;
    Entry& e = it->second;
    order_.splice(order_.begin(), order_, e.recent);
    if (use == MapUse::kHeld) ++e.holds;
    return &e.mapping;
  }
  bool contains(const IpcHandle& h) const { return entries_.count(keyOf(h)) != 0; }

  // Records a mapping just opened for h's allocation (not in the table), with one hold for
  // MapUse::kHeld.
  Mapping& add(const IpcHandle& h, const Mapping& m, MapUse use) {
    const std::string key = keyOf(h);
    order_.push_front(key);
    try {
      Entry& e = entries_[key];
      e.mapping = m;
      e.holds = use == MapUse::kHeld ? 1 : 0;
      e.recent = order_.begin();
      return e.mapping;
    } catch (...) {
      order_.pop_front();
      throw;
    }
  }

  // Lets go of one hold of h's allocation. True, with the mapping taken out into *closed, when
  // that was the last hold: the caller closes it. A mapping only cached (never held) is closed
  // at once too, as an explicit unmap asks.
  bool release(const IpcHandle& h, Mapping* closed) {
    auto it = entries_.find(keyOf(h));
    if (it == entries_.end()) return false;
    Entry& e = it->second;
    if (e.holds > 1) {
      --e.holds;
      return false;
    }
    *closed = e.mapping;
    order_.erase(e.recent);
    entries_.erase(it);
    return true;
  }

  // Takes out the least recently used mapping that nobody holds, for the caller to close; false
  // when every mapping is held (then none is evicted: held ones are bounded by their owners).
  bool takeEvictable(Mapping* out) {
    for (auto k = order_.rbegin(); k != order_.rend(); ++k) {
      auto it = entries_.find(*k);
      if (it->second.holds > 0) continue;
      *out = it->second.mapping;
      order_.erase(std::next(k).base());
      entries_.erase(it);
      return true;
    }
    return false;
  }

  // How many holds h's allocation has (0: only cached, or not mapped).
  int holds(const IpcHandle& h) const {
    auto it = entries_.find(keyOf(h));
    return it == entries_.end() ? 0 : it->second.holds;
  }
  size_t size() const { return entries_.size(); }

  // Every mapping, for closing them all; then clear().
  template <typename F>
  void forEach(F&& f) const {
    for (const auto& kv : entries_) f(kv.second.mapping);
  }
  void clear() {
    entries_.clear();
    order_.clear();
  }

 private:
  struct Entry {
    Mapping mapping{};
    int holds = 0;
    std::list<std::string>::iterator recent;
  };
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> order_;  // keys, most recently used first
};

}  // namespace zcoll
