// Standard collectives over real transports, ranks as threads: every algorithm forced, rank
// counts {1,2,3,4,6,8}, emulated layouts (1 node, 2x2, 3x2, cyclic placement), counts
// {0, 1, odd, large}, every dtype and op, in place and out of place. Results must be exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "coll/collectives.h"
#include "support/ranks.h"
#include "support/values.h"

using namespace zcoll::test;

namespace {

const RankSetup kCases[] = {
    {1, 1, Placement::kContiguous}, {2, 1, Placement::kContiguous},
    {3, 1, Placement::kContiguous}, {4, 2, Placement::kContiguous},
    {6, 3, Placement::kContiguous}, {6, 2, Placement::kCyclic},
    {8, 2, Placement::kContiguous},
};

class Collectives : public LayoutTest {
 protected:
  // Counts to try: zero, one, odd, and a large one (about 1M elements in all).
  std::vector<size_t> counts(bool withLarge) const {
    std::vector<size_t> c = {0, 1, 13};
    if (withLarge) c.push_back((1u << 20) / GetParam().nranks + 3);
    return c;
  }
};

// Fills `buf` (n elements) with inputValue for `rank` starting at element index `first`.
void fillInput(void* buf, zcollDataType_t t, zcollRedOp_t op, int rank, int nranks, size_t n,
               size_t first = 0) {
  for (size_t i = 0; i < n; ++i) setElement(buf, t, i, inputValue(t, op, rank, nranks, first + i));
}

// Counts elements of `got` that differ from `want` in their bytes.
size_t countWrong(const void* got, const void* want, zcollDataType_t t, size_t n) {
  size_t es = typeSize(t), wrong = 0;
  for (size_t i = 0; i < n; ++i)
    wrong += std::memcmp(static_cast<const char*>(got) + i * es,
                         static_cast<const char*>(want) + i * es, es) != 0;
  return wrong;
}

// ---- All-gather -----------------------------------------------------------------------------

void checkAllGather(const RankSetup& s, int rank, zcollComm_t comm, zcollDataType_t t,
                    size_t count, bool inPlace) {
  {
    const int w = s.nranks;
    auto recv = makeBuffer(t, count * w);
    std::vector<unsigned char> own = makeBuffer(t, count);
    void* send = own.data();
    if (inPlace) send = recv.data() + rank * count * typeSize(t);
    fillInput(send, t, zcollSum, rank, w, count, rank * count);
    ZCOLL_EXPECT_OK(comm, zcollAllGather(send, recv.data(), count, t, comm, nullptr));
    auto want = makeBuffer(t, count * w);
    for (int r = 0; r < w; ++r)
      fillInput(want.data() + r * count * typeSize(t), t, zcollSum, r, w, count, r * count);
    EXPECT_EQ(countWrong(recv.data(), want.data(), t, count * w), 0u)
        << "rank " << rank << " count " << count << " in place " << inPlace;
    EXPECT_TRUE(guardIntact(recv) && guardIntact(own)) << "wrote past a buffer, rank " << rank;
  }
}

TEST_P(Collectives, AllGatherEveryAlgorithm) {
  for (const std::string& name : zcoll::algorithmNames(zcoll::CollKind::kAllGather)) {
    const char* algo = name.c_str();
    ScopedEnv force("ZCOLL_ALGO_ALLGATHER", algo);
    runRanks(setup(), [&](int rank, zcollComm_t comm) {
      for (zcollDataType_t t : {zcollInt8, zcollFloat16, zcollFloat32, zcollFloat64})
        for (size_t count : counts(t == zcollFloat32))
          for (bool inPlace : {false, true}) {
            SCOPED_TRACE(std::string(algo) + " dtype " + std::to_string(t));
            checkAllGather(setup(), rank, comm, t, count, inPlace);
          }
    });
  }
}

// ---- Reduce-scatter -------------------------------------------------------------------------

void checkReduceScatter(const RankSetup& s, int rank, zcollComm_t comm, zcollDataType_t t,
                        zcollRedOp_t op, size_t count, bool inPlace) {
  {
    const int w = s.nranks;
    auto send = makeBuffer(t, count * w);
    fillInput(send.data(), t, op, rank, w, count * w);
    auto out = makeBuffer(t, count);
    void* recv = inPlace ? send.data() + rank * count * typeSize(t) : out.data();
    ZCOLL_EXPECT_OK(comm, zcollReduceScatter(send.data(), recv, count, t, op, comm, nullptr));
    auto want = makeBuffer(t, count);
    for (size_t i = 0; i < count; ++i)
      setElement(want.data(), t, i, expectedValue(t, op, w, rank * count + i));
    EXPECT_EQ(countWrong(recv, want.data(), t, count), 0u)
        << "rank " << rank << " op " << op << " count " << count << " in place " << inPlace;
    EXPECT_TRUE(guardIntact(send) && guardIntact(out)) << "wrote past a buffer, rank " << rank;
  }
}

TEST_P(Collectives, ReduceScatterEveryAlgorithmTypeAndOp) {
  // shm_read reads the peers in place where every peer is on shm (one node), else runs the ring;
  // hierarchical runs on several equal nodes (2x2, 3x2, cyclic 6 on 2, 4x2), else the ring.
  for (const std::string& name : zcoll::algorithmNames(zcoll::CollKind::kReduceScatter)) {
    const char* algo = name.c_str();
    ScopedEnv force("ZCOLL_ALGO_REDUCESCATTER", algo);
    runRanks(setup(), [&](int rank, zcollComm_t comm) {
      for (zcollDataType_t t : kAllTypes)
        for (zcollRedOp_t op : kAllOps)
          for (size_t count : counts(op == zcollSum && (t == zcollFloat32 || t == zcollBfloat16)))
            for (bool inPlace : {false, true}) {
              if (count == 0 && inPlace) continue;
              SCOPED_TRACE(std::string(algo) + " dtype " + std::to_string(t));
              checkReduceScatter(setup(), rank, comm, t, op, count, inPlace);
            }
    });
  }
}

// The hierarchical algorithms pipeline in slices of about 1 MiB (at most 16): shards and chunks
// of 3 uneven slices, and of 16 full ones plus a remainder spread over them.
TEST_P(Collectives, HierarchicalInSlices) {
  ScopedEnv ag("ZCOLL_ALGO_ALLGATHER", "hierarchical");
  ScopedEnv rs("ZCOLL_ALGO_REDUCESCATTER", "hierarchical");
  const size_t counts[] = {700001, (17u << 20) / 4 + 5};  // float elements per rank
  runRanks(setup(), [&](int rank, zcollComm_t comm) {
    for (size_t count : counts) {
      if (count > 1000000 && setup().nranks > 4) continue;  // keep memory and time small
      for (bool inPlace : {false, true}) {
        SCOPED_TRACE("count " + std::to_string(count));
        checkAllGather(setup(), rank, comm, zcollFloat32, count, inPlace);
        checkReduceScatter(setup(), rank, comm, zcollFloat32, zcollSum, count, inPlace);
      }
    }
  });
}

// ---- All-reduce -----------------------------------------------------------------------------

void checkAllReduce(const RankSetup& s, int rank, zcollComm_t comm, zcollDataType_t t,
                    zcollRedOp_t op, size_t count, bool inPlace) {
  {
    const int w = s.nranks;
    auto send = makeBuffer(t, count);
    fillInput(send.data(), t, op, rank, w, count);
    auto out = makeBuffer(t, count);
    void* recv = inPlace ? send.data() : out.data();
    ZCOLL_EXPECT_OK(comm, zcollAllReduce(send.data(), recv, count, t, op, comm, nullptr));
    auto want = makeBuffer(t, count);
    for (size_t i = 0; i < count; ++i) setElement(want.data(), t, i, expectedValue(t, op, w, i));
    EXPECT_EQ(countWrong(recv, want.data(), t, count), 0u)
        << "rank " << rank << " op " << op << " count " << count << " in place " << inPlace;
    EXPECT_TRUE(guardIntact(send) && guardIntact(out)) << "wrote past a buffer, rank " << rank;
  }
}

TEST_P(Collectives, AllReduceEveryAlgorithmTypeAndOp) {
  // shm_read reads the peers in place where every peer is on shm (one node), else runs the ring.
  for (const std::string& name : zcoll::algorithmNames(zcoll::CollKind::kAllReduce)) {
    const char* algo = name.c_str();
    ScopedEnv force("ZCOLL_ALGO_ALLREDUCE", algo);
    runRanks(setup(), [&](int rank, zcollComm_t comm) {
      for (zcollDataType_t t : kAllTypes)
        for (zcollRedOp_t op : kAllOps)
          for (size_t count : counts(op == zcollSum && t == zcollFloat16))
            for (bool inPlace : {false, true}) {
              SCOPED_TRACE(std::string(algo) + " dtype " + std::to_string(t));
              checkAllReduce(setup(), rank, comm, t, op, count, inPlace);
            }
    });
  }
}

// ---- All-to-all, broadcast, barrier ---------------------------------------------------------

TEST_P(Collectives, AllToAll) {
  const RankSetup s = setup();
  runRanks(s, [&](int rank, zcollComm_t comm) {
    for (size_t count : counts(true)) {
      const int w = s.nranks;
      std::vector<int32_t> send(count * w), recv(count * w, -1);
      for (int p = 0; p < w; ++p)
        for (size_t i = 0; i < count; ++i) send[p * count + i] = rank * 100000 + p * 1000 + int(i % 1000);
      ZCOLL_EXPECT_OK(comm, zcollAllToAll(send.data(), recv.data(), count, zcollInt32, comm, nullptr));
      size_t wrong = 0;
      for (int p = 0; p < w; ++p)
        for (size_t i = 0; i < count; ++i)
          wrong += recv[p * count + i] != p * 100000 + rank * 1000 + int(i % 1000);
      EXPECT_EQ(wrong, 0u) << "rank " << rank << " count " << count;
    }
  });
}

TEST_P(Collectives, BroadcastEveryAlgorithmAndRoot) {
  const RankSetup s = setup();
  for (const std::string& name : zcoll::algorithmNames(zcoll::CollKind::kBroadcast)) {
    const char* algo = name.c_str();
    ScopedEnv force("ZCOLL_ALGO_BROADCAST", algo);
    runRanks(s, [&](int rank, zcollComm_t comm) {
      for (int root : {0, s.nranks - 1})
        for (size_t count : {size_t{0}, size_t{1}, size_t{333333}})
          for (bool inPlace : {false, true}) {
            std::vector<float> send(count), recv(count, -1.f);
            for (size_t i = 0; i < count; ++i) send[i] = float(inputValue(zcollFloat32, zcollSum, root, s.nranks, i));
            if (inPlace && rank == root) recv = send;
            const void* src = inPlace ? recv.data() : send.data();
            ZCOLL_EXPECT_OK(comm, zcollBroadcast(src, recv.data(), count, zcollFloat32, root,
                                                 comm, nullptr));
            size_t wrong = 0;
            for (size_t i = 0; i < count; ++i)
              wrong += recv[i] != float(inputValue(zcollFloat32, zcollSum, root, s.nranks, i));
            EXPECT_EQ(wrong, 0u) << algo << " root " << root << " rank " << rank;
          }
    });
  }
}

// ---- Reduce, gather, scatter, all-to-all-v ----------------------------------------------------

TEST_P(Collectives, ReduceEveryTypeOpAndRoot) {
  const RankSetup s = setup();
  runRanks(s, [&](int rank, zcollComm_t comm) {
    const int w = s.nranks;
    for (int root : {0, w - 1})
      for (zcollDataType_t t : kAllTypes)
        for (zcollRedOp_t op : kAllOps)
          for (size_t count : counts(op == zcollSum && t == zcollBfloat16))
            for (bool inPlace : {false, true}) {
              auto send = makeBuffer(t, count);
              fillInput(send.data(), t, op, rank, w, count);
              auto out = makeBuffer(t, count);
              std::vector<unsigned char> before = out;
              void* recv = inPlace ? send.data() : out.data();
              ZCOLL_EXPECT_OK(comm, zcollReduce(send.data(), rank == root ? recv : nullptr, count,
                                                t, op, root, comm, nullptr));
              if (rank != root) {  // nothing written off the root
                if (!inPlace) {
                  EXPECT_EQ(out, before) << "rank " << rank;
                }
                continue;
              }
              auto want = makeBuffer(t, count);
              for (size_t i = 0; i < count; ++i) setElement(want.data(), t, i, expectedValue(t, op, w, i));
              EXPECT_EQ(countWrong(recv, want.data(), t, count), 0u)
                  << "root " << root << " dtype " << t << " op " << op << " count " << count
                  << " in place " << inPlace;
              EXPECT_TRUE(guardIntact(send) && guardIntact(out));
            }
  });
}

// The promise in zcoll.h: the root gets the bits of the ring all-reduce, also where 16-bit
// rounding makes the order matter.
TEST_P(Collectives, ReduceMatchesRingAllReduceBits) {
  const RankSetup s = setup();
  ScopedEnv force("ZCOLL_ALGO_ALLREDUCE", "ring");
  runRanks(s, [&](int rank, zcollComm_t comm) {
    for (zcollDataType_t t : {zcollFloat16, zcollBfloat16, zcollFloat32}) {
      const size_t count = 10007;
      auto send = makeBuffer(t, count);
      for (size_t i = 0; i < count; ++i)
        setElement(send.data(), t, i, std::ldexp(double((i * 2654435761u + rank * 97u) % 10007), -7) - 39.0);
      auto all = makeBuffer(t, count), one = makeBuffer(t, count);
      ZCOLL_EXPECT_OK(comm, zcollAllReduce(send.data(), all.data(), count, t, zcollSum, comm, nullptr));
      const int root = s.nranks / 2;
      ZCOLL_EXPECT_OK(comm, zcollReduce(send.data(), one.data(), count, t, zcollSum, root, comm, nullptr));
      if (rank == root) {
        EXPECT_EQ(countWrong(one.data(), all.data(), t, count), 0u) << "dtype " << t;
      }
    }
  });
}

TEST_P(Collectives, GatherAndScatterEveryRoot) {
  const RankSetup s = setup();
  runRanks(s, [&](int rank, zcollComm_t comm) {
    const int w = s.nranks;
    for (int root = 0; root < w; ++root)
      for (size_t count : counts(root == 0))
        for (bool inPlace : {false, true}) {
          const zcollDataType_t t = zcollFloat64;
          const size_t es = typeSize(t);
          // Gather: rank r's block r lands at r * count on the root.
          auto all = makeBuffer(t, count * w), own = makeBuffer(t, count);
          void* send = inPlace && rank == root ? all.data() + root * count * es : own.data();
          fillInput(send, t, zcollSum, rank, w, count, rank * count);
          ZCOLL_EXPECT_OK(comm, zcollGather(send, rank == root ? all.data() : nullptr, count, t,
                                            root, comm, nullptr));
          if (rank == root) {
            auto want = makeBuffer(t, count * w);
            for (int r = 0; r < w; ++r)
              fillInput(want.data() + r * count * es, t, zcollSum, r, w, count, r * count);
            EXPECT_EQ(countWrong(all.data(), want.data(), t, count * w), 0u)
                << "gather root " << root << " count " << count << " in place " << inPlace;
          }
          // Scatter: block r of the root's buffer lands on rank r.
          auto src = makeBuffer(t, count * w), mine = makeBuffer(t, count);
          if (rank == root)
            for (int r = 0; r < w; ++r)
              fillInput(src.data() + r * count * es, t, zcollSum, r + w, w, count, r * count);
          void* recv = inPlace && rank == root ? src.data() + root * count * es : mine.data();
          ZCOLL_EXPECT_OK(comm, zcollScatter(rank == root ? src.data() : nullptr, recv, count, t,
                                             root, comm, nullptr));
          auto want = makeBuffer(t, count);
          fillInput(want.data(), t, zcollSum, rank + w, w, count, rank * count);
          EXPECT_EQ(countWrong(recv, want.data(), t, count), 0u)
              << "scatter root " << root << " rank " << rank << " count " << count;
          EXPECT_TRUE(guardIntact(all) && guardIntact(own) && guardIntact(src) && guardIntact(mine));
        }
  });
}

// Elements rank `from` sends rank `to` in round k (zeros included), and the gap left before
// each receive block (so displacements are not just prefix sums).
size_t vCount(int from, int to, int k) { return size_t((from * 7 + to * 3 + k * 5) % 9) * (k == 2 ? 4099 : 1); }

TEST_P(Collectives, AllToAllvUnevenCountsAndDisplacements) {
  const RankSetup s = setup();
  runRanks(s, [&](int rank, zcollComm_t comm) {
    const int w = s.nranks;
    for (int k = 0; k < 3; ++k) {
      std::vector<size_t> sc(w), sd(w), rc(w), rd(w);
      size_t sendTotal = 0, recvTotal = 0;
      for (int p = w - 1; p >= 0; --p) {  // send blocks in reverse rank order
        sc[p] = vCount(rank, p, k);
        sd[p] = sendTotal;
        sendTotal += sc[p];
      }
      for (int p = 0; p < w; ++p) {
        rc[p] = vCount(p, rank, k);
        rd[p] = recvTotal + 3;  // a 3-element gap before each block
        recvTotal += rc[p] + 3;
      }
      std::vector<int64_t> send(sendTotal), recv(recvTotal, -1);
      for (int p = 0; p < w; ++p)
        for (size_t i = 0; i < sc[p]; ++i) send[sd[p] + i] = int64_t(rank) << 40 | int64_t(p) << 20 | int64_t(i);
      ZCOLL_EXPECT_OK(comm, zcollAllToAllv(send.data(), sc.data(), sd.data(), recv.data(),
                                           rc.data(), rd.data(), zcollInt64, comm, nullptr));
      size_t wrong = 0;
      for (int p = 0; p < w; ++p) {
        for (size_t i = 0; i < rc[p]; ++i)
          wrong += recv[rd[p] + i] != (int64_t(p) << 40 | int64_t(rank) << 20 | int64_t(i));
        for (size_t g = rd[p] - 3; g < rd[p]; ++g) wrong += recv[g] != -1;  // gaps untouched
      }
      EXPECT_EQ(wrong, 0u) << "rank " << rank << " round " << k;
    }
  });
}

TEST_P(Collectives, BarrierAndQueries) {
  const RankSetup s = setup();
  runRanks(s, [&](int rank, zcollComm_t comm) {
    for (int i = 0; i < 3; ++i) ZCOLL_EXPECT_OK(comm, zcollBarrier(comm, nullptr));
    int count = 0, me = -1, nodes = 0, node = -1, local = -1, localSize = 0;
    ZCOLL_EXPECT_OK(comm, zcollCommCount(comm, &count));
    ZCOLL_EXPECT_OK(comm, zcollCommUserRank(comm, &me));
    ZCOLL_EXPECT_OK(comm, zcollCommNodeCount(comm, &nodes));
    ZCOLL_EXPECT_OK(comm, zcollCommNodeRank(comm, &node));
    ZCOLL_EXPECT_OK(comm, zcollCommLocalRank(comm, &local));
    ZCOLL_EXPECT_OK(comm, zcollCommLocalSize(comm, &localSize));
    EXPECT_EQ(count, s.nranks);
    EXPECT_EQ(me, rank);
    EXPECT_EQ(nodes, s.nodes);
    // Nodes are numbered by their lowest rank; local index counts lower ranks on my node.
    int expectLocal = 0, expectSize = 0;
    for (int r = 0; r < s.nranks; ++r) {
      if (nodeOfRank(s, r) != nodeOfRank(s, rank)) continue;
      ++expectSize;
      if (r < rank) ++expectLocal;
    }
    EXPECT_EQ(local, expectLocal);
    EXPECT_EQ(localSize, expectSize);
    EXPECT_EQ(node, nodeOfRank(s, rank));  // both placements number nodes by lowest rank
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, Collectives, testing::ValuesIn(kCases), layoutName);


// The inputs expose misplaced data: a block shifted by 9 elements (the old generator's period)
// or another rank's block in its place never compares equal, for any dtype and op.
TEST(TestInputs, ShiftedOrSwappedBlocksAreDetected) {
  const int w = 6;
  const size_t count = 40;
  for (zcollDataType_t t : kAllTypes)
    for (zcollRedOp_t op : kAllOps) {
      auto want = makeBuffer(t, count * w), shifted = makeBuffer(t, count * w),
           swapped = makeBuffer(t, count * w);
      for (int r = 0; r < w; ++r)
        for (size_t i = 0; i < count; ++i) {
          size_t at = r * count + i;
          setElement(want.data(), t, at, inputValue(t, op, r, w, at));
          setElement(shifted.data(), t, at, inputValue(t, op, r, w, r == 1 ? at + 9 : at));
          setElement(swapped.data(), t, at, inputValue(t, op, r == 0 ? 3 : r, w, at));
        }
      EXPECT_GT(countWrong(shifted.data(), want.data(), t, count * w), 0u) << t << " op " << op;
      EXPECT_GT(countWrong(swapped.data(), want.data(), t, count * w), 0u) << t << " op " << op;
      want[want.size() - 1] ^= 1;
      EXPECT_FALSE(guardIntact(want));
    }
}

}  // namespace
