// cuda_ipc's peer memory (transport/peer_memory.h over DeviceIpc): this rank's window and the
// caller buffers registered with the communicator, as the node peers cuda_ipc connected map
// them, and which pairs of the node are connected and map each other's windows. A call opens no
// mapping, it only reads: the window is mapped at connect, a registration when it is made. A
// range travels as {registration, offset}. Nothing is read unmapped.
//
// CudaIpcTransport (transport/cuda_ipc_transport.h) owns it and fills it in its connect rounds,
// beside its own slots: round 2 carries this rank's window offer (makeWindow, offer) with the
// slots' handle and maps the peers' (mapPeerWindow); round 3 says whether each peer mapped it
// (setWindowMappedBy); round 4 trades the node's rows of pairs and windows (tradeRows), so every
// rank of a group answers pairsConnected and windowLimit alike. At close the transport says which
// peers may still map the window (peerMayStillMap) and frees what releaseWindow gives back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "transport/device_ipc.h"
#include "transport/peer_memory.h"
#include "transport/transport.h"

namespace zcoll {

class CudaIpcPeerMemory final : public PeerMemory {
 public:
  // The used part of a range's handle: {registration id, reserved, offset} (RegisteredRef in
  // cuda_ipc_peer_memory.cc; docs/ZEROPP.md's device byte formulas: tests/zeropp_doc_test.cc).
  static constexpr size_t kHandleBytes = 16;
  // What round 2 carries to each pair: the window's handle and its bytes.
  static constexpr size_t kOfferBytes = sizeof(IpcHandle) + sizeof(uint64_t);

  // `ipc`: the transport's (null when cuda_ipc is off on this rank); `windowBytes`: the window
  // made once this rank has a pair (ZCOLL_DEVICE_WINDOW_BYTES; 0: none); `copyWaitMs`: the
  // longest wait for no stream to be held before allocating or mapping.
  CudaIpcPeerMemory(DeviceIpc* ipc, size_t windowBytes, int copyWaitMs)
      : ipc_(ipc), windowRequested_(windowBytes), copyWaitMs_(copyWaitMs) {}

  // ---- The transport's connect ----
  // Forgets any earlier connect's peers: room for `nranks` ranks, none mapped yet.
  void startConnect(int nranks);
  // Allocates and exports this rank's window while no stream is held. One that cannot be made
  // is no error (warned): the peers then exchange what they would have read.
  Result makeWindow(const char* commName, int rank);
  // The window's offer for round 2 (kOfferBytes; zero without a window).
  std::string offer() const;
  // Maps `peer`'s window from its offer (a failure is warned: that window is then not used).
  void mapPeerWindow(int peer, const char* offer);
  bool mapsWindowOf(int peer) const {
    return peer >= 0 && static_cast<size_t>(peer) < peerWindow_.size() && peerWindow_[peer];
  }
  // Round 3: whether `peer` mapped this rank's window.
  void setWindowMappedBy(int peer, bool mapped) { windowMappedBy_[peer] = mapped; }
  // Round 4: this rank's row (for each rank: connected, i.e. `agreed`, and each mapping the
  // other's window) to every rank it traded verdicts with (`trades`), and theirs back.
  Result tradeRows(const ConnectArgs& a, const std::vector<char>& trades,
                   const std::vector<char>& agreed);

  // ---- The transport's close ----
  // `peer` did not say it closed its mappings: if it mapped the window, the window stays.
  void peerMayStillMap(int peer);
  // The window's block for the transport to free (null without one, or when a peer may still
  // map it: then it is never freed).
  void* releaseWindow();

  // ---- PeerMemory ----
  bool exposesCallerBuffers() const override { return !registered_.empty(); }
  bool readsUnmapped() const override { return false; }
  size_t handleBytes() const override { return kHandleBytes; }
  bool registersCallerMemory() const override { return true; }
  Result registerOwn(uint32_t id, void* ptr, size_t bytes, ExposedRange* out) override;
  Result registerPeer(int peer, uint32_t id, const ExposedRange& r) override;
  Result deregister(uint32_t id) override;
  bool pairsConnected(const std::vector<int>& ranks) const override;
  size_t windowLimit(const std::vector<int>& ranks) const override;
  Result expose(const void* ptr, size_t bytes, ExposedRange* out) override;
  Result map(int peer, const ExposedRange& r, bool writable, PeerView* view) override;
  Result read(int peer, const ExposedRange& r, size_t offset, void* dst, size_t bytes) override;
  Result ownWindow(size_t bytes, char** base, ExposedRange* ref) override;
  Result mapWindow(int peer, const ExposedRange& ref, const char** base) override;

 private:
  // Registered caller memory: this rank's, and each peer's as mapped here (by registration id).
  struct Registration {
    uint32_t id = 0;
    const char* at = nullptr;  // here
    size_t bytes = 0;
    IpcHandle handle{};        // the owner's export (closed by deregister, on the peers)
  };
  static const Registration* findRegistration(const std::vector<Registration>& all, uint32_t id);
  // Per rank of the node known here (this one and every rank it traded with), its row: for each
  // rank, kPairBit when the two are connected, kWindowBit when each maps the other's window.
  static constexpr unsigned kPairBit = 1, kWindowBit = 2;
  bool pairBit(int a, int b, unsigned bit) const;

  DeviceIpc* ipc_;
  size_t windowRequested_;
  int copyWaitMs_;
  int rank_ = -1;
  // The window: this rank's, and each peer's as mapped here.
  void* window_ = nullptr;
  size_t windowBytes_ = 0;
  IpcHandle windowHandle_{};
  bool windowKept_ = false;              // a peer may still map it: never freed
  std::vector<const char*> peerWindow_;  // per rank, null where not mapped
  std::vector<size_t> peerWindowBytes_;
  std::vector<char> windowMappedBy_;     // per rank: that rank mapped this rank's window
  std::vector<std::string> rows_;
  std::vector<Registration> registered_;
  std::vector<std::vector<Registration>> peerRegistered_;  // per rank
};

}  // namespace zcoll
