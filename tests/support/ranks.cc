#include "support/ranks.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

namespace zcoll::test {

int nodeOfRank(const RankSetup& s, int r) {
  if (s.placement == Placement::kCyclic) return r % s.nodes;
  // Contiguous, spread evenly: the first (n % nodes) nodes get one extra rank.
  int base = s.nranks / s.nodes, extra = s.nranks % s.nodes;
  int bigEnd = extra * (base + 1);
  return r < bigEnd ? r / (base + 1) : extra + (r - bigEnd) / base;
}

std::string layoutName(const testing::TestParamInfo<RankSetup>& info) {
  const RankSetup& s = info.param;
  return std::to_string(s.nranks) + "ranks_" + std::to_string(s.nodes) + "nodes" +
         (s.placement == Placement::kCyclic ? "_cyclic" : "");
}

int rankOf(zcollComm_t comm) {
  int r = -1;
  EXPECT_EQ(zcollCommUserRank(comm, &r), zcollSuccess);
  return r;
}

int countOf(zcollComm_t comm) {
  int n = -1;
  EXPECT_EQ(zcollCommCount(comm, &n), zcollSuccess);
  return n;
}

std::string emulatedHost(int node) { return "emulated-node-" + std::to_string(node); }

namespace {

// Ranks as threads owning their comms; hostOf(r) empty: the machine's identity.
void runOwning(int nranks, const std::function<int(int)>& timeoutOf,
               const std::function<std::string(int)>& hostOf,
               const std::function<void(int, zcollComm_t)>& body) {
  zcollUniqueId id;
  ASSERT_EQ(zcollGetUniqueId(&id), zcollSuccess) << zcollGetLastError(nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      const std::string host = hostOf(r);
      zcollConfig_t config = ZCOLL_CONFIG_INITIALIZER;
      config.hostId = host.empty() ? nullptr : host.c_str();
      config.timeoutSec = timeoutOf(r);
      zcollComm_t comm = nullptr;
      zcollResult_t res = zcollCommInitRankConfig(&comm, nranks, id, r, &config);
      EXPECT_EQ(res, zcollSuccess) << "rank " << r << " init: " << zcollGetLastError(nullptr);
      if (res == zcollSuccess) body(r, comm);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace

void runOwningRanks(int nranks, const std::function<int(int)>& timeoutOf,
                    const std::function<void(int, zcollComm_t)>& body) {
  runOwning(nranks, timeoutOf, [](int) { return std::string(); }, body);
}

void runOwningRanks(const RankSetup& s, const std::function<void(int, zcollComm_t)>& body) {
  runOwning(s.nranks, [&](int) { return s.timeoutSec; },
            [&](int r) { return emulatedHost(nodeOfRank(s, r)); }, body);
}

void runRanks(const RankSetup& s, const std::function<void(int, zcollComm_t)>& body) {
  zcollUniqueId id;
  ASSERT_EQ(zcollGetUniqueId(&id), zcollSuccess) << zcollGetLastError(nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < s.nranks; ++r) {
    threads.emplace_back([&, r] {
      std::string host = emulatedHost(nodeOfRank(s, r));
      zcollConfig_t config = ZCOLL_CONFIG_INITIALIZER;
      config.hostId = host.c_str();
      config.timeoutSec = s.timeoutSec;
      zcollComm_t comm = nullptr;
      zcollResult_t res = zcollCommInitRankConfig(&comm, s.nranks, id, r, &config);
      EXPECT_EQ(res, zcollSuccess) << "rank " << r << " init: " << zcollGetLastError(nullptr);
      if (res != zcollSuccess) return;
      body(r, comm);
      EXPECT_EQ(zcollCommDestroy(comm), zcollSuccess);
    });
  }
  for (auto& t : threads) t.join();
}

ScopedEnv::ScopedEnv(const char* name, const char* value) : name_(name) {
  const char* old = std::getenv(name);
  hadOld_ = old != nullptr;
  if (hadOld_) old_ = old;
  if (value != nullptr) setenv(name, value, 1);
  else unsetenv(name);
}

ScopedEnv::~ScopedEnv() {
  if (hadOld_) setenv(name_.c_str(), old_.c_str(), 1);
  else unsetenv(name_.c_str());
}

}  // namespace zcoll::test
