// Standard collectives over real transports, ranks as threads: every algorithm forced, rank
// counts {1,2,3,4,6,8}, emulated layouts (1 node, 2x2, 3x2, cyclic placement), counts
// {0, 1, odd, large}, every dtype and op, in place and out of place. Results must be exact.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

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
  for (const char* algo : {"ring", "direct"}) {
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
  for (const char* algo : {"ring", "direct"}) {
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
  for (const char* algo : {"ring", "recursive_doubling"}) {
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
  for (const char* algo : {"binomial", "pipelined_ring"}) {
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
