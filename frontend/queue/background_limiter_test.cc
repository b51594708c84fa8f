#include "frontend/queue/background_limiter.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringfs::frontend::queue {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Optional;

TEST(BackgroundLimiterTest, DefaultIsUnlimited) {
  BackgroundLimiter limiter;
  EXPECT_EQ(limiter.limit(), BackgroundLimiter::kUnlimited);
  for (uint64_t token = 0; token < 1000; ++token) EXPECT_TRUE(limiter.TryAdmit(token));
  EXPECT_EQ(limiter.inflight(), 1000u);
  EXPECT_EQ(limiter.queued(), 0u);
}

TEST(BackgroundLimiterTest, QueuesBeyondTheLimitAndReleasesInArrivalOrder) {
  BackgroundLimiter limiter;
  ASSERT_TRUE(limiter.SetLimit(2).ok());
  EXPECT_TRUE(limiter.TryAdmit(1));
  EXPECT_TRUE(limiter.TryAdmit(2));
  EXPECT_FALSE(limiter.TryAdmit(3));
  EXPECT_FALSE(limiter.TryAdmit(4));
  EXPECT_FALSE(limiter.TryAdmit(5));
  EXPECT_EQ(limiter.inflight(), 2u);
  EXPECT_EQ(limiter.queued(), 3u);

  EXPECT_THAT(limiter.OnComplete(), Optional(3u));
  EXPECT_THAT(limiter.OnComplete(), Optional(4u));
  EXPECT_THAT(limiter.OnComplete(), Optional(5u));
  EXPECT_EQ(limiter.inflight(), 2u);
  EXPECT_EQ(limiter.OnComplete(), std::nullopt);
  EXPECT_EQ(limiter.OnComplete(), std::nullopt);
  EXPECT_EQ(limiter.inflight(), 0u);
  EXPECT_EQ(limiter.queued(), 0u);
}

TEST(BackgroundLimiterTest, LimitOfOneNeverHasTwoInFlight) {
  BackgroundLimiter limiter;
  ASSERT_TRUE(limiter.SetLimit(1).ok());
  std::vector<uint64_t> sent;
  for (uint64_t token = 0; token < 100; ++token) {
    if (limiter.TryAdmit(token)) sent.push_back(token);
    if (token % 3 == 2) {
      if (std::optional<uint64_t> next = limiter.OnComplete()) sent.push_back(*next);
    }
    EXPECT_LE(limiter.inflight(), 1u);
  }
  while (limiter.inflight() > 0) {
    if (std::optional<uint64_t> next = limiter.OnComplete()) sent.push_back(*next);
  }
  EXPECT_EQ(sent.size(), 100u);
  for (uint64_t i = 0; i < sent.size(); ++i) EXPECT_EQ(sent[i], i);  // FIFO, nothing lost
  EXPECT_EQ(limiter.max_inflight_seen(), 1u);
}

TEST(BackgroundLimiterTest, RaisingTheLimitReleasesQueuedInOrder) {
  BackgroundLimiter limiter;
  ASSERT_TRUE(limiter.SetLimit(1).ok());
  EXPECT_TRUE(limiter.TryAdmit(10));
  for (uint64_t token = 11; token <= 15; ++token) EXPECT_FALSE(limiter.TryAdmit(token));

  ASSERT_TRUE(limiter.SetLimit(4).ok());
  EXPECT_THAT(limiter.DrainAdmissible(), ElementsAre(11u, 12u, 13u));
  EXPECT_EQ(limiter.inflight(), 4u);
  EXPECT_EQ(limiter.queued(), 2u);
  EXPECT_THAT(limiter.DrainAdmissible(), IsEmpty());

  ASSERT_TRUE(limiter.SetLimit(BackgroundLimiter::kUnlimited).ok());
  EXPECT_THAT(limiter.DrainAdmissible(), ElementsAre(14u, 15u));
  EXPECT_EQ(limiter.queued(), 0u);
}

TEST(BackgroundLimiterTest, NewArrivalsWaitBehindQueuedOnesUntilDrained) {
  BackgroundLimiter limiter;
  ASSERT_TRUE(limiter.SetLimit(1).ok());
  EXPECT_TRUE(limiter.TryAdmit(1));
  EXPECT_FALSE(limiter.TryAdmit(2));
  ASSERT_TRUE(limiter.SetLimit(3).ok());
  // Not drained yet: 3 must not overtake 2.
  EXPECT_FALSE(limiter.TryAdmit(3));
  EXPECT_THAT(limiter.DrainAdmissible(), ElementsAre(2u, 3u));
}

