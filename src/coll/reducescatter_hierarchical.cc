// Hierarchical reduce-scatter (several nodes with the same number of ranks each, N nodes of L):
//   stage A (inside the node, direct): local member j gets, from every other member of its
//            node, that member's pieces of the chunks j's rail owns (chunk members[m][j] for
//            every node m) and reduces them in local order 0..L-1 into the node's partials: N
//            chunks in the accumulator type (fp32 for 16-bit floats).
//   stage B (between nodes, a ring over the rail): the rail reduce-scatters those partials in
//            the accumulator type, so that the member on node m ends with chunk members[m][j],
//            its own, reduced over every rank, rounded once to the data type at the end (Avg
//            divides by the world size there).
//   Pipelined in slices of the chunks (about 1 MiB each, at most 16): stage B of slice k goes
//   over the network while stage A reduces slice k+1.
//   A node's link carries L * (N-1) chunks of partials out, where the flat ring's carries W-1
//   (2 vs 3 at 2 nodes x 2 ranks). The price: partials in the accumulator type on the wire for
//   16-bit data (ZCOLL_REDUCE_PARTIALS does not apply) and one more local pass over the data,
//   which is why it pays only on slow links and is an option, not the default (registry.cc).
//   The order is fixed (local order, then the ring over nodes), so results are identical run to
//   run, though not the flat ring's bits. One node, or nodes of different sizes: the flat ring.
#include "coll/coll.h"
#include "exec/reduce_kernels.h"

namespace zcoll {

namespace {

struct Call {
  const NodeLayout& lay;
  const char* in;
  size_t count;   // elements per chunk
  zcollDataType_t dtype;
  zcollRedOp_t op;
  size_t es, as;  // bytes of one element and of one accumulator element
  Slices cut;     // of a chunk, in elements
  size_t slices() const { return cut.count; }

  size_t first(size_t k) const { return cut.first(k); }
  size_t len(size_t k) const { return cut.len(k); }
  // Chunk owned by local member `j` of node `m`, in this rank's input.
  const char* chunk(int m, int j) const {
    return in + static_cast<size_t>(lay.members[m][j]) * count * es;
  }
};

// Stage A's messages, all posted at once, slice by slice (slice k's requests are the k-th run
// of 2 * (L-1) * N in `reqs`); `pieces` receives the other members' pieces, member j's piece of
// node m's chunk at slot(j, m).
class InsideNode {
 public:
  InsideNode(zcollComm* comm, Executor& exec, const Group& node, const Call& c, char* pieces)
      : st_(comm, exec), node_(node), c_(c), pieces_(pieces),
        perSlice_(2 * static_cast<size_t>(node.size() - 1) * c.lay.nodes),
        reqs_(perSlice_ * c.slices()) {}

  Result post() {
    const int l = node_.size(), n = c_.lay.nodes;
    for (size_t k = 0; k < c_.slices(); ++k) {
      const size_t off = c_.first(k), bytes = c_.len(k) * c_.es;
      for (int i = 1; i < l; ++i) {
        const int j = (node_.me + i) % l;
        for (int m = 0; m < n; ++m)
          ZCOLL_CHECK(st_.recv(node_.ranks[j], slot(j, m) + off * c_.es, bytes, step(k, m),
                               reqs_.next()));
      }
      for (int i = 1; i < l; ++i) {
        const int j = (node_.me + i) % l;
        for (int m = 0; m < n; ++m)
          ZCOLL_CHECK(st_.send(node_.ranks[j], c_.chunk(m, j) + off * c_.es, bytes, step(k, m),
                               reqs_.next()));
      }
    }
    return zcollSuccess;
  }

  // Waits for slice k's pieces and reduces them, in local order, into the node partials.
  Result reduceSlice(size_t k, char* partials) {
    ZCOLL_CHECK(st_.wait(reqs_.data() + k * perSlice_, perSlice_));
    const size_t off = c_.first(k), len = c_.len(k);
    Executor& ex = st_.exec();
    for (int m = 0; m < c_.lay.nodes; ++m) {
      auto from = [&](int j) {
        return (j == node_.me ? c_.chunk(m, j) : slot(j, m)) + off * c_.es;
      };
      char* acc = partials + (m * c_.count + off) * c_.as;
      ZCOLL_CHECK(ex.toAcc(acc, from(0), c_.dtype, len));
      for (int j = 1; j < node_.size(); ++j)
        ZCOLL_CHECK(ex.accumulate(acc, from(j), false, c_.dtype, c_.op, len));
    }
    return zcollSuccess;
  }

 private:
  uint32_t step(size_t k, int m) const { return static_cast<uint32_t>(k * c_.lay.nodes + m); }
  char* slot(int j, int m) const {
    const int l = node_.size();
    const size_t i = static_cast<size_t>((j - node_.me + l) % l - 1);
    return pieces_ + (i * c_.lay.nodes + m) * c_.count * c_.es;
  }

