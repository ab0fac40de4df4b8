// Unit tests of internals: fp16/bf16 conversions, node layout, tags, parameters, reductions,
// per-peer transport selection, the flight recorder's dump paths, communicator ids and the
// keying of zcoll_info --status by them.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/dtype.h"
#include "base/params.h"
#include "base/tags.h"
#include "coll/coll.h"
#include "coll/collectives.h"
#include "core/comm.h"
#include "core/flight_recorder.h"
#include "core/live_comms.h"
#include "core/status_service.h"
#include "exec/reduce_kernels.h"
#include "topology/node_layout.h"
#include "transport/addresses.h"
#include "transport/block_pool.h"
#include "transport/registry.h"
#include "transport/select.h"
#include "transport/self_transport.h"
#include "status_query.h"
#include "support/ranks.h"

using namespace zcoll;

TEST(Dtype, HalfRoundTripsEveryValue) {
  for (uint32_t b = 0; b < 65536; ++b) {
    half_t h{static_cast<uint16_t>(b)};
    float f = halfToFloat(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(f))));
      continue;
    }
    EXPECT_EQ(floatToHalf(f).bits, h.bits) << b;
  }
}

TEST(Dtype, HalfRoundsToNearestEven) {
  EXPECT_EQ(floatToHalf(1.0f + 1.0f / 2048).bits, floatToHalf(1.0f).bits);       // tie -> even
  EXPECT_EQ(floatToHalf(1.0f + 3.0f / 2048).bits, floatToHalf(1.0f + 4.0f / 2048).bits);
  EXPECT_EQ(floatToHalf(65520.f).bits, 0x7c00);                                  // -> +Inf
  EXPECT_EQ(floatToHalf(65519.f).bits, 0x7bff);
  EXPECT_EQ(floatToHalf(5.9604645e-08f).bits, 0x0001);                           // min subnormal
  EXPECT_EQ(floatToHalf(2.9802322e-08f).bits, 0x0000);                           // tie -> 0
}

