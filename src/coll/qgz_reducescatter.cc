// qgZ hierarchical reduce-scatter (ZeRO++ gradients), W = N*L ranks, uniform node layout.
//   x_s = input of rank s; chunk t = x_s[t*C, (t+1)*C) is destined to rank t; (m, j) = the rank
//   with local index j on node m (from the layout, never rank arithmetic). Per pipeline piece P
//   (a block-aligned range of every chunk):
//   1. q_s[j][m] = Qa(x_s[chunk (m, j)][P])            fused quantize + swizzle, slot j*N + m
//   2. intra all-to-all over the node: rank (n, j) gets q_s[j][*] from every local s
//   3. p_n[m]    = Qe(sum over s of node n, by local index, of D(q_s[j][m]))   (fp32 sum)
//   4. inter all-to-all over the rail of local index j: p_n[m] goes to node m
//   5. out[P]    = scale * sum over nodes n, in node order, of D(p_n[me])   (scale 1 or 1/W)
//   The inter hop of piece k (4) is in flight while piece k+1 runs 1-3; its sum (5) follows.
//   Qa uses the intra bits, except when L = 1 (2-3 vanish, 1 writes Qe straight into the inter
//   send buffer). N = 1: 3-4 vanish and 5 sums the intra pieces (intra bits).
//   Read in place (shmRead, every node peer reached through one peer memory for the call's kind:
//   coll/in_place.h): step 1 writes into this rank's window (host: a memfd; device: a cuda_ipc
//   block: transport/peer_memory.h), alternating between two regions by piece, and
//   step 2 only trades window references; step 3 reads the peers' pieces straight from their
//   mapped windows. A peer's reference for piece k+1 also says it has finished reading piece k,
//   so a region is rewritten (piece k+2) only once every peer is done with it; a last token
//   releases the windows. No quantized byte is copied inside the node; the bits are the same.
#include <algorithm>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "coll/feedback.h"
#include "coll/qgz.h"
#include "coll/in_place.h"
#include "quant/quant.h"