TEST(BackgroundLimiterTest, LoweringTheLimitAdmitsNothingUntilBelowIt) {
  BackgroundLimiter limiter;
  ASSERT_TRUE(limiter.SetLimit(4).ok());
  for (uint64_t token = 1; token <= 4; ++token) EXPECT_TRUE(limiter.TryAdmit(token));
  EXPECT_FALSE(limiter.TryAdmit(5));
  EXPECT_FALSE(limiter.TryAdmit(6));

  ASSERT_TRUE(limiter.SetLimit(2).ok());
  EXPECT_THAT(limiter.DrainAdmissible(), IsEmpty());
  EXPECT_EQ(limiter.OnComplete(), std::nullopt);    // 3 in flight, limit 2
  EXPECT_EQ(limiter.OnComplete(), std::nullopt);    // 2 in flight: not below the limit
  EXPECT_THAT(limiter.OnComplete(), Optional(5u));  // 1 in flight: 5 makes 2
  EXPECT_THAT(limiter.OnComplete(), Optional(6u));
  EXPECT_EQ(limiter.inflight(), 2u);
  EXPECT_EQ(limiter.queued(), 0u);
  EXPECT_EQ(limiter.max_inflight_seen(), 4u);
}

TEST(BackgroundLimiterTest, ZeroLimitIsRejectedAndLeavesTheLimit) {
  BackgroundLimiter limiter;
  ASSERT_TRUE(limiter.SetLimit(3).ok());
  absl::Status status = limiter.SetLimit(0);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "background limit must be at least 1 (use 'unlimited' for no limit)");
  EXPECT_EQ(limiter.limit(), 3u);
}

TEST(BackgroundLimiterTest, CountersAndHighWater) {
  BackgroundLimiter limiter;
  ASSERT_TRUE(limiter.SetLimit(2).ok());
  limiter.TryAdmit(1);
  limiter.TryAdmit(2);
  limiter.TryAdmit(3);
  EXPECT_EQ(limiter.admitted_total(), 2u);
  EXPECT_EQ(limiter.queued_total(), 1u);
  EXPECT_EQ(limiter.max_inflight_seen(), 2u);

  limiter.OnComplete();  // admits 3
  limiter.OnComplete();
  EXPECT_EQ(limiter.admitted_total(), 3u);
  EXPECT_EQ(limiter.inflight(), 1u);
  EXPECT_EQ(limiter.max_inflight_seen(), 2u);

  limiter.ResetHighWater();
  EXPECT_EQ(limiter.max_inflight_seen(), 0u);
  limiter.OnComplete();
  EXPECT_EQ(limiter.max_inflight_seen(), 0u);
  limiter.TryAdmit(4);
  EXPECT_EQ(limiter.max_inflight_seen(), 1u);
  limiter.TryAdmit(5);
  EXPECT_EQ(limiter.max_inflight_seen(), 2u);
  EXPECT_EQ(limiter.admitted_total(), 5u);
  EXPECT_EQ(limiter.queued_total(), 1u);
}

TEST(BackgroundLimiterTest, FifoSurvivesGrowthWhileWrapped) {
  BackgroundLimiter limiter;
  ASSERT_TRUE(limiter.SetLimit(1).ok());
  EXPECT_TRUE(limiter.TryAdmit(0));
  uint64_t next_token = 1;
  uint64_t next_expected = 1;
  // Move the ring's head forward, then grow it several times while it wraps.
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 10 + round * 20; ++i) EXPECT_FALSE(limiter.TryAdmit(next_token++));
    for (int i = 0; i < 7; ++i) EXPECT_THAT(limiter.OnComplete(), Optional(next_expected++));
  }
  while (limiter.queued() > 0) EXPECT_THAT(limiter.OnComplete(), Optional(next_expected++));
  EXPECT_EQ(next_expected, next_token);
}

}  // namespace
}  // namespace ringfs::frontend::queue

namespace ringfs::frontend::queue {
namespace {

TEST(BackgroundLimiterTakeQueuedTest, RemovesWaitingTokensInOrderWithoutAdmitting) {
  BackgroundLimiter limiter;
  ASSERT_TRUE(limiter.SetLimit(1).ok());
  EXPECT_TRUE(limiter.TryAdmit(1));
  EXPECT_FALSE(limiter.TryAdmit(2));
  EXPECT_FALSE(limiter.TryAdmit(3));
  EXPECT_EQ(limiter.TakeQueued(), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(limiter.queued(), 0u);
  EXPECT_EQ(limiter.inflight(), 1u);
  EXPECT_EQ(limiter.OnComplete(), std::nullopt);
}

}  // namespace
}  // namespace ringfs::frontend::queue

namespace ringfs::frontend::queue {
namespace {

// Regression: the real-mount test of L=1 saw a high-water mark of 3 because the reset kept the
// requests admitted under the old, higher limit.
TEST(BackgroundLimiterHighWaterTest, LoweredLimitIsNeverExceededByNewAdmissions) {
  BackgroundLimiter limiter;
  for (uint64_t token = 1; token <= 3; ++token) ASSERT_TRUE(limiter.TryAdmit(token));
  ASSERT_TRUE(limiter.SetLimit(1).ok());
  limiter.ResetHighWater();
  EXPECT_FALSE(limiter.TryAdmit(4));
  limiter.OnComplete();
  limiter.OnComplete();
  EXPECT_EQ(limiter.OnComplete(), std::optional<uint64_t>(4));
  EXPECT_EQ(limiter.max_inflight_seen(), 1u);
}

}  // namespace
}  // namespace ringfs::frontend::queue