TEST(Dtype, Bf16RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(floatToBf16(1.0f).bits, 0x3f80);
  float tie;  // exactly between 0x3f80 and 0x3f81: rounds to even (0x3f80)
  uint32_t u = 0x3f808000;
  std::memcpy(&tie, &u, 4);
  EXPECT_EQ(floatToBf16(tie).bits, 0x3f80);
  u = 0x3f818000;
  std::memcpy(&tie, &u, 4);
  EXPECT_EQ(floatToBf16(tie).bits, 0x3f82);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(NodeLayout, NonContiguousHostsAndSubgroups) {
  // Hosts A B A B C: nodes numbered by lowest rank: A=0, B=1, C=2.
  NodeLayout l = buildNodeLayout({11, 22, 11, 22, 33});
  EXPECT_EQ(l.nodes, 3);
  EXPECT_EQ(l.nodeOf, (std::vector<int>{0, 1, 0, 1, 2}));
  EXPECT_EQ(l.localOf, (std::vector<int>{0, 0, 1, 1, 0}));
  EXPECT_FALSE(l.uniform());
  EXPECT_EQ(l.nodeGroup(2), (std::vector<int>{0, 2}));
  EXPECT_EQ(l.railGroup(3), (std::vector<int>{2, 3}));  // local index 1: node C has none
  EXPECT_EQ(l.railGroup(4), (std::vector<int>{0, 1, 4}));
  EXPECT_EQ(l.leaders(), (std::vector<int>{0, 1, 4}));
  EXPECT_TRUE(buildNodeLayout({5, 6, 5, 6}).uniform());
}

TEST(NodeLayout, BuddiesAreOnTheNextNodeAndEveryRankHasOne) {
  // Even: A A B B -> 0's buddy is 2, 1's is 3, 2's is 0, 3's is 1; one ward each.
  NodeLayout even = buildNodeLayout({1, 1, 2, 2});
  EXPECT_EQ((std::vector<int>{even.buddyOf(0), even.buddyOf(1), even.buddyOf(2),
                              even.buddyOf(3)}),
            (std::vector<int>{2, 3, 0, 1}));
  for (int r = 0; r < 4; ++r) EXPECT_EQ(even.wardsOf(r), std::vector<int>{(r + 2) % 4});
  // Uneven, after a shrink: A B B (node A kept one rank): 0 -> 1, 1 -> 0, 2 -> 0; 0 holds 1 and 2.
  NodeLayout uneven = buildNodeLayout({1, 2, 2});
  EXPECT_EQ(uneven.buddyOf(0), 1);
  EXPECT_EQ(uneven.buddyOf(1), 0);
  EXPECT_EQ(uneven.buddyOf(2), 0);
  EXPECT_EQ(uneven.wardsOf(0), (std::vector<int>{1, 2}));
  EXPECT_EQ(uneven.wardsOf(1), std::vector<int>{0});
  EXPECT_TRUE(uneven.wardsOf(2).empty());
  // Three nodes, not node-contiguous: A B C A B C; buddies on the next node, wrapping.
  NodeLayout three = buildNodeLayout({1, 2, 3, 1, 2, 3});
  EXPECT_EQ(three.buddyOf(0), 1);
  EXPECT_EQ(three.buddyOf(5), 3);
  EXPECT_EQ(three.wardsOf(0), std::vector<int>{2});
  EXPECT_EQ(buildNodeLayout({7, 7}).buddyOf(0), -1);  // one node: no buddy
}

TEST(Tags, FieldsDoNotCollide) {
  EXPECT_NE(makeCollTag(1, 2, 3), makeCollTag(1, 3, 2));
  EXPECT_NE(makeCollTag(1, 2, 3), makeCollTag(2, 2, 3));
  EXPECT_NE(makeCollTag(1, 2, 0), makeP2pTag(1, 2));
  EXPECT_EQ(makeCollTag(kSeqMask + 1, 2, 3), makeCollTag(0, 2, 3));  // sequence wraps
  EXPECT_EQ(makeCollTag(0, kMaxRanks - 1, 0xffff) >> 40, 0u);
}

TEST(Params, TableDefaultsEnvironmentAndBadValues) {
  bool found = false;
  for (const ParamDesc& p : allParams()) {
    EXPECT_EQ(std::strncmp(p.name, "ZCOLL_", 6), 0) << p.name;
    EXPECT_GT(std::strlen(p.description), 10u) << p.name;
    found |= std::strcmp(p.name, "ZCOLL_TIMEOUT") == 0;
  }
  EXPECT_TRUE(found);
  unsetenv("ZCOLL_SPIN_COUNT");
  EXPECT_EQ(paramInt("ZCOLL_SPIN_COUNT"), -1);
  setenv("ZCOLL_SPIN_COUNT", "17", 1);
  EXPECT_EQ(paramInt("ZCOLL_SPIN_COUNT"), 17);
  setenv("ZCOLL_SPIN_COUNT", "lots", 1);  // unparsable: default, with a warning
  EXPECT_EQ(paramInt("ZCOLL_SPIN_COUNT"), -1);
  unsetenv("ZCOLL_SPIN_COUNT");
}

TEST(Reduce, HalfTypesAccumulateInFloatAndRoundOnce) {
  // 2048 + 1 + 1 in fp16 step by step gives 2048 (1 is below half an ulp); accumulated in
  // fp32 and rounded once it gives 2050.
  half_t in[3] = {floatToHalf(2048.f), floatToHalf(1.f), floatToHalf(1.f)};
  float acc = 0;
  toAcc(&acc, &in[0], zcollFloat16, 1);
  accumulate(&acc, &in[1], false, zcollFloat16, zcollSum, 1);
  accumulate(&acc, &in[2], false, zcollFloat16, zcollSum, 1);
  half_t out;
  fromAcc(&out, &acc, zcollFloat16, zcollSum, 3, 1);
  EXPECT_EQ(halfToFloat(out), 2050.f);
}

TEST(Reduce, IntegerSumsWrapAndAvgTruncates) {
  int8_t a = 120, b = 10;
  accumulate(&a, &b, false, zcollInt8, zcollSum, 1);
  EXPECT_EQ(a, static_cast<int8_t>(-126));
  int32_t sum = -7, out = 0;
  fromAcc(&out, &sum, zcollInt32, zcollAvg, 2, 1);
  EXPECT_EQ(out, -3);
}

namespace {

// A transport that reaches the peers a rule allows; never carries data.
class RuleTransport final : public Transport {
 public:
  RuleTransport(const char* name, bool (*rule)(const PeerReach&)) : name_(name), rule_(rule) {}
  const char* name() const override { return name_; }
  bool canConnect(const PeerReach& peer, std::string* why) const override {
    *why = rule_(peer) ? "allowed" : "refused";
    return rule_(peer);
  }
  Result postSend(int, const void*, size_t, uint64_t, Request*) override { return zcollInternalError; }
  Result postRecv(int, void*, size_t, uint64_t, Request*) override { return zcollInternalError; }
  Result progress() override { return zcollSuccess; }
  void cancel(Request*) override {}

 private:
  const char* name_;
  bool (*rule_)(const PeerReach&);
};

std::vector<PeerReach> fivePeers() {
  // Rank 0 is this rank; 1 and 2 share its node; 3 is another node on this machine; 4 is
  // another machine (one the `net` of the refusal test cannot reach).
  std::vector<PeerReach> p(5);
  for (int r = 0; r < 5; ++r) p[r].rank = r;
  p[0].self = p[0].sameMachine = p[0].sameNode = true;
  p[1].sameMachine = p[1].sameNode = true;
  p[2].sameMachine = p[2].sameNode = true;
  p[3].sameMachine = true;
  return p;
}

}  // namespace

TEST(TransportSelect, FirstTransportInPriorityOrderThatCanReachThePeerWins) {
  RuleTransport self("self", [](const PeerReach& p) { return p.self; });
  RuleTransport shm("shm", [](const PeerReach& p) { return !p.self && p.sameNode; });
  RuleTransport net("net", [](const PeerReach& p) { return !p.self; });
  std::vector<Route> routes;
  ASSERT_EQ(selectRoutes({&self, &shm, &net}, fivePeers(), &routes), zcollSuccess);
  const Transport* want[] = {&self, &shm, &shm, &net, &net};
  for (int p = 0; p < 5; ++p) EXPECT_EQ(routes[p].transport, want[p]) << "peer " << p;
  EXPECT_EQ(routes[1].why, "shm (allowed)");
  EXPECT_EQ(summarizeRoutes(routes),
            (std::vector<std::string>{"rank 0 -> self (allowed)", "ranks 1-2 -> shm (allowed)",
                                      "ranks 3-4 -> net (allowed)"}));
  // Priority, not capability, decides: with net first, it takes every peer but this rank.
  ASSERT_EQ(selectRoutes({&self, &net, &shm}, fivePeers(), &routes), zcollSuccess);
  EXPECT_EQ(routes[1].transport, &net);
}

TEST(TransportSelect, APeerNoTransportReachesFailsNamingEveryRefusal) {
  RuleTransport self("self", [](const PeerReach& p) { return p.self; });
  RuleTransport net("net", [](const PeerReach& p) { return !p.self && p.rank != 4; });
  std::vector<Route> routes;
  EXPECT_EQ(selectRoutes({&self, &net}, fivePeers(), &routes), zcollSystemError);
  EXPECT_EQ(threadLastError(),
            "zcollSystemError: no transport can reach rank 4 (self: refused; net: refused)");
}

// Device routes: the fallback (a yes without a reason) names why the first transport refused;
// with a none-reason, a peer nobody reaches gets a "none (...)" route instead of a failure.
TEST(TransportSelect, FallbackTakesTheFirstRefusalAndNoneIsARoute) {
  class Fallback final : public Transport {
   public:
    const char* name() const override { return "fallback"; }
    bool canConnect(const PeerReach& p, std::string* why) const override {
      *why = p.self ? "this rank" : "";
      return p.rank != 4;
    }
    Result postSend(int, const void*, size_t, uint64_t, Request*) override {
      return zcollInternalError;
    }
    Result postRecv(int, void*, size_t, uint64_t, Request*) override { return zcollInternalError; }
    Result progress() override { return zcollSuccess; }
    void cancel(Request*) override {}
  } fallback;
  RuleTransport first("first", [](const PeerReach& p) { return !p.self && p.sameNode; });
  RuleTransport second("second", [](const PeerReach&) { return false; });
  std::vector<Route> routes;
  ASSERT_EQ(selectRoutes({&first, &second, &fallback}, fivePeers(), &routes, "no device"),
            zcollSuccess);
  EXPECT_EQ(routes[0].why, "fallback (this rank)");
  EXPECT_EQ(routes[1].why, "first (allowed)");
  EXPECT_EQ(routes[3].why, "fallback (refused)");
  EXPECT_EQ(routes[4].transport, nullptr);
  EXPECT_EQ(routes[4].why, "none (no device)");
}

// The transport table (transport/registry.h): unique names, rows by priority, every row
// carrying host or device memory, the host transports' and device transports' orders the
// route choice depends on.
TEST(TransportTable, UniqueNamesInPriorityOrderWithTheirMemoryKinds) {
  const std::vector<TransportRow>& table = transportTable();
  ASSERT_FALSE(table.empty());
  std::set<std::string> names;
  std::vector<std::string> host, device;
  for (size_t i = 0; i < table.size(); ++i) {
    const TransportRow& row = table[i];
    EXPECT_TRUE(names.insert(row.name).second) << row.name;
    if (i > 0) {
      EXPECT_LT(table[i - 1].priority, row.priority) << row.name;
    }
    EXPECT_NE(row.memKinds & (kHostMemory | kDeviceMemory), 0u) << row.name;
    EXPECT_EQ(row.memKinds & ~(kHostMemory | kDeviceMemory), 0u) << row.name;
    EXPECT_NE(row.create, nullptr) << row.name;
    EXPECT_EQ(transportRow(row.name), &row);
    if (row.memKinds & kHostMemory) host.push_back(row.name);
    if (row.memKinds & kDeviceMemory) device.push_back(row.name);
  }
  EXPECT_EQ(host, (std::vector<std::string>{"self", "shm", "ucx"}));
  EXPECT_EQ(device, (std::vector<std::string>{"cuda_ipc", "ucx", "staged"}));
  EXPECT_FALSE(transportRow("self")->needsPeers);  // a rank alone sends to itself
  EXPECT_FALSE(transportRow("staged")->needsPeers);
  EXPECT_EQ(transportRow("nccl"), nullptr);
}

// A rank alone gets self only (no device here: no staged); its address is empty.
TEST(TransportTable, ARankAloneGetsSelfAndPublishesNothing) {
  TransportSettings s;
  ASSERT_EQ(readTransportSettings("comm", DeviceIdentity{}, false, nullptr, &s), zcollSuccess);
  std::vector<std::unique_ptr<Transport>> ts;
  ASSERT_EQ(createTransports(s, &ts), zcollSuccess) << threadLastError();
  ASSERT_EQ(ts.size(), 1u);
  EXPECT_STREQ(ts[0]->name(), "self");
  EXPECT_EQ(packedAddresses(ts), "");
}

TEST(TransportTable, BadChoicesAreRefusedNamingTheRows) {
  setenv("ZCOLL_TRANSPORT", "tcp", 1);
  TransportSettings s;
  EXPECT_EQ(readTransportSettings("comm", DeviceIdentity{}, true, nullptr, &s),
            zcollInvalidArgument);
  EXPECT_NE(threadLastError().find("ZCOLL_TRANSPORT=tcp: use shm, ucx, or leave it empty"),
            std::string::npos) << threadLastError();
  unsetenv("ZCOLL_TRANSPORT");
  setenv("ZCOLL_DEVICE_TRANSPORT", "nvlink", 1);
  EXPECT_EQ(readTransportSettings("comm", DeviceIdentity{}, true, nullptr, &s),
            zcollInvalidArgument);
  EXPECT_NE(threadLastError().find("ZCOLL_DEVICE_TRANSPORT=nvlink: use cuda_ipc, staged, or "
                                   "leave it empty"),
            std::string::npos) << threadLastError();
  unsetenv("ZCOLL_DEVICE_TRANSPORT");
}

// Addresses travel by transport name; unpack rejects what pack cannot make, naming the rank.
TEST(TransportAddressesTest, PackedByNameAndCheckedOnUnpack) {
  TransportAddresses a;
  a.rows = {{"shm", std::string("\x01\0\x02", 3)}, {"cuda_ipc", "probe"}};
  const std::string packed = packAddresses(a);
  TransportAddresses b;
  ASSERT_EQ(unpackAddresses(packed, 3, &b), zcollSuccess);
  EXPECT_EQ(b.rows, a.rows);
  EXPECT_EQ(b.of("cuda_ipc"), "probe");
  EXPECT_EQ(b.of("ucx"), "");
  ASSERT_EQ(unpackAddresses("", 3, &b), zcollSuccess);
  EXPECT_TRUE(b.rows.empty());
  TransportAddresses twice;
  twice.rows = {{"shm", "a"}, {"shm", "b"}};
  TransportAddresses unnamed;
  unnamed.rows = {{"", "a"}};
  for (const std::string& bad : {packed.substr(0, packed.size() - 1), packed + "x",
                                 packAddresses(twice), packAddresses(unnamed)}) {
    EXPECT_EQ(unpackAddresses(bad, 3, &b), zcollRemoteError);
    EXPECT_NE(threadLastError().find("rank 3 sent malformed transport addresses"),
              std::string::npos) << threadLastError();
    EXPECT_TRUE(b.rows.empty());
  }
}

TEST(BlockPool, AHeaderInFrontDoesNotDoubleAPowerOfTwoMessage) {
  // staged keeps [8-byte header][message] blocks: a 1 MiB message took a 2 MiB block when the
  // header was counted into the power-of-two rounding (issue 30, "the staging ring doubles").
  std::vector<size_t> sizes;
  BlockPool pool([&](size_t bytes, void** out) {
                   sizes.push_back(bytes);
                   *out = std::malloc(bytes);
                   return zcollSuccess;
                 },
                 [](void* p) { std::free(p); }, 8);
  BlockPool::Block a, b, c;
  ASSERT_EQ(pool.take(size_t(1) << 20, &a), zcollSuccess);
  EXPECT_EQ(a.bytes, size_t(1) << 20);
  ASSERT_EQ(pool.take((size_t(1) << 20) + 1, &b), zcollSuccess);
  EXPECT_EQ(b.bytes, size_t(2) << 20);
  pool.giveBack(a);
  ASSERT_EQ(pool.take(1000, &c), zcollSuccess);  // the free 1 MiB block serves it
  EXPECT_EQ(c.ptr, a.ptr);
  EXPECT_EQ(sizes, (std::vector<size_t>{(size_t(1) << 20) + 8, (size_t(2) << 20) + 8}));
  pool.giveBack(b);
  pool.giveBack(c);
}

TEST(TransportSelect, SelfReachesOnlyThisRank) {
  SelfTransport self;
  std::string why;
  std::vector<PeerReach> p = fivePeers();
  EXPECT_TRUE(self.canConnect(p[0], &why));
  EXPECT_FALSE(self.canConnect(p[1], &why));
}

// The table of collectives (coll/collectives.h) has one row per CollKind, with unique names,
// override parameters and call-check ids (none the barrier's).
TEST(Collectives, OneRowPerKindWithUniqueNamesAndIds) {
  std::set<std::string> names, params;
  std::set<uint32_t> ids;
  ASSERT_EQ(allCollectives().size(), static_cast<size_t>(CollKind::kNumKinds));
  for (int k = 0; k < static_cast<int>(CollKind::kNumKinds); ++k) {
    const Collective& c = collective(static_cast<CollKind>(k));
    EXPECT_EQ(static_cast<int>(c.kind), k);
    EXPECT_TRUE(names.insert(c.shortName).second) << c.shortName;
    EXPECT_TRUE(params.insert(c.overrideParam).second) << c.overrideParam;
    EXPECT_TRUE(ids.insert(c.callCheckId).second) << c.apiName;
    EXPECT_NE(c.callCheckId, kBarrierCallCheckId) << c.apiName;
    EXPECT_EQ(collectiveByCallCheckId(c.callCheckId), &c);
    EXPECT_EQ(std::string(c.apiName).rfind("zcoll", 0), 0u) << c.apiName;
  }
}

// Every default rule names an algorithm of its collective, and every collective's rules end in
// one that always holds.
TEST(Collectives, DefaultRulesNameRegisteredAlgorithmsAndEndInACatchAll) {
  for (const DefaultRule& r : defaultRules())
    EXPECT_NE(findAlgorithm(r.kind, r.algorithm), nullptr)
        << collKindName(r.kind) << " default " << r.algorithm;
  for (int k = 0; k < static_cast<int>(CollKind::kNumKinds); ++k) {
    const DefaultRule* last = nullptr;
    for (const DefaultRule& r : defaultRules())
      if (static_cast<int>(r.kind) == k) last = &r;
    ASSERT_NE(last, nullptr) << collKindName(static_cast<CollKind>(k));
    EXPECT_EQ(last->fromBytes, 0u);
    EXPECT_EQ(last->when, Condition::kAlways);
  }
}

// The ZCOLL_ALGO_<KIND> rows come from the table: each is a parameter whose description names
// every algorithm of its collective and states its defaults.
TEST(Collectives, OverrideParametersListEveryAlgorithmAndTheDefaults) {
  for (const Collective& c : allCollectives()) {
    const ParamDesc* row = nullptr;
    for (const ParamDesc& p : allParams())
      if (std::string(p.name) == c.overrideParam) row = &p;
    ASSERT_NE(row, nullptr) << c.overrideParam;
    const std::string text = row->description;
    for (const std::string& name : algorithmNames(c.kind))
      EXPECT_NE(text.find(name), std::string::npos) << c.overrideParam << " misses " << name;
    EXPECT_NE(text.find("Empty: " + describeDefaults(c.kind)), std::string::npos) << text;
  }
  EXPECT_EQ(describeDefaults(CollKind::kAllGather),
            "hierarchical over 32 KiB per rank if several_equal_nodes; shm_read from 1 MiB per "
            "rank if every_peer_shares_memory; ring over 32 KiB per rank; else direct");
}

// The rules choose what the size thresholds say, on layouts without shm peers.
TEST(Collectives, DefaultsFollowSizeAndLayout) {
  auto commOf = [](std::vector<uint64_t> hosts) {
    auto c = std::make_unique<zcollComm>();
    c->nranks = static_cast<int>(hosts.size());
    c->rank = 0;
    c->layout = buildNodeLayout(hosts);
    return c;
  };
  auto twoNodes = commOf({1, 1, 2, 2});
  auto oneNode = commOf({1, 1, 1, 1});
  auto uneven = commOf({1, 1, 2});
  EXPECT_STREQ(defaultAlgorithm(twoNodes.get(), CollKind::kAllGather, 32 << 10), "direct");
  EXPECT_STREQ(defaultAlgorithm(twoNodes.get(), CollKind::kAllGather, (32 << 10) + 1), "hierarchical");
  EXPECT_STREQ(defaultAlgorithm(oneNode.get(), CollKind::kAllGather, 4 << 20), "ring");
  EXPECT_STREQ(defaultAlgorithm(oneNode.get(), CollKind::kReduceScatter, 32 << 10), "direct");
  EXPECT_STREQ(defaultAlgorithm(oneNode.get(), CollKind::kReduceScatter, 8 << 20), "ring");
  EXPECT_STREQ(defaultAlgorithm(oneNode.get(), CollKind::kAllReduce, 64 << 10), "recursive_doubling");
  EXPECT_STREQ(defaultAlgorithm(oneNode.get(), CollKind::kAllReduce, (64 << 10) + 1), "ring");
  EXPECT_STREQ(defaultAlgorithm(oneNode.get(), CollKind::kBroadcast, 256 << 10), "binomial");
  EXPECT_STREQ(defaultAlgorithm(oneNode.get(), CollKind::kBroadcast, (256 << 10) + 1), "pipelined_ring");
  EXPECT_STREQ(defaultAlgorithm(uneven.get(), CollKind::kQuantizedReduceScatter, 1), "flat");
  EXPECT_STREQ(defaultAlgorithm(twoNodes.get(), CollKind::kQuantizedReduceScatter, 1), "two_hop");
}

TEST(Registry, EveryCollectiveHasDescribedUniquelyNamedAlgorithms) {
  for (int k = 0; k < static_cast<int>(CollKind::kNumKinds); ++k) {
    std::vector<std::string> names;
    for (const Algorithm& a : allAlgorithms()) {
      if (static_cast<int>(a.kind) != k) continue;
      EXPECT_NE(a.run, nullptr) << a.name;
      EXPECT_GT(std::strlen(a.description), 20u) << collKindName(a.kind) << "/" << a.name;
      for (const std::string& n : names) EXPECT_NE(n, a.name) << collKindName(a.kind);
      names.push_back(a.name);
    }
    EXPECT_FALSE(names.empty()) << "no algorithm for " << collKindName(static_cast<CollKind>(k));
  }
}

// ---- Flight recorder (core/flight_recorder.h) -------------------------------------------------

TEST(FlightRecorder, KeepsTheLastOperationsInOrderAndWhomTheRunningOneWaitsFor) {
  FlightRecorder rec;
  rec.configure(3);
  for (int i = 0; i < 5; ++i) {
    FlightEntry e;
    e.op = "allreduce";
    e.count = static_cast<uint64_t>(i);
    const uint64_t seq = rec.begin(e);
    EXPECT_EQ(seq, static_cast<uint64_t>(i + 1));
    if (i < 4) rec.end(seq, zcollSuccess);
  }
  rec.setWaitingOn({2, 3});
  std::vector<FlightEntry> ops = rec.snapshot();
  ASSERT_EQ(ops.size(), 3u);  // the last three of five
  EXPECT_EQ(ops[0].seq, 3u);
  EXPECT_EQ(ops[2].seq, 5u);
  EXPECT_EQ(ops[2].endNs, 0);  // still running
  EXPECT_EQ(ops[2].waitingOn, (std::vector<int>{2, 3}));
  EXPECT_GT(ops[1].endNs, 0);
  EXPECT_EQ(ops[1].result, zcollSuccess);
  EXPECT_TRUE(ops[1].waitingOn.empty());
  rec.end(5, zcollTimeout);
  rec.setWaitingOn({1});  // nothing runs: ignored
  ops = rec.snapshot();
  EXPECT_EQ(ops[2].result, zcollTimeout);
  EXPECT_TRUE(ops[2].waitingOn.empty());
  EXPECT_EQ(rec.lastSeq(), 5u);
}

TEST(FlightRecorder, SizeZeroRecordsNothing) {
  FlightRecorder rec;
  rec.configure(0);
  EXPECT_FALSE(rec.enabled());
  EXPECT_EQ(rec.begin(FlightEntry{}), 0u);
  rec.end(0, zcollSuccess);
  rec.setWaitingOn({1});
  EXPECT_TRUE(rec.snapshot().empty());
}

// ---- Dump paths, communicator ids, zcoll_info --status keying (issue 42) --------------------

TEST(FlightRecorder, DumpPathExpandsEveryPlaceholder) {
  zcollComm comm;
  comm.name = "torch:1 a/b";
  comm.rank = 3;
  comm.id = 0x00ab00cd00ef0012ULL;
  const std::string pid = std::to_string(getpid());
  bool added = true;
  EXPECT_EQ(dumpPathFor(&comm, "/d/fr.%r.json", false, &added), "/d/fr.3.json");
  EXPECT_FALSE(added);
  EXPECT_EQ(dumpPathFor(&comm, "/d/%c.%i.%p.json", false, &added),
            "/d/torch:1_a_b.00ab00cd00ef0012." + pid + ".json");
  EXPECT_FALSE(added);
  EXPECT_EQ(dumpPathFor(&comm, "/d/100%%.%r%q", false, &added), "/d/100%.3%q");
}

TEST(FlightRecorder, DumpPathKeepsCommunicatorsAndRanksApart) {
  zcollComm comm;
  comm.name = "comm";
  comm.rank = 2;
  comm.id = 0x1234;
  bool added = false;
  // More than one communicator in the process and no %i: the id goes before the extension.
  EXPECT_EQ(dumpPathFor(&comm, "/d/fr.%r.json", true, &added), "/d/fr.2.comm0000000000001234.json");
  EXPECT_FALSE(added);
  // %c alone is not enough (names repeat); %i is.
  EXPECT_EQ(dumpPathFor(&comm, "/d/%c.%r.json", true, &added),
            "/d/comm.2.comm0000000000001234.json");
  EXPECT_EQ(dumpPathFor(&comm, "/d/%i.%r.json", true, &added), "/d/0000000000001234.2.json");
  // Neither %r nor %p: the rank is added (and reported, for the warning).
  EXPECT_EQ(dumpPathFor(&comm, "/d.x/fr.json", false, &added), "/d.x/fr.rank2.json");
  EXPECT_TRUE(added);
  EXPECT_EQ(dumpPathFor(&comm, "/d.x/fr", true, &added), "/d.x/fr.rank2.comm0000000000001234");
  EXPECT_EQ(dumpPathFor(&comm, "/d/.hidden", false, &added), "/d/.hidden.rank2");
  comm.id = 0x5678;  // another communicator of the same rank: another file
  EXPECT_EQ(dumpPathFor(&comm, "/d.x/fr.json", true, &added),
            "/d.x/fr.rank2.comm0000000000005678.json");
}

TEST(FlightRecorder, DumpOfARankWithoutRankInThePatternGoesToItsOwnFile) {
  char dir[] = "/tmp/zcoll_dump_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string pattern = std::string(dir) + "/fr.json";
  zcoll::test::ScopedEnv env("ZCOLL_DEBUG_DUMP", pattern.c_str());
  zcollComm comm;
  comm.name = "comm";
  comm.rank = 1;
  comm.nranks = 2;
  comm.id = 0xfeed;
  dumpFlightRecord(&comm, "request");
  const std::string path = dumpPathFor(&comm, pattern, commsRegisteredSoFar() > 1, nullptr);
  EXPECT_NE(path.find("/fr.rank1."), std::string::npos) << path;
  FILE* f = std::fopen(path.c_str(), "r");
  ASSERT_NE(f, nullptr) << path;
  char buf[512] = {};
  EXPECT_GT(std::fread(buf, 1, sizeof(buf) - 1, f), 0u);
  std::fclose(f);
  EXPECT_NE(std::string(buf).find("\"comm_id\": \"000000000000feed\""), std::string::npos) << buf;
  EXPECT_EQ(std::fopen(pattern.c_str(), "r"), nullptr) << "the bare pattern was written";
  std::remove(path.c_str());
  rmdir(dir);
}

// Per rank, the ids of the communicators a test made (gathered from the rank threads).
struct IdsByRank {
  std::mutex mu;
  std::map<int, std::map<std::string, uint64_t>> ids;
  void put(int rank, const std::string& what, zcollComm_t c) {
    std::lock_guard<std::mutex> lock(mu);
    ids[rank][what] = c != nullptr ? reinterpret_cast<zcollComm*>(c)->id : 0;
  }
};

TEST(CommId, SameOnEveryRankAndDistinctForSplitsOverTheSameRanks) {
  zcoll::test::RankSetup s;
  s.nranks = 3;
  s.timeoutSec = 30;
  IdsByRank got;
  zcoll::test::runRanks(s, [&](int rank, zcollComm_t comm) {
    got.put(rank, "parent", comm);
    zcollComm_t a = nullptr, b = nullptr, c = nullptr;
    ZCOLL_EXPECT_OK(comm, zcollCommSplit(comm, 0, rank, &a, nullptr));  // every rank, twice
    ZCOLL_EXPECT_OK(comm, zcollCommSplit(comm, 0, rank, &b, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollCommSplit(comm, rank % 2, rank, &c, nullptr));  // {0,2}, {1}
    got.put(rank, "a", a);
    got.put(rank, "b", b);
    got.put(rank, "c", c);
    for (zcollComm_t x : {a, b, c})
      if (x != nullptr) {
        EXPECT_EQ(zcollCommDestroy(x), zcollSuccess);
      }
  });
  ASSERT_EQ(got.ids.size(), 3u);
  for (const char* what : {"parent", "a", "b"}) {
    EXPECT_NE(got.ids[0][what], 0u) << what;
    EXPECT_EQ(got.ids[1][what], got.ids[0][what]) << what;
    EXPECT_EQ(got.ids[2][what], got.ids[0][what]) << what;
  }
  EXPECT_EQ(got.ids[2]["c"], got.ids[0]["c"]);
  const std::set<uint64_t> distinct = {got.ids[0]["parent"], got.ids[0]["a"], got.ids[0]["b"],
                                       got.ids[0]["c"], got.ids[1]["c"]};
  EXPECT_EQ(distinct.size(), 5u) << "two communicators share an id";
}

TEST(CommId, TwoShrinksExcludingTheSameRankGiveTwoIds) {
  zcoll::test::RankSetup s;
  s.nranks = 3;
  s.timeoutSec = 30;
  IdsByRank got;
  zcoll::test::runRanks(s, [&](int rank, zcollComm_t comm) {
    got.put(rank, "parent", comm);
    if (rank == 2) return;  // excluded: takes no part
    const int excluded[] = {2};
    zcollComm_t first = nullptr, second = nullptr;
    ZCOLL_EXPECT_OK(comm, zcollCommShrink(comm, excluded, 1, &first, nullptr,
                                          ZCOLL_SHRINK_DEFAULT));
    ZCOLL_EXPECT_OK(comm, zcollCommShrink(comm, excluded, 1, &second, nullptr,
                                          ZCOLL_SHRINK_DEFAULT));
    got.put(rank, "first", first);
    got.put(rank, "second", second);
    for (zcollComm_t x : {first, second})
      if (x != nullptr) {
        EXPECT_EQ(zcollCommDestroy(x), zcollSuccess);
      }
  });
  for (const char* what : {"first", "second"}) {
    EXPECT_NE(got.ids[0][what], 0u) << what;
    EXPECT_EQ(got.ids[1][what], got.ids[0][what]) << what;
  }
  const std::set<uint64_t> distinct = {got.ids[0]["parent"], got.ids[0]["first"],
                                       got.ids[0]["second"]};
  EXPECT_EQ(distinct.size(), 3u);
}

// How many lines of `text` start with `prefix`.
int linesStartingWith(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n += line.rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

// The default group and a new_group over the same ranks, as torch makes them: one name, the
// same members and processes. Each must be its own entry, each rank once in it, and their
// different last calls no mismatch (keyed by name and members, they were merged into one
// communicator listing every rank twice with a false "mismatched calls").
TEST(StatusKeying, TwoCommsOverTheSameRanksWithOneNameAreTwoEntries) {
  zcoll::test::RankSetup s;
  s.nranks = 2;
  s.timeoutSec = 30;
  std::atomic<bool> queried{false};
  std::string report;
  zcoll::test::runRanks(s, [&](int rank, zcollComm_t comm) {
    zcollConfig_t config = ZCOLL_CONFIG_INITIALIZER;
    config.commName = "comm";  // the parent's name (runRanks leaves it unset)
    zcollComm_t twin = nullptr;
    ZCOLL_EXPECT_OK(comm, zcollCommSplit(comm, 0, rank, &twin, &config));
    ASSERT_NE(twin, nullptr);
    int x = rank, sum = -1;
    ZCOLL_EXPECT_OK(twin, zcollAllReduce(&x, &sum, 1, zcollInt32, zcollSum, twin, nullptr));
    ZCOLL_EXPECT_OK(comm, zcollBarrier(comm, nullptr));  // both ranks: last call a barrier
    if (rank == 0) {
      report = formatStatus({statusReport("status")});
      queried = true;
    }
    while (!queried.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(zcollCommDestroy(twin), zcollSuccess);
  });
  EXPECT_NE(report.find("2 communicators"), std::string::npos) << report;
  EXPECT_EQ(linesStartingWith(report, "comm comm (id "), 2) << report;
  EXPECT_EQ(linesStartingWith(report, "  rank 0 "), 2) << report;
  EXPECT_EQ(linesStartingWith(report, "  rank 1 "), 2) << report;
  EXPECT_EQ(report.find("=>"), std::string::npos) << report;
}

TEST(StatusKeying, RanksThatDidNotAnswerAreCountedOnAnArrowLine) {
  const std::string line = "comm=torch:1 id=00000000000000aa nranks=4 pid=%d host=h error=- "
                           "last=4 op=allreduce algo=ring count=8 dtype=float redop=sum root=-1 "
                           "peer=-1 state=running age_ms=300 waiting=%d\n";
  std::vector<std::string> answers;
  for (int r : {0, 2}) {
    char buf[512];
    std::snprintf(buf, sizeof(buf), line.c_str(), 100 + r, (r + 1) % 4);
    std::string withRank = buf;
    withRank.insert(withRank.find(" nranks"), " rank=" + std::to_string(r));
    answers.push_back(withRank);
  }
  const std::string report = formatStatus(answers);
  EXPECT_NE(report.find("comm torch:1 (id 00000000000000aa, 4 ranks)\n"), std::string::npos)
      << report;
  EXPECT_NE(report.find("  => 2 of 4 ranks did not answer here (ranks 1,3): "),
            std::string::npos) << report;
  EXPECT_EQ(linesStartingWith(report, "  ("), 0) << report;
}

TEST(FlightRecorder, JsonNamesTheCommAndEscapesItsName) {
  zcollComm comm;
  comm.name = "odd \"name\"";
  comm.rank = 1;
  comm.nranks = 2;
  comm.recorder.configure(4);
  FlightEntry e;
  e.op = "broadcast";
  e.algorithm = "binomial";
  e.dtype = zcollFloat32;
  e.root = 0;
  comm.recorder.end(comm.recorder.begin(e), zcollSuccess);
  const std::string json = flightRecordJson(&comm);
  EXPECT_NE(json.find("\"schema\": \"zcoll-flight-record/1\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"comm\": \"odd \\\"name\\\"\", \"comm_id\": \"0000000000000000\""),
            std::string::npos) << json;
  EXPECT_NE(json.find("\"op\": \"broadcast\", \"algorithm\": \"binomial\""), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"dtype\": \"float\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"result\": \"zcollSuccess\""), std::string::npos) << json;
}

