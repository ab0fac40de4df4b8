// The rendezvous under hostile and mistaken connections: idle sockets, garbage, forged hellos,
// a wrong size, a reused unique id, another program on the port, a rank later than the
// handshake deadline. The ranks' timeout (a few seconds) is the guard: the old
// one-connection-at-a-time root spent 2 s on each idle connection.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "bootstrap/hello.h"
#include "bootstrap/rendezvous.h"
#include "zcoll/zcoll.h"

namespace zcoll {
namespace {

constexpr uint64_t kMagic = 0x1234abcd5678ef01ull;

RendezvousId startRoot(int expectedRanks, int timeoutSec) {
  SockAddr addr{};
  addr.storage.in4.sin_family = AF_INET;
  addr.storage.in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.len = sizeof(sockaddr_in);
  RendezvousId id{};
  EXPECT_EQ(startRendezvousRoot(addr, kMagic, expectedRanks, timeoutSec, false, &id),
            zcollSuccess);
  return id;
}

// A raw connection to the root that stays open until the test ends.
int rawConnect(const RendezvousId& id) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(::connect(fd, &id.root.storage.sa, id.root.len), 0);
  return fd;
}

void sendRaw(int fd, const void* p, size_t n) { EXPECT_EQ(::send(fd, p, n, MSG_NOSIGNAL), ssize_t(n)); }

struct RawHello {
  uint64_t magic;
  int32_t rank, nranks;
  uint64_t blobLen;
};

// Runs `n` ranks through the rendezvous in threads; every rank must get every blob.
void expectRanksMeet(const RendezvousId& id, int n, int timeoutSec) {
  std::vector<std::thread> ts;
  std::vector<Result> rs(n, zcollInternalError);
  std::vector<std::vector<std::string>> all(n);
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      rs[r] = rendezvousAllGather(id, r, n, "rank" + std::to_string(r), timeoutSec, &all[r]);
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(rs[r], zcollSuccess) << "rank " << r;
    ASSERT_EQ(all[r].size(), size_t(n));
    for (int q = 0; q < n; ++q) EXPECT_EQ(all[r][q], "rank" + std::to_string(q));
  }
}

std::string helloBytes(uint64_t magic, int32_t rank, int32_t nranks, uint64_t blobLen,
                       const std::string& blob) {
  Hello h{magic, rank, nranks};
  std::string b(reinterpret_cast<const char*>(&h), sizeof(h));
  b.append(reinterpret_cast<const char*>(&blobLen), sizeof(blobLen));
  return b + blob;
}

// parseHello, fed a byte at a time as a slow connection would: it asks for exactly the bytes it
// needs, rejects a wrong magic or rank from the 16 hello bytes alone, and completes once the
// announced blob is in.
TEST(Hello, ParsesInPiecesAndRejectsEarly) {
  const HelloRules rules{0x1234, 3};
  std::string good = helloBytes(0x1234, 2, 3, 5, "abcde");
  ParsedHello p;
  for (size_t n = 0; n < good.size(); ++n) {
    ASSERT_EQ(parseHello(good.data(), n, rules, &p), HelloParse::kNeedMore) << n;
    ASSERT_GT(p.bytesNeeded, n);
    ASSERT_LE(p.bytesNeeded, good.size());
  }
  ASSERT_EQ(parseHello(good.data(), good.size(), rules, &p), HelloParse::kComplete);
  EXPECT_EQ(p.header.rank, 2);
  EXPECT_EQ(p.blobBytes, 5u);

  std::string badMagic = helloBytes(0x9999, 0, 3, 0, "");
  EXPECT_EQ(parseHello(badMagic.data(), sizeof(Hello), rules, &p), HelloParse::kRejected);
  EXPECT_EQ(p.refusal, kHelloBadMagic);
  for (auto rn : {std::pair<int, int>{3, 3}, {-1, 3}, {0, 4}, {0, 0}}) {
    std::string bad = helloBytes(0x1234, rn.first, rn.second, 0, "");
    EXPECT_EQ(parseHello(bad.data(), sizeof(Hello), rules, &p), HelloParse::kRejected);
    EXPECT_EQ(p.refusal, kHelloBadRank);
  }
  std::string huge = helloBytes(0x1234, 0, 3, kMaxRankBlob + 1, "");
  EXPECT_EQ(parseHello(huge.data(), huge.size(), rules, &p), HelloParse::kRejected);
  EXPECT_EQ(p.refusal, kHelloTooLarge);
  // Root not yet told the size: the hello's own nranks must still be sane.
  std::string unknown = helloBytes(0x1234, 5, 8, 0, "");
  EXPECT_EQ(parseHello(unknown.data(), unknown.size(), HelloRules{0x1234, 0}, &p),
            HelloParse::kComplete);
}

