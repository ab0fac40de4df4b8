// Ranks as threads in one process: each thread creates its own communicator from one unique
// id, with a host identity per emulated node, and runs the test body.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "zcoll/zcoll.h"

namespace zcoll::test {

enum class Placement {
  kContiguous,  // node k holds ranks [k*L, (k+1)*L)
  kCyclic,      // rank r on node r % nodes (ranks not node-contiguous)
};

struct RankSetup {
  int nranks = 1;
  int nodes = 1;
  Placement placement = Placement::kContiguous;
  int timeoutSec = 60;
};

// Layouts as test parameters: fixtures derive from LayoutTest, instantiate with RankSetup
// values and name the cases with layoutName ("6ranks_2nodes_cyclic").
class LayoutTest : public testing::TestWithParam<RankSetup> {
 protected:
  const RankSetup& setup() const { return GetParam(); }
};
std::string layoutName(const testing::TestParamInfo<RankSetup>& info);

// Expects `expr` to return `code` with a last-error message (for `comm`, or the thread's when
// NULL) that contains `needle`.
#define EXPECT_FAILS_WITH(comm, code, needle, expr)                                         \
  do {                                                                                      \
    zcollResult_t r_ = (expr);                                                              \
    EXPECT_EQ(r_, code) << #expr;                                                           \
    std::string msg_ = zcollGetLastError(comm);                                             \
    EXPECT_NE(msg_.find(needle), std::string::npos) << #expr << " message: " << msg_;      \
  } while (0)

// Node index rank `r` is placed on.
int nodeOfRank(const RankSetup& s, int r);

// Creates the communicators (all threads), runs body(rank, comm) on each thread, destroys them.
// Init failures are reported as test failures.
void runRanks(const RankSetup& s, const std::function<void(int rank, zcollComm_t comm)>& body);

// Ranks as threads that own their communicator's whole life (unlike runRanks, which
// destroys after the body): body(rank, comm) must destroy or abort it. timeoutOf(rank) gives
// each rank's timeout in seconds.
void runOwningRanks(int nranks, const std::function<int(int)>& timeoutOf,
                    const std::function<void(int, zcollComm_t)>& body);
// The same on the emulated nodes of `s` (host identity "emulated-node-K", as runRanks), every
// rank with s.timeoutSec.
void runOwningRanks(const RankSetup& s, const std::function<void(int, zcollComm_t)>& body);
// zcollCommUserRank and zcollCommCount of `comm`, expected to succeed.
int rankOf(zcollComm_t comm);
int countOf(zcollComm_t comm);

// The host identity runRanks gives the ranks of node `node`.
std::string emulatedHost(int node);

// Expects `r` to be zcollSuccess, printing the error string and last error otherwise.
#define ZCOLL_EXPECT_OK(comm, expr)                                                        \
  do {                                                                                     \
    zcollResult_t zr_ = (expr);                                                            \
    EXPECT_EQ(zr_, zcollSuccess) << #expr << ": " << zcollGetErrorString(zr_) << " | "     \
                                 << zcollGetLastError(comm);                               \
  } while (0)

// Sets an environment variable for the lifetime of the object (restores the old value).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::string old_;
  bool hadOld_;
};

}  // namespace zcoll::test
