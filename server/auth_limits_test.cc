// The per-source attempt budget and the log throttle, on a fake clock.
#include "server/auth_limits.h"

#include <gtest/gtest.h>

namespace ringfs::server {
namespace {

class FakeClock {
 public:
  absl::Time Now() const { return now_; }
  void Advance(absl::Duration d) { now_ += d; }
  std::function<absl::Time()> Fn() {
    return [this] { return now_; };
  }

 private:
  absl::Time now_ = absl::FromUnixSeconds(1'000'000);
};

TEST(AuthRateLimiterTest, BurstThenRefillPerSource) {
  FakeClock clock;
  AuthRateLimiter::Options options;
  options.burst = 5;
  options.per_second = 2;
  options.now = clock.Fn();
  AuthRateLimiter limiter(options);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(limiter.TryAcquire("10.0.0.1")) << i;
  EXPECT_FALSE(limiter.TryAcquire("10.0.0.1"));
  EXPECT_TRUE(limiter.TryAcquire("10.0.0.2")) << "another source has its own bucket";
  clock.Advance(absl::Milliseconds(499));
  EXPECT_FALSE(limiter.TryAcquire("10.0.0.1"));
  clock.Advance(absl::Milliseconds(2));
  EXPECT_TRUE(limiter.TryAcquire("10.0.0.1")) << "one attempt earned back after 0.5 s";
  EXPECT_FALSE(limiter.TryAcquire("10.0.0.1"));
  clock.Advance(absl::Hours(1));
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(limiter.TryAcquire("10.0.0.1")) << "capped at burst";
  EXPECT_FALSE(limiter.TryAcquire("10.0.0.1"));
}

TEST(AuthRateLimiterTest, SuccessIsRefunded) {
  FakeClock clock;
  AuthRateLimiter::Options options;
  options.burst = 2;
  options.per_second = 0.001;
  options.now = clock.Fn();
  AuthRateLimiter limiter(options);
  // A mount opening many connections that all authenticate never runs dry.
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(limiter.TryAcquire("10.0.0.1")) << i;
    limiter.Refund("10.0.0.1");
  }
  EXPECT_TRUE(limiter.TryAcquire("10.0.0.1"));
  EXPECT_TRUE(limiter.TryAcquire("10.0.0.1"));
  EXPECT_FALSE(limiter.TryAcquire("10.0.0.1"));
}

TEST(AuthRateLimiterTest, BoundedSourcesForgetFullBucketsFirst) {
  FakeClock clock;
  AuthRateLimiter::Options options;
  options.burst = 1;
  options.per_second = 1;
  options.max_sources = 3;
  options.now = clock.Fn();
  AuthRateLimiter limiter(options);
  EXPECT_TRUE(limiter.TryAcquire("a"));
  EXPECT_TRUE(limiter.TryAcquire("b"));
  EXPECT_TRUE(limiter.TryAcquire("c"));
  EXPECT_FALSE(limiter.TryAcquire("d")) << "table full of empty buckets: no new source";
  clock.Advance(absl::Seconds(2));
  EXPECT_TRUE(limiter.TryAcquire("d")) << "refilled buckets are forgotten to make room";
}

TEST(LogThrottleTest, SummarisesWhatItHeldBack) {
  FakeClock clock;
  LogThrottle::Options options;
  options.lines = 3;
  options.window = absl::Seconds(10);
  options.now = clock.Fn();
  LogThrottle throttle(options);
  uint64_t suppressed = 99;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(throttle.Admit(&suppressed));
    EXPECT_EQ(suppressed, 0u);
  }
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(throttle.Admit(&suppressed));
  EXPECT_EQ(throttle.TakeSuppressed(), 0u) << "the window is still open";
  clock.Advance(absl::Seconds(10));
  ASSERT_TRUE(throttle.Admit(&suppressed));
  EXPECT_EQ(suppressed, 1000u);
  for (int i = 0; i < 7; ++i) EXPECT_TRUE(throttle.Admit(&suppressed) || i >= 2);
  clock.Advance(absl::Seconds(10));
  EXPECT_EQ(throttle.TakeSuppressed(), 5u) << "a flood that stopped is summarised too";
  EXPECT_EQ(throttle.TakeSuppressed(), 0u);
  ASSERT_TRUE(throttle.Admit(&suppressed));
  EXPECT_EQ(suppressed, 0u);
}

}  // namespace
}  // namespace ringfs::server