TEST(Bootstrap, IdleAndGarbageConnectionsDoNotHoldUpTheRanks) {
  RendezvousId id = startRoot(0, 20);
  std::vector<int> fds;
  for (int i = 0; i < 20; ++i) fds.push_back(rawConnect(id));  // say nothing
  for (int i = 0; i < 5; ++i) {                                 // garbage
    fds.push_back(rawConnect(id));
    std::string junk(100 + i, char('A' + i));
    sendRaw(fds.back(), junk.data(), junk.size());
  }
  RawHello wrongMagic{kMagic ^ 1, 0, 3, 5};
  RawHello hugeBlob{kMagic, 1, 3, uint64_t(1) << 40};
  RawHello halfHello{kMagic, 2, 3, 0};
  fds.push_back(rawConnect(id));
  sendRaw(fds.back(), &wrongMagic, sizeof(wrongMagic));
  fds.push_back(rawConnect(id));
  sendRaw(fds.back(), &hugeBlob, sizeof(hugeBlob));
  fds.push_back(rawConnect(id));
  sendRaw(fds.back(), &halfHello, 10);  // stalls mid-hello
  expectRanksMeet(id, 3, 3);            // 3 s: the old root needed 2 s per idle connection
  for (int fd : fds) ::close(fd);
}

// What one rank's rendezvousAllGather returned, its message, and how long it took.
struct Outcome {
  Result result = zcollInternalError;
  std::string message;
  double seconds = 0;
};

Outcome joinAs(const RendezvousId& id, int rank, int nranks, int timeoutSec) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> all;
  Outcome o;
  o.result = rendezvousAllGather(id, rank, nranks, "x", timeoutSec, &all);
  o.message = threadLastError();
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return o;
}