namespace zcoll {
namespace {

struct Plan {
  int rank = 0;
  int w = 1, nodes = 1, local = 1;  // W, N, L
  int node = 0, lidx = 0;           // this rank's node and local index
  size_t count = 0, pieceElems = 0, es = 0;
  int pieces = 1;
  PeerMemory* peers = nullptr;  // the intra hop reads the local peers' windows through it
  bool inPlace = false;         // (set: peers is)
  quant::QuantParams first, intra, inter;  // first: the bits of step 1
  Group nodeG, railG;                      // index p = local index p; index m = node m
  std::vector<int> slotOf;                 // rank t -> slot of its chunk in step 1's output
  float scale = 1.0f;
  bool feedback = false;  // error feedback (QgzArgs' residuals)
};

struct Piece {
  int k;
  size_t k0, n;  // element range [k0, k0+n) of every chunk
  size_t q1;     // bytes of one step-1 slot
  size_t q2;     // bytes of one inter-hop slot
};

// Scratch, one region: step 1's output (W slots), the intra receive area (W slots), and the
// inter send/receive areas (N slots each), double buffered across pieces. Read in place, step
// 1's output is two regions of this rank's window (by piece parity) and there is no receive area.
struct Buffers {
  char* swz[2] = {nullptr, nullptr};
  char* intraRecv = nullptr;
  char* interSend[2] = {nullptr, nullptr};
  char* interRecv[2] = {nullptr, nullptr};
  float* tmp = nullptr;             // error feedback: one piece in fp32 (coll/feedback.h)
  ExposedRange ref;                 // read in place: this rank's window
  std::vector<const char*> window;  // read in place: local peer l's window, mapped here
};

Plan makePlan(zcollComm* comm, const QgzArgs& a) {
  const NodeLayout& lay = comm->layout;
  Plan p;
  p.rank = comm->rank;
  p.w = comm->nranks;
  p.nodes = lay.nodes;
  p.local = lay.localSize(comm->rank);
  p.node = lay.nodeOf[comm->rank];
  p.lidx = lay.localOf[comm->rank];
  p.count = a.count;
  p.es = dtypeSize(a.dtype);
  p.intra = a.quant.intra;
  p.inter = a.quant.inter;
  p.first = (p.local == 1 && p.nodes > 1) ? p.inter : p.intra;
  p.nodeG = makeGroup(comm, lay.nodeGroup(comm->rank));
  p.pieceElems = qgzPieceElems(a.count, a.pipelineDepth, p.first.blockSize);
  if (a.shmRead && p.local > 1) p.peers = peerMemoryOf(comm, p.nodeG, a.exec->memKind());
  // Step 1's two regions must fit the windows the node's ranks can offer (a device's is fixed
  // at init): the same answer on every rank of the node.
  const size_t regions = 2 * quant::quantizedBytes(p.pieceElems, p.first) * p.w;
  if (p.peers != nullptr && regions > p.peers->windowLimit(p.nodeG.ranks)) p.peers = nullptr;
  p.inPlace = p.peers != nullptr;
  p.pieces = static_cast<int>((a.count + p.pieceElems - 1) / p.pieceElems);
  p.railG = makeGroup(comm, lay.railGroup(comm->rank));
  p.slotOf.resize(p.w);
  for (int t = 0; t < p.w; ++t) p.slotOf[t] = lay.localOf[t] * p.nodes + lay.nodeOf[t];
  p.scale = qgzOutScale(a.op, p.w);
  p.feedback = a.firstResidual != nullptr;
  return p;
}

Piece pieceOf(const Plan& p, int k) {
  Piece pc;
  pc.k = k;
  pc.k0 = size_t(k) * p.pieceElems;
  pc.n = std::min(p.pieceElems, p.count - pc.k0);
  pc.q1 = quant::quantizedBytes(pc.n, p.first);
  pc.q2 = quant::quantizedBytes(pc.n, p.inter);
  return pc;
}

Result carve(zcollComm* comm, const Executor& exec, const Plan& p, Buffers* b) {
  const size_t q1 = quant::quantizedBytes(p.pieceElems, p.first) * p.w;
  const size_t q2 = quant::quantizedBytes(p.pieceElems, p.inter) * p.nodes;
  const size_t intra = p.inPlace ? 0 : 2 * q1;  // read in place: step 1 writes the window
  const size_t tmp = p.feedback ? p.pieceElems * sizeof(float) : 0;
  void* base = nullptr;
  ZCOLL_CHECK(scratchGet(comm, exec, intra + 4 * q2 + tmp, &base));
  char* c = static_cast<char*>(base);
  if (p.feedback) b->tmp = reinterpret_cast<float*>(c + intra + 4 * q2);  // q's: multiples of 16
  for (int i = 0; i < 2; ++i) {
    b->interSend[i] = c + intra + i * q2;
    b->interRecv[i] = c + intra + (2 + i) * q2;
  }
  if (!p.inPlace) {
    b->swz[0] = b->swz[1] = c;
    b->intraRecv = c + q1;
    return zcollSuccess;
  }
  char* window = nullptr;
  ZCOLL_CHECK(p.peers->ownWindow(2 * q1, &window, &b->ref));  // failed: the peers are told
  b->swz[0] = window;
  b->swz[1] = window + q1;
  return zcollSuccess;
}

// Step 1: chunk t's piece, quantized, into slot slotOf[t] of `out`. One piece: a single fused
// call with destOrder; several, or with error feedback: chunk by chunk (the piece is strided in
// the input).
Result quantizePiece(const Plan& p, const QgzArgs& a, const Buffers& b, const Piece& pc,
                     char* out) {
  quant::QuantParams qp = p.first;
  const int me = p.rank;
  if (p.feedback) {
    const char* in = static_cast<const char*>(a.send);
    for (int t = 0; t < p.w; ++t) {
      const size_t at = t * p.count + pc.k0;
      qp.elementOffset = qgzFirstIndex(p.w, p.count, me, t) + pc.k0;
      ZCOLL_CHECK(quantizeWithFeedback(*a.exec, in + at * p.es, a.dtype, pc.n, qp,
                                       a.firstResidual + at, b.tmp, out + p.slotOf[t] * pc.q1));
    }
    return zcollSuccess;
  }
  if (pc.n == p.count) {
    qp.elementOffset = qgzFirstIndex(p.w, p.count, me, 0);
    return a.exec->quantizeChunks(a.send, a.dtype, p.count, p.w, p.slotOf.data(), qp, out);
  }
  const char* in = static_cast<const char*>(a.send);
  for (int t = 0; t < p.w; ++t) {
    qp.elementOffset = qgzFirstIndex(p.w, p.count, me, t) + pc.k0;
    ZCOLL_CHECK(a.exec->quantizeChunks(in + (t * p.count + pc.k0) * p.es, a.dtype, pc.n, 1,
                                       nullptr, qp, out + p.slotOf[t] * pc.q1));
  }
  return zcollSuccess;
}

// Where step 1 of piece pc writes this rank's W slots.
char* ownSlots(const Buffers& b, const Piece& pc) { return b.swz[pc.k % 2]; }

// The N step-1 slots local peer `l` made for this rank: in its window (read in place), else as
// received (this rank's own: in place).
const char* localGroup(const Plan& p, const Buffers& b, const Piece& pc, int l) {
  const size_t group = size_t(p.nodes) * pc.q1;
  if (p.inPlace) return b.window[l] + (b.swz[pc.k % 2] - b.swz[0]) + p.lidx * group;
  return (l == p.lidx ? ownSlots(b, pc) : b.intraRecv) + l * group;
}

// Step 2: group l of the step-1 output to local peer l, for every l (blocking); read in place,
// only the window references travel (and this piece's pieces are counted as read).
Result intraHop(const Stage& st, const Plan& p, Buffers& b, const Piece& pc) {
  const size_t bytes = size_t(p.nodes) * pc.q1;
  if (p.inPlace) {
    ZCOLL_CHECK(shareWindows(st, p.nodeG, *p.peers, b.ref, b.swz[0], 0, &b.window));
    countPeerReads(st.comm(), p.nodeG, bytes);
    return zcollSuccess;
  }
  RequestList reqs(2 * p.local);
  for (int i = 1; i < p.local; ++i) {
    int to = (p.lidx + i) % p.local, from = (p.lidx - i + p.local) % p.local;
    ZCOLL_CHECK(st.recv(p.nodeG.ranks[from], b.intraRecv + from * bytes, bytes, 0, reqs.next()));
    ZCOLL_CHECK(st.send(p.nodeG.ranks[to], ownSlots(b, pc) + to * bytes, bytes, 0, reqs.next()));
  }
  return st.wait(reqs);
}

// Step 3: for each node m, the local sum of the pieces for rank (m, lidx), requantized (with
// error feedback: plus the residual this rank kept for that partial).
Result requantPiece(Executor& exec, const Plan& p, const QgzArgs& a, const Buffers& b,
                    const Piece& pc, char* interSend) {
  std::vector<const void*> chunks(p.local);
  quant::QuantParams out = p.inter;
  for (int m = 0; m < p.nodes; ++m) {
    for (int l = 0; l < p.local; ++l) chunks[l] = localGroup(p, b, pc, l) + m * pc.q1;
    out.elementOffset = qgzPartialIndex(p.w, p.count, p.node, p.railG.ranks[m]) + pc.k0;
    if (a.partialResidual != nullptr)
      ZCOLL_CHECK(requantWithFeedback(exec, chunks.data(), p.local, pc.n, p.intra, out,
                                      a.partialResidual + m * p.count + pc.k0, b.tmp,
                                      interSend + m * pc.q2));
    else
      ZCOLL_CHECK(exec.dequantReduceRequant(chunks.data(), p.local, pc.n, p.intra, out,
                                            interSend + m * pc.q2));
  }
  return zcollSuccess;
}

// Step 4 (posted, not waited): slot m of `send` to node m's rail member.
Result postInter(const Stage& st, const Plan& p, const Piece& pc, const char* send, char* recv,
                 RequestList* reqs) {
  for (int i = 1; i < p.nodes; ++i) {
    int to = (p.node + i) % p.nodes, from = (p.node - i + p.nodes) % p.nodes;
    ZCOLL_CHECK(st.recv(p.railG.ranks[from], recv + from * pc.q2, pc.q2, 0, reqs->next()));
    ZCOLL_CHECK(st.send(p.railG.ranks[to], send + to * pc.q2, pc.q2, 0, reqs->next()));
  }
  return zcollSuccess;
}

// Step 5: the N partials (own one in place), summed by node, scaled, into out[k0..].
Result finishInter(const Plan& p, const QgzArgs& a, const Piece& pc, const char* send,
                   const char* recv) {
  std::vector<const void*> chunks(p.nodes);
  for (int m = 0; m < p.nodes; ++m) chunks[m] = (m == p.node ? send : recv) + m * pc.q2;
  return a.exec->dequantizeSum(chunks.data(), p.nodes, pc.n, p.inter, p.scale,
                               static_cast<char*>(a.recv) + pc.k0 * p.es, a.dtype);
}

// N = 1: the L intra pieces (slot 0 of each group) summed straight into the output.
Result finishIntra(const Plan& p, const QgzArgs& a, const Buffers& b, const Piece& pc) {
  std::vector<const void*> chunks(p.local);
  for (int l = 0; l < p.local; ++l) chunks[l] = localGroup(p, b, pc, l);
  return a.exec->dequantizeSum(chunks.data(), p.local, pc.n, p.intra, p.scale,
                               static_cast<char*>(a.recv) + pc.k0 * p.es, a.dtype);
}

// Steps 1-3 of one piece; the result (N slots) is in `interSend`, or in the output when N = 1.
Result firstHop(const Stage& st, const Plan& p, const QgzArgs& a, Buffers& b, const Piece& pc,
                char* interSend) {
  const bool direct = p.local == 1 && p.nodes > 1;
  ZCOLL_CHECK(quantizePiece(p, a, b, pc, direct ? interSend : ownSlots(b, pc)));
  if (direct) return zcollSuccess;
  if (p.local > 1) ZCOLL_CHECK(intraHop(st, p, b, pc));
  if (p.nodes == 1) return finishIntra(p, a, b, pc);
  return requantPiece(*a.exec, p, a, b, pc, interSend);
}

}  // namespace

Result qgzHierarchical(zcollComm* comm, const QgzArgs& a) {
  const Plan p = makePlan(comm, a);
  Buffers b;
  ZCOLL_CHECK(carve(comm, *a.exec, p, &b));
  // Every rank constructs the same stages in the same order: (intra, inter) per piece.
  std::vector<Stage> stages;
  stages.reserve(2 * p.pieces);
  for (int k = 0; k < 2 * p.pieces; ++k) stages.emplace_back(comm, *a.exec);
  RequestList inflight[2] = {RequestList(2 * p.nodes), RequestList(2 * p.nodes)};
  for (int k = 0; k <= p.pieces; ++k) {
    if (k < p.pieces) {
      const Piece pc = pieceOf(p, k);
      ZCOLL_CHECK(firstHop(stages[2 * k], p, a, b, pc, b.interSend[k % 2]));
      if (p.nodes > 1)
        ZCOLL_CHECK(postInter(stages[2 * k + 1], p, pc, b.interSend[k % 2], b.interRecv[k % 2],
                              &inflight[k % 2]));
    }
    if (k == 0 || p.nodes == 1) continue;
    // Piece k-1's inter hop overlapped piece k's first hop; finish it now.
    const int j = (k - 1) % 2;
    ZCOLL_CHECK(stages[2 * k - 1].wait(inflight[j]));
    inflight[j].clear();
    ZCOLL_CHECK(finishInter(p, a, pieceOf(p, k - 1), b.interSend[j], b.interRecv[j]));
  }
  // Built either way, so nodes that differ in reading in place keep one stage sequence.
  Stage release(comm, *a.exec);
  return p.inPlace ? tradeTokens(release, p.nodeG, 0) : zcollSuccess;  // windows free again
}

// Registry entry (registry.cc): the two hops need the same number of ranks on every node.
Result quantizedReduceScatterTwoHop(zcollComm* comm, const CollArgs& a) {
  if (!comm->layout.uniform())
    return fail(zcollInvalidUsage, "the two_hop quantized reduce-scatter needs the same number "
                "of ranks on every node (this communicator's nodes differ): use flat");
  return qgzHierarchical(comm, qgzArgsOf(a));
}

Result quantizedReduceScatterTwoHopShmRead(zcollComm* comm, const CollArgs& a) {
  if (!comm->layout.uniform()) return quantizedReduceScatterTwoHop(comm, a);  // its message
  QgzArgs args = qgzArgsOf(a);
  args.shmRead = true;
  return qgzHierarchical(comm, args);
}

bool qgzPicksTwoHop(const zcollComm* comm, size_t bytes, MemKind mem) {
  const Algorithm* algo = nullptr;
  return selectAlgorithm(comm, CollKind::kQuantizedReduceScatter, bytes, mem, &algo) ==
             zcollSuccess &&
         std::string(algo->name).rfind("two_hop", 0) == 0;
}

}  // namespace zcoll
