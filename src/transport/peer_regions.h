// Node peers' registered host memory (zcollMemAllocHost, transport/host_memory.h), mapped once
// and kept across calls.
//
// Why: mapping a peer's buffer for each call and unmapping it at the end made every page read a
// first-touch fault and every call end in a TLB shootdown; reading through a kept mapping was
// 1.76-2.65x faster at 1-64 MiB (issue 32; perf/LOG.md, "mapped once").
//
// The rules that keep it safe:
// - A mapping is of a whole allocation, found by (owner pid, generation): the owner numbers its
//   allocations and never reuses a number, so a descriptor number reused by a later allocation
//   is never read through the earlier one's mapping.
// - The owner counts its frees and sends the count with every buffer it publishes. A peer that
//   sees a count it has not seen drops its mappings of that owner's other allocations (any of
//   them may be freed); they are mapped again on their next use. So a freed allocation's pages
//   stay reserved only until that peer's next call that reads the owner in place (an
//   ordinary buffer's publication carries the count too), or the communicator's end (at most
//   kMaxPerPeer mappings per owner meanwhile).
// - A peer never reads memory its owner has freed and reused: its mapping holds the memfd's own
//   pages, which the owner's later allocations (new memfds) never share. A free racing a peer's
//   call (a caller's error, as for any buffer in use) leaves that peer reading the freed
//   buffer's last bytes, never another allocation's and never an unmapped page.
// - A view lives while the Mapping handed out lives: dropping it from the cache while a call
//   reads it unmaps nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "base/result.h"
#include "transport/host_memory.h"

namespace zcoll::shm {

// One peer allocation mapped here (read-only, or writable when asked), unmapped when the last
// holder lets it go.
class PeerMapping {
 public:
  PeerMapping(void* base, size_t length, bool writable)
      : base_(base), length_(length), writable_(writable) {}
  ~PeerMapping();
  PeerMapping(const PeerMapping&) = delete;
  PeerMapping& operator=(const PeerMapping&) = delete;

  const char* base() const { return static_cast<const char*>(base_); }
  // The same bytes for writing, or nullptr when mapped read-only.
  char* writableBase() const { return writable_ ? static_cast<char*>(base_) : nullptr; }
  size_t length() const { return length_; }

 private:
  void* base_;
  size_t length_;
  bool writable_;
};

class PeerRegions {
 public:
  static constexpr size_t kMaxPerPeer = 64;  // beyond: the peer's least recently used go

  // `bytes` (> 0) at ref.offset of process pid's allocation `ref`: *at = their first byte here,
  // valid while *held lives. Maps the allocation on its first use; later calls reuse it. With
  // `writable`, (*held)->writableBase() is set too (a read-only mapping kept so far is
  // replaced: algorithms that write into peers' outputs ask for it).
  Result view(int pid, const RegionRef& ref, size_t bytes, bool writable,
              std::shared_ptr<const PeerMapping>* held, const char** at);
  // Owner pid published an ordinary buffer with its count of frees: drops what may be freed.
  void noteFrees(int pid, uint64_t frees);
  // Mappings kept now (of every peer), and how many were made since this object was made.
  size_t kept() const;
  uint64_t mapped() const;

 private:
  struct Kept {
    std::shared_ptr<const PeerMapping> mapping;
    uint64_t lastUse = 0;
  };
  struct Owner {
    uint64_t frees = 0;
    std::map<uint64_t, Kept> byGeneration;
  };

  static Result mapWhole(int pid, const RegionRef& ref, bool writable,
                         std::shared_ptr<const PeerMapping>* out);
  static void forgetFreed(Owner& owner, uint64_t frees, uint64_t keep);
  void evictOldest(Owner& owner);

  mutable std::mutex mu_;
  std::unordered_map<int, Owner> owners_;  // by pid
  uint64_t uses_ = 0;
  uint64_t mapped_ = 0;
};

}  // namespace zcoll::shm