// WORLD_SIZE 2 on one rank, 3 on the others: every rank fails at once (not at the 300 s
// timeout), naming both sizes: those that joined before the mistaken rank, the mistaken rank
// itself, and one that arrives after it. A hello with the magic is a rank of this job (a
// stranger without ZCOLL_AUTH_TOKEN could already take a rank's place), so its size is a
// mistake that no rank can wait out.
TEST(Bootstrap, AMisSizedRankFailsEveryRankAtOnceNamingBothSizes) {
  RendezvousId id = startRoot(4, 300);
  Outcome early0, early2, wrong, late;
  std::thread t0([&] { early0 = joinAs(id, 0, 4, 300); });
  std::thread t2([&] { early2 = joinAs(id, 2, 4, 300); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // both joined
  wrong = joinAs(id, 1, 2, 300);
  t0.join();
  t2.join();
  late = joinAs(id, 3, 4, 300);
  EXPECT_EQ(wrong.result, zcollInvalidUsage);
  EXPECT_NE(wrong.message.find("this rank says there are 2 ranks (WORLD_SIZE / nranks), the "
                               "rendezvous expects 4"), std::string::npos) << wrong.message;
  for (const Outcome* o : {&early0, &early2, &late}) {
    EXPECT_EQ(o->result, zcollInvalidUsage) << o->message;
    EXPECT_NE(o->message.find("rank 1 says there are 2 ranks (WORLD_SIZE / nranks), the "
                              "rendezvous expects 4"), std::string::npos) << o->message;
    EXPECT_LT(o->seconds, 20.0) << o->message;
  }
}

// Without a size of its own (zcollGetUniqueId's root), the first admitted hello's is the
// rendezvous': a later rank with another one fails it for all alike.
TEST(Bootstrap, WithoutARootSizeTheFirstRanksSizeIsTheRendezvous) {
  RendezvousId id = startRoot(0, 300);
  Outcome first, wrong;
  std::thread t([&] { first = joinAs(id, 0, 3, 300); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  wrong = joinAs(id, 2, 4, 300);
  t.join();
  EXPECT_EQ(wrong.result, zcollInvalidUsage);
  EXPECT_NE(wrong.message.find("says there are 4 ranks"), std::string::npos) << wrong.message;
  EXPECT_NE(wrong.message.find("expects 3"), std::string::npos) << wrong.message;
  EXPECT_EQ(first.result, zcollInvalidUsage);
  EXPECT_NE(first.message.find("rank 2 says there are 4 ranks (WORLD_SIZE / nranks), the "
                               "rendezvous expects 3"), std::string::npos) << first.message;
  EXPECT_LT(first.seconds, 20.0);
}

// A listener that is not zcoll's (here one that answers like a web server): the rank gives up
// at once instead of waiting for the timeout, saying so.
TEST(Bootstrap, AForeignListenerIsToldApartFromTheRoot) {
  SockAddr addr{};
  addr.storage.in4.sin_family = AF_INET;
  addr.storage.in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.len = sizeof(sockaddr_in);
  Socket listener;
  ASSERT_EQ(listenOn(&addr, &listener), zcollSuccess);
  std::thread foreign([&] {
    Socket c;
    if (acceptBefore(listener, deadlineIn(30), &c) != zcollSuccess) return;
    const char reply[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
    (void)sendAll(c, reply, sizeof(reply) - 1, deadlineIn(5));
    std::this_thread::sleep_for(std::chrono::seconds(2));  // then stays open a while
  });
  const RendezvousId id{kMagic, addr};
  Outcome o = joinAs(id, 1, 2, 300);
  foreign.join();
  EXPECT_EQ(o.result, zcollSystemError);
  EXPECT_NE(o.message.find("the rendezvous at " + addrToString(addr) + " did not answer as zcoll"),
            std::string::npos) << o.message;
  EXPECT_LT(o.seconds, 10.0) << o.message;
}

// The handshake deadline bounds only the root's immediate answer: ranks that joined still wait
// for a rank that comes later than it, up to the timeout.
TEST(Bootstrap, ARankLaterThanTheHandshakeDeadlineStillMeetsTheOthers) {
  RendezvousId id = startRoot(3, 120);
  std::vector<Outcome> early(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r) ts.emplace_back([&, r] { early[r] = joinAs(id, r, 3, 120); });
  std::this_thread::sleep_for(std::chrono::seconds(kRendezvousHandshakeSec + 2));
  Outcome late = joinAs(id, 2, 3, 120);
  for (auto& t : ts) t.join();
  EXPECT_EQ(late.result, zcollSuccess) << late.message;
  for (const Outcome& o : early) EXPECT_EQ(o.result, zcollSuccess) << o.message;
}

TEST(Bootstrap, ReusedUniqueIdFailsAtOnceAndSaysWhy) {
  zcollUniqueId uid;
  ASSERT_EQ(zcollGetUniqueId(&uid), zcollSuccess);
  zcollConfig_t cfg = ZCOLL_CONFIG_INITIALIZER;
  cfg.timeoutSec = 20;
  zcollComm_t comm = nullptr;
  ASSERT_EQ(zcollCommInitRankConfig(&comm, 1, uid, 0, &cfg), zcollSuccess);
  ASSERT_EQ(zcollCommDestroy(comm), zcollSuccess);
  zcollComm_t again = nullptr;
  EXPECT_EQ(zcollCommInitRankConfig(&again, 1, uid, 0, &cfg), zcollInvalidUsage);
  std::string msg = zcollGetLastError(nullptr);
  EXPECT_NE(msg.find("already used"), std::string::npos) << msg;
  EXPECT_EQ(again, nullptr);
}

// Ranks 0 and 2 of 4 arrive; the root times out and both learn which ranks never came.
TEST(Bootstrap, ATimeoutNamesTheRanksThatNeverArrived) {
  RendezvousId id = startRoot(4, 2);
  std::vector<std::thread> ts;
  std::vector<std::string> msgs(4);
  for (int r : {0, 2})
    ts.emplace_back([&, r] {
      std::vector<std::string> all;
      EXPECT_EQ(rendezvousAllGather(id, r, 4, "x", 10, &all), zcollTimeout);
      msgs[r] = threadLastError();
    });
  for (auto& t : ts) t.join();
  for (int r : {0, 2})
    EXPECT_NE(msgs[r].find("2 of 4 ranks arrived; ranks 1, 3 never did"), std::string::npos)
        << msgs[r];
}

// The root's process calls the rendezvous off: the rank waiting in it and a late one are
// refused at once, saying so.
TEST(Bootstrap, ACancelledRendezvousRefusesEveryRankAtOnce) {
  SockAddr addr{};
  addr.storage.in4.sin_family = AF_INET;
  addr.storage.in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.len = sizeof(sockaddr_in);
  RendezvousId id{};
  ASSERT_EQ(startRendezvousRoot(addr, kMagic, 0, 30, true, &id), zcollSuccess);
  const auto start = std::chrono::steady_clock::now();
  std::thread waiting([&] {
    std::vector<std::string> all;
    EXPECT_EQ(rendezvousAllGather(id, 1, 3, "x", 30, &all), zcollRemoteError);
    EXPECT_NE(threadLastError().find("called it off"), std::string::npos) << threadLastError();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  cancelRendezvousRoot(id);
  waiting.join();
  std::vector<std::string> all;
  EXPECT_EQ(rendezvousAllGather(id, 2, 3, "x", 30, &all), zcollRemoteError);
  EXPECT_NE(threadLastError().find("called it off"), std::string::npos) << threadLastError();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));  // not the 30 s
}

}  // namespace
}  // namespace zcoll