  Stage st_;
  const Group& node_;
  const Call& c_;
  char* pieces_;
  size_t perSlice_;
  RequestList reqs_;
};

// Stage B, a ring reduce-scatter of the node partials over the rail (member m = node m), one
// slice at a time: at step s member i sends its running partial of chunk i-s-1 and adds its
// own node partial to the one of chunk i-s-2 it receives, in bufs[s % 2]. A slice's first step
// is posted by start() and the rest run in finish(), so the transfer overlaps whatever the
// caller does in between. The total of this rank's chunk ends in bufs[(N-2) % 2].
class AcrossNodes {
 public:
  AcrossNodes(zcollComm* comm, Executor& exec, const Group& rail, const Call& c,
              const char* partials, char* bufs)
      : st_(comm, exec), rail_(rail), c_(c), partials_(partials), bufs_(bufs),
        reqs_(2 * static_cast<size_t>(rail.size() - 1) * c.slices()) {}

  Result start(size_t k) { return postStep(k, 0, partial(mod(rail_.me - 1), k)); }

  Result finish(size_t k) {
    const int n = rail_.size();
    for (int s = 0; s < n - 1; ++s) {
      ZCOLL_CHECK(st_.wait(reqs_.data() + (k * (n - 1) + s) * 2, 2));
      char* got = buf(s, k);
      ZCOLL_CHECK(st_.exec().accumulate(got, partial(mod(rail_.me - s - 2), k), true, c_.dtype,
                                        c_.op, c_.len(k)));
      if (s + 1 < n - 1) ZCOLL_CHECK(postStep(k, s + 1, got));
    }
    return zcollSuccess;
  }

  const char* total() const { return bufs_ + ((rail_.size() - 2) % 2) * c_.count * c_.as; }

 private:
  int mod(int i) const { return (i % rail_.size() + rail_.size()) % rail_.size(); }
  const char* partial(int chunk, size_t k) const {
    return partials_ + (chunk * c_.count + c_.first(k)) * c_.as;
  }
  char* buf(int s, size_t k) const { return bufs_ + ((s % 2) * c_.count + c_.first(k)) * c_.as; }

  Result postStep(size_t k, int s, const char* send) {
    const int n = rail_.size();
    const size_t bytes = c_.len(k) * c_.as;
    const uint32_t step = static_cast<uint32_t>(k * (n - 1) + s);
    // Requests in fixed places (k, s): slices advance out of order.
    const size_t i = (k * (n - 1) + s) * 2;
    ZCOLL_CHECK(st_.recv(rail_.at(rail_.me - 1), buf(s, k), bytes, step, reqs_.at(i)));
    return st_.send(rail_.at(rail_.me + 1), send, bytes, step, reqs_.at(i + 1));
  }

  Stage st_;
  const Group& rail_;
  const Call& c_;
  const char* partials_;
  char* bufs_;
  RequestList reqs_;
};

}  // namespace

Result reduceScatterHierarchical(zcollComm* comm, const CollArgs& a) {
  const NodeLayout& lay = comm->layout;
  if (lay.nodes == 1 || !lay.uniform()) return reduceScatterRing(comm, a);
  const size_t es = dtypeSize(a.dtype);
  // Step tags number slice * N + node (16 bits, 0xffff reserved).
  const Slices cut = makeSlices(a.count, es, 0xfffe / static_cast<size_t>(lay.nodes));
  const Call c{lay, static_cast<const char*>(a.send), a.count, a.dtype, a.op, es, accSize(a.dtype),
               cut};
  const Group node = makeGroup(comm, lay.nodeGroup(comm->rank));
  const Group rail = makeGroup(comm, lay.railGroup(comm->rank));
  const size_t n = static_cast<size_t>(lay.nodes), l = static_cast<size_t>(node.size());
  // Scratch: the received pieces, the node partials, the ring's two buffers (each region
  // 64-byte aligned for the accumulator).
  auto align = [](size_t b) { return (b + 63) / 64 * 64; };
  const size_t piecesBytes = align((l - 1) * n * c.count * es);
  const size_t partialsBytes = align(n * c.count * c.as);
  void* scratch = nullptr;
  ZCOLL_CHECK(scratchGet(comm, *a.exec, piecesBytes + partialsBytes + 2 * c.count * c.as,
                         &scratch));
  char* pieces = static_cast<char*>(scratch);
  char* partials = pieces + piecesBytes;

  InsideNode inside(comm, *a.exec, node, c, pieces);
  AcrossNodes across(comm, *a.exec, rail, c, partials, partials + partialsBytes);
  ZCOLL_CHECK(inside.post());
  for (size_t k = 0; k < c.slices(); ++k) {
    ZCOLL_CHECK(inside.reduceSlice(k, partials));
    ZCOLL_CHECK(across.start(k));
    if (k > 0) ZCOLL_CHECK(across.finish(k - 1));
  }
  ZCOLL_CHECK(across.finish(c.slices() - 1));
  return a.exec->fromAcc(a.recv, across.total(), a.dtype, a.op, comm->nranks, a.count);
}

}  // namespace zcoll
