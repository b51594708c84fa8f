#include "frontend/queue/queue_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringfs::frontend::queue {
namespace {

using ::testing::ElementsAre;

const Topology& TwoNodesOfFour() {
  static const Topology topology = Topology::ForTest({{0, 1, 2, 3}, {4, 5, 6, 7}});
  return topology;
}

TEST(QueueConfigTest, DefaultIsValidAndUsesEveryCpu) {
  QueueConfig config = DefaultQueueConfig(TwoNodesOfFour());
  EXPECT_TRUE(Validate(config, TwoNodesOfFour()).ok());
  EXPECT_THAT(config.active_cpus, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_EQ(config.foreground, Policy::kLocal);
  EXPECT_EQ(config.background, Policy::kLocal);
  EXPECT_EQ(config.commit, CommitLocality::kForwarder);
  EXPECT_EQ(BackgroundLimitOf(config, 3), BackgroundLimiter::kUnlimited);
}

TEST(QueueConfigTest, ValidationMessages) {
  const Topology& topology = TwoNodesOfFour();
  const QueueConfig good = DefaultQueueConfig(topology);
  const auto message = [&](QueueConfig config) {
    absl::Status status = Validate(config, topology);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    return std::string(status.message());
  };

  QueueConfig config = good;
  config.active_cpus = {};
  EXPECT_EQ(message(config), "active CPU set is empty");
  config.active_cpus = {1, 9};
  EXPECT_EQ(message(config), "active CPU 9 is not a possible CPU (possible: 0-7)");
  config.active_cpus = {1, 1};
  EXPECT_EQ(message(config), "active CPU 1 is listed twice");

  config = good;
  config.background_limit = 0;
  EXPECT_EQ(message(config),
            "background limit is 0; it must be at least 1 (use 'unlimited' for no limit)");
  config = good;
  config.background_limit_by_cpu[2] = 0;
  EXPECT_EQ(message(config),
            "background limit of CPU 2 is 0; it must be at least 1 (use 'unlimited' for no limit)");
  config = good;
  config.background_limit_by_cpu[8] = 4;
  EXPECT_EQ(message(config),
            "background limit for CPU 8, which is not a possible CPU (possible: 0-7)");

  config = good;
  config.thresholds.numa = 1;
  EXPECT_EQ(message(config), "thresholds must satisfy local <= numa <= global (got 2/1/4)");
}

TEST(QueueConfigTest, PerWorkerLimitOverridesTheDefault) {
  QueueConfig config = DefaultQueueConfig(TwoNodesOfFour());
  config.background_limit = 8;
  config.background_limit_by_cpu[5] = 1;
  EXPECT_TRUE(Validate(config, TwoNodesOfFour()).ok());
  EXPECT_EQ(BackgroundLimitOf(config, 5), 1u);
  EXPECT_EQ(BackgroundLimitOf(config, 4), 8u);
}

TEST(QueueConfigTest, EveryPolicyIsAllowedForBothClasses) {
  QueueConfig config = DefaultQueueConfig(TwoNodesOfFour());
  for (Policy policy : {Policy::kLocal, Policy::kNextCore, Policy::kP2c}) {
    config.foreground = policy;
    config.background = policy;
    EXPECT_TRUE(Validate(config, TwoNodesOfFour()).ok()) << PolicyName(policy);
  }
}

TEST(ParseCpuSetTest, SortsAndMerges) {
  EXPECT_THAT(*ParseCpuSet("0,2-3"), ElementsAre(0, 2, 3));
  EXPECT_THAT(*ParseCpuSet("3,0-1,1"), ElementsAre(0, 1, 3));
  EXPECT_EQ(ParseCpuSet("0,x").status().message(),
            "bad CPU list '0,x': 'x' is not a CPU or an ascending range of CPUs (0-65535)");
}

TEST(CommitLocalityTest, ParsesAndNames) {
  EXPECT_EQ(ParseCommitLocality("origin").value_or(CommitLocality::kForwarder),
            CommitLocality::kOrigin);
  EXPECT_EQ(ParseCommitLocality("forwarder").value_or(CommitLocality::kOrigin),
            CommitLocality::kForwarder);
  EXPECT_STREQ(CommitLocalityName(CommitLocality::kOrigin), "origin");
  EXPECT_EQ(ParseCommitLocality("owner").status().message(),
            "unknown commit locality 'owner' (valid: forwarder, origin)");
}

TEST(ParseQueueOptionTest, AppliesEveryKey) {
  QueueConfig config = DefaultQueueConfig(TwoNodesOfFour());
  config.background_limit_by_cpu[3] = 2;
  ASSERT_TRUE(ParseQueueOption("active", "0-1,5", &config).ok());
  ASSERT_TRUE(ParseQueueOption("bg_limit", "16", &config).ok());
  ASSERT_TRUE(ParseQueueOption("fg_policy", "p2c", &config).ok());
  ASSERT_TRUE(ParseQueueOption("bg_policy", "local", &config).ok());
  ASSERT_TRUE(ParseQueueOption("commit", "origin", &config).ok());
  ASSERT_TRUE(ParseQueueOption("thresholds", "1/5/9", &config).ok());
  EXPECT_EQ(config.worker_priority, WorkerPriority::kIdle);  // the default
  ASSERT_TRUE(ParseQueueOption("worker_sched", "normal", &config).ok());
  EXPECT_EQ(config.worker_priority, WorkerPriority::kNormal);
  ASSERT_TRUE(ParseQueueOption("worker_sched", "idle", &config).ok());
  EXPECT_EQ(config.worker_priority, WorkerPriority::kIdle);
  EXPECT_THAT(config.active_cpus, ElementsAre(0, 1, 5));
  EXPECT_EQ(config.background_limit, 16u);
  EXPECT_TRUE(config.background_limit_by_cpu.empty());  // bg_limit is for all workers
  EXPECT_EQ(config.foreground, Policy::kP2c);
  EXPECT_EQ(config.background, Policy::kLocal);
  EXPECT_EQ(config.commit, CommitLocality::kOrigin);
  EXPECT_EQ(config.thresholds.local, 1u);
  EXPECT_EQ(config.thresholds.numa, 5u);
  EXPECT_EQ(config.thresholds.global, 9u);
  EXPECT_EQ(config.thresholds.next_core_retries, 2u);  // not part of the option
  EXPECT_TRUE(Validate(config, TwoNodesOfFour()).ok());
}

TEST(ParseQueueOptionTest, BackgroundLimitUnlimitedAndHuge) {
  QueueConfig config;
  ASSERT_TRUE(ParseQueueOption("bg_limit", "4", &config).ok());
  ASSERT_TRUE(ParseQueueOption("bg_limit", "unlimited", &config).ok());
  EXPECT_EQ(config.background_limit, BackgroundLimiter::kUnlimited);
  ASSERT_TRUE(ParseQueueOption("bg_limit", "99999999999", &config).ok());
  EXPECT_EQ(config.background_limit, BackgroundLimiter::kUnlimited);
}

TEST(ParseQueueOptionTest, ErrorMessagesNameTheOptionAndLeaveConfigAlone) {
  QueueConfig config;
  config.background_limit = 7;
  const auto message = [&](std::string_view key, std::string_view value) {
    absl::Status status = ParseQueueOption(key, value, &config);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    return std::string(status.message());
  };
  EXPECT_EQ(message("bg_limit", "0"),
            "queue option bg_limit=0: a background limit is a whole number >= 1, or 'unlimited'");
  EXPECT_EQ(message("bg_limit", "-3"),
            "queue option bg_limit=-3: a background limit is a whole number >= 1, or "
            "'unlimited'");
  EXPECT_EQ(message("active", "0-"),
            "queue option active=0-: bad CPU list '0-': '0-' is not a CPU or an ascending range "
            "of CPUs (0-65535)");
  EXPECT_EQ(message("fg_policy", "fifo"),
            "queue option fg_policy=fifo: unknown placement policy 'fifo' (valid: local, "
            "next-core, p2c)");
  EXPECT_EQ(message("commit", "here"),
            "queue option commit=here: unknown commit locality 'here' (valid: forwarder, origin)");
  EXPECT_EQ(message("thresholds", "2/3"),
            "queue option thresholds=2/3: expected LOCAL/NUMA/GLOBAL, e.g. 2/3/4");
  EXPECT_EQ(message("thresholds", "4/3/2"),
            "queue option thresholds=4/3/2: thresholds must satisfy local <= numa <= global "
            "(got 4/3/2)");
  EXPECT_EQ(message("thresholds", "0/3/4"),
            "queue option thresholds=0/3/4: thresholds must be at least 1 (got 0/3/4)");
  EXPECT_EQ(message("queues", "2"),
            "queue option queues=2: not a queue option (valid: active, bg_limit, fg_policy, "
            "bg_policy, commit, thresholds, worker_sched)");
  EXPECT_EQ(message("worker_sched", "fifo"),
            "queue option worker_sched=fifo: worker_sched is idle or normal");
  EXPECT_EQ(config.background_limit, 7u);
  EXPECT_EQ(config.thresholds.local, 2u);
}

TEST(ParseQueueOptionTest, KnowsItsKeys) {
  for (const char* key :
       {"active", "bg_limit", "fg_policy", "bg_policy", "commit", "thresholds", "worker_sched"}) {
    EXPECT_TRUE(IsQueueOptionKey(key)) << key;
  }
  EXPECT_FALSE(IsQueueOptionKey("allow_other"));
  EXPECT_FALSE(IsQueueOptionKey(""));
}

}  // namespace
}  // namespace ringfs::frontend::queue
