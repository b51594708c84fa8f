#include "server/session_fence.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <vector>

namespace ringfs::server {
namespace {

TEST(SessionFenceTest, AFirstConnectionWaitsForNothing) {
  auto fence = std::make_shared<SessionFence>();
  SessionTicket a = fence->Begin(1, 0);
  EXPECT_EQ(a.waits(), 0u);
  EXPECT_TRUE(a.Attach([] { FAIL() << "closed without a successor"; }));
  EXPECT_FALSE(a.Await([] { FAIL() << "woken without waiting"; }));
  EXPECT_FALSE(a.superseded());
  EXPECT_EQ(fence->live(), 1u);
}

TEST(SessionFenceTest, TheReplacementWaitsUntilTheReplacedEnds) {
  auto fence = std::make_shared<SessionFence>();
  auto a = std::make_unique<SessionTicket>(fence->Begin(1, 0));
  int closes = 0;
  ASSERT_TRUE(a->Attach([&] { ++closes; }));
  SessionTicket b = fence->Begin(2, 1);
  EXPECT_TRUE(a->superseded());
  EXPECT_EQ(closes, 1) << "the replaced connection's worker is asked to close it";
  EXPECT_EQ(b.waits(), 1u);
  int wakes = 0;
  ASSERT_TRUE(b.Attach([] {}));
  EXPECT_TRUE(b.Await([&] { ++wakes; }));
  EXPECT_EQ(wakes, 0);
  a.reset();  // the old connection is destroyed: nothing of it runs any more
  EXPECT_EQ(wakes, 1);
  EXPECT_EQ(fence->live(), 1u);
  EXPECT_EQ(fence->replaced_total(), 1u);
}

TEST(SessionFenceTest, ReplacedBeforeItsWorkerTookItItNeverStarts) {
  auto fence = std::make_shared<SessionFence>();
  SessionTicket a = fence->Begin(1, 0);
  SessionTicket b = fence->Begin(2, 1);
  EXPECT_FALSE(a.Attach([] { FAIL() << "no hook is called for a superseded session"; }));
}

TEST(SessionFenceTest, AReplacementOfAReplacementWaitsForBoth) {
  auto fence = std::make_shared<SessionFence>();
  auto a = std::make_unique<SessionTicket>(fence->Begin(1, 0));
  auto b = std::make_unique<SessionTicket>(fence->Begin(2, 1));  // lost before it started
  SessionTicket c = fence->Begin(3, 2);
  EXPECT_EQ(c.waits(), 2u);
  int wakes = 0;
  ASSERT_TRUE(c.Await([&] { ++wakes; }));
  b.reset();
  EXPECT_EQ(wakes, 0) << "the first connection still runs";
  a.reset();
  EXPECT_EQ(wakes, 1);
}

TEST(SessionFenceTest, OtherLiveConnectionsAreNeitherReplacedNorWaitedFor) {
  auto fence = std::make_shared<SessionFence>();
  SessionTicket queue0 = fence->Begin(1, 0);
  SessionTicket queue1 = fence->Begin(2, 0);
  SessionTicket next = fence->Begin(3, 1);
  EXPECT_TRUE(queue0.superseded());
  EXPECT_FALSE(queue1.superseded());
  EXPECT_EQ(next.waits(), 1u);
  EXPECT_EQ(fence->superseded(), 1u);
}

TEST(SessionFenceTest, AnEndedOrUnknownSessionLeavesNothingToWaitFor) {
  auto fence = std::make_shared<SessionFence>();
  { SessionTicket a = fence->Begin(1, 0); }
  SessionTicket b = fence->Begin(2, 1);
  EXPECT_EQ(b.waits(), 0u);
  SessionTicket c = fence->Begin(3, 99);
  EXPECT_EQ(c.waits(), 0u);
  EXPECT_EQ(fence->replaced_total(), 0u);
}

TEST(SessionFenceTest, ASessionThatEndsWhileWaitingIsNotWokenLater) {
  auto fence = std::make_shared<SessionFence>();
  auto a = std::make_unique<SessionTicket>(fence->Begin(1, 0));
  auto b = std::make_unique<SessionTicket>(fence->Begin(2, 1));
  ASSERT_TRUE(b->Await([] { FAIL() << "woken after it ended"; }));
  b.reset();
  a.reset();
  EXPECT_EQ(fence->live(), 0u);
}

TEST(SessionFenceTest, TheReplacedEndingBeforeTheWaitLeavesNothingToWaitFor) {
  auto fence = std::make_shared<SessionFence>();
  auto a = std::make_unique<SessionTicket>(fence->Begin(1, 0));
  SessionTicket b = fence->Begin(2, 1);
  a.reset();  // ended while b was still in its worker's mailbox
  EXPECT_FALSE(b.Await([] { FAIL() << "nothing to wait for"; }));
}

TEST(SessionFenceTest, AConnectionThatReplacesNoneWaitsForNothing) {
  auto fence = std::make_shared<SessionFence>();
  SessionTicket a = fence->Begin(1, 0);
  SessionTicket b = fence->Begin(2, 1);
  SessionTicket other_queue = fence->Begin(3, 0);  // a queue's first connection
  EXPECT_EQ(other_queue.waits(), 0u);
  SessionTicket named_ended = fence->Begin(4, 77);  // names one that ended: waits for a
  EXPECT_EQ(named_ended.waits(), 1u);
}

// Threads begin, replace, wait and end sessions at random: every wait ends with one wake or
// with its own session's end, never with a wake after that.
TEST(SessionFenceTest, ConcurrentReplacementsWakeEveryWaiterOnce) {
  auto fence = std::make_shared<SessionFence>();
  std::atomic<uint64_t> next_id{1};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(t);
      uint64_t previous = 0;
      for (int i = 0; i < 2000; ++i) {
        const uint64_t id = next_id.fetch_add(1);
        auto woken = std::make_shared<std::atomic<int>>(0);
        auto ended = std::make_shared<std::atomic<bool>>(false);
        auto ticket = std::make_unique<SessionTicket>(fence->Begin(id, previous));
        ticket->Attach([] {});
        ticket->Await([woken, ended, &bad] {
          if (ended->load() || woken->fetch_add(1) != 0) bad.fetch_add(1);
        });
        if (random() % 4 == 0) std::this_thread::yield();
        ticket.reset();  // once its end returned, no wake of it may come
        ended->store(true);
        previous = random() % 3 == 0 ? 0 : id;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(fence->live(), 0u);
}

TEST(SessionFenceTest, AMovedTicketEndsOnce) {
  auto fence = std::make_shared<SessionFence>();
  SessionTicket a = fence->Begin(1, 0);
  SessionTicket moved = std::move(a);
  EXPECT_EQ(fence->live(), 1u);
  moved = SessionTicket();
  EXPECT_EQ(fence->live(), 0u);
}

}  // namespace
}  // namespace ringfs::server
