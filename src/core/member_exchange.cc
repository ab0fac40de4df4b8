#include "core/member_exchange.h"

#include <chrono>
#include <thread>

#include "core/progress.h"

namespace zcoll {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

MemberExchange::MemberExchange(zcollComm* comm, const ExchangeContext& ctx, uint32_t step)
    : comm_(comm), ctx_(ctx), step_(step), theirs_(comm->nranks), reqs_(2 * comm->nranks) {}

MemberExchange::~MemberExchange() {
  for (size_t i = 0; i < posted_; ++i)
    if (!reqs_[i].complete() && reqs_[i].transport != nullptr)
      reqs_[i].transport->cancel(&reqs_[i]);
}

Result MemberExchange::run(const std::vector<int>& to, const std::string& mine,
                           const std::vector<int>& from, const std::vector<size_t>& bytes) {
  for (int p : from) {
    if (p == comm_->rank) continue;
    theirs_[p].assign(bytes[p], '\0');
    ZCOLL_CHECK(postRecv(comm_, p, theirs_[p].data(), bytes[p], ctx_.tag(ctx_.attempt, p, step_),
                         &reqs_[posted_++]));
  }
  for (int p : to) {
    if (p == comm_->rank) continue;
    ZCOLL_CHECK(postSend(comm_, p, mine.data(), mine.size(),
                         ctx_.tag(ctx_.attempt, comm_->rank, step_), &reqs_[posted_++]));
  }
  return waitForPeers();
}

// Progress until every request is complete, at most the timeout; a peer that goes down fails
// it at once. The comm's other traffic (a dead rank's failed endpoints) is not this wait's
// business: transport errors count only through these requests.
Result MemberExchange::waitForPeers() {
  const auto deadline = Clock::now() + std::chrono::seconds(comm_->timeoutSec + ctx_.extraWaitSec);
  Clock::time_point lastCheck{};
  for (int64_t polls = 0;; ++polls) {
    for (const auto& t : comm_->transportList) (void)t->progress();
    size_t done = 0;
    for (size_t i = 0; i < posted_; ++i) {
      if (!reqs_[i].complete()) continue;
      if (reqs_[i].status != zcollSuccess)
        return fail(zcollRemoteError, "%s: the exchange with rank %d failed (%s); %s", ctx_.fn,
                    reqs_[i].peer, resultName(reqs_[i].status), ctx_.retry);
      ++done;
    }
    if (done == posted_) return zcollSuccess;
    const auto now = Clock::now();
    if (now - lastCheck >= std::chrono::milliseconds(50)) {
      lastCheck = now;
      for (size_t i = 0; i < posted_; ++i) {
        if (reqs_[i].complete()) continue;
        const int p = reqs_[i].peer;
        if (const char* why = whyPeerGone(comm_, p))
          return fail(zcollRemoteError, "%s: rank %d (pid %d on %s) %s %s (step 0x%x, "
                      "pending: %s); %s", ctx_.fn, p, comm_->peers[p].pid,
                      comm_->peers[p].hostName, why, ctx_.during, step_,
                      pendingPeers(reqs_.data(), posted_).c_str(), ctx_.retry);
      }
      if (now > deadline)
        return fail(zcollTimeout, "%s: rank %d waited more than %d s for %s (%zu of %zu "
                    "transfers of step 0x%x done; pending: %s): %s", ctx_.fn, comm_->rank,
                    comm_->timeoutSec + ctx_.extraWaitSec, ctx_.whoWaits, done, posted_,
                    step_, pendingPeers(reqs_.data(), posted_).c_str(), ctx_.whyLate);
    }
    if (polls < 1000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

}  // namespace zcoll
