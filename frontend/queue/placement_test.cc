#include "frontend/queue/placement.h"

#include <deque>
#include <random>

#include "absl/random/random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringfs::frontend::queue {
namespace {

// Returns the scripted values in order, so a test states exactly which ranks p2c draws:
// the first draw picks rank bits % n, the second rank bits % (n - 1), skipping the first.
class ScriptedBits {
 public:
  using result_type = uint64_t;
  explicit ScriptedBits(std::initializer_list<uint64_t> values) : values_(values) {}
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return UINT64_MAX; }
  result_type operator()() {
    EXPECT_FALSE(values_.empty()) << "more random draws than scripted";
    if (values_.empty()) return 0;
    const uint64_t value = values_.front();
    values_.pop_front();
    return value;
  }
  size_t left() const { return values_.size(); }

 private:
  std::deque<uint64_t> values_;
};

// A load snapshot over a Topology; every CPU starts active and idle.
class Loads {
 public:
  explicit Loads(const Topology& topology)
      : topology_(topology), workers_(topology.size(), WorkerLoad{true, 0}) {}
  Loads& Set(int cpu, uint32_t inflight) {
    workers_[topology_.IndexOf(cpu)].inflight = inflight;
    return *this;
  }
  Loads& ActiveOnly(std::initializer_list<int> cpus) {
    for (WorkerLoad& worker : workers_) worker.active = false;
    for (int cpu : cpus) workers_[topology_.IndexOf(cpu)].active = true;
    return *this;
  }
  LoadView view() const { return LoadView{workers_}; }

 private:
  const Topology& topology_;
  std::vector<WorkerLoad> workers_;
};

const Topology& TwoNodesOfEight() {
  static const Topology topology =
      Topology::ForTest({{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}});
  return topology;
}

int Choose(Policy policy, int owner, const Loads& loads, ScriptedBits& bits,
           const Thresholds& thresholds = {}, const Topology& topology = TwoNodesOfEight()) {
  return ChooseWorker(policy, owner, topology, loads.view(), thresholds, bits);
}

TEST(PolicyTest, ParsesAndNamesEveryPolicy) {
  for (Policy policy : {Policy::kLocal, Policy::kNextCore, Policy::kP2c}) {
    absl::StatusOr<Policy> parsed = ParsePolicy(PolicyName(policy));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, policy);
  }
  EXPECT_STREQ(PolicyName(Policy::kNextCore), "next-core");
  absl::StatusOr<Policy> bad = ParsePolicy("nextcore");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "unknown placement policy 'nextcore' (valid: local, next-core, p2c)");
}

TEST(ThresholdsTest, Validation) {
  EXPECT_TRUE(ValidateThresholds(Thresholds{}).ok());
  EXPECT_TRUE(ValidateThresholds(Thresholds{1, 1, 1, 0}).ok());
  EXPECT_EQ(ValidateThresholds(Thresholds{0, 3, 4, 2}).message(),
            "thresholds must be at least 1 (got 0/3/4)");
  EXPECT_EQ(ValidateThresholds(Thresholds{2, 3, 0, 2}).message(),
            "thresholds must be at least 1 (got 2/3/0)");
  EXPECT_EQ(ValidateThresholds(Thresholds{3, 2, 4, 2}).message(),
            "thresholds must satisfy local <= numa <= global (got 3/2/4)");
  EXPECT_EQ(ValidateThresholds(Thresholds{2, 5, 4, 2}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(LocalPolicyTest, AlwaysTheOwner) {
  ScriptedBits bits({});
  Loads loads(TwoNodesOfEight());
  loads.Set(3, 100);
  EXPECT_EQ(Choose(Policy::kLocal, 3, loads, bits), 3);
  EXPECT_EQ(Choose(Policy::kLocal, 12, loads, bits), 12);
}

TEST(NextCoreTest, NextActiveCpuOfTheNodeWrappingWithinIt) {
  ScriptedBits bits({});
  Loads loads(TwoNodesOfEight());
  EXPECT_EQ(Choose(Policy::kNextCore, 3, loads, bits), 4);
  EXPECT_EQ(Choose(Policy::kNextCore, 7, loads, bits), 0);  // not 8: that is node 1
  EXPECT_EQ(Choose(Policy::kNextCore, 15, loads, bits), 8);
}

TEST(NextCoreTest, SkipsInactiveCpus) {
  ScriptedBits bits({});
  Loads loads(TwoNodesOfEight());
  loads.ActiveOnly({0, 2, 5, 9});
  EXPECT_EQ(Choose(Policy::kNextCore, 2, loads, bits), 5);
  EXPECT_EQ(Choose(Policy::kNextCore, 5, loads, bits), 0);
}

TEST(NextCoreTest, RetriesFollowingCpusWhenBusy) {
  ScriptedBits bits({});
  Loads loads(TwoNodesOfEight());
  loads.Set(4, 2).Set(5, 2);  // at thresholds.local = 2: busy
  EXPECT_EQ(Choose(Policy::kNextCore, 3, loads, bits), 6);
}

TEST(NextCoreTest, RetriesAreCappedThenLeastLoadedTriedWins) {
  ScriptedBits bits({});
  Loads loads(TwoNodesOfEight());
  loads.Set(4, 5).Set(5, 3).Set(6, 4);  // 7 is idle but beyond 2 retries
  EXPECT_EQ(Choose(Policy::kNextCore, 3, loads, bits), 5);
}

TEST(NextCoreTest, TiesAmongTriedGoToTheFirstTried) {
  ScriptedBits bits({});
  Loads loads(TwoNodesOfEight());
  loads.Set(4, 3).Set(5, 3).Set(6, 3);
  EXPECT_EQ(Choose(Policy::kNextCore, 3, loads, bits), 4);
}

TEST(NextCoreTest, RetryCountIsConfigurable) {
  ScriptedBits bits({});
  Loads loads(TwoNodesOfEight());
  loads.Set(4, 9).Set(5, 9).Set(6, 9).Set(7, 9);
  Thresholds no_retries;
  no_retries.next_core_retries = 0;
  EXPECT_EQ(Choose(Policy::kNextCore, 3, loads, bits, no_retries), 4);
  Thresholds many_retries;
  many_retries.next_core_retries = 5;
  EXPECT_EQ(Choose(Policy::kNextCore, 3, loads, bits, many_retries), 0);
}

TEST(NextCoreTest, ThresholdComesFromThresholdsLocal) {
  ScriptedBits bits({});
  Loads loads(TwoNodesOfEight());
  loads.Set(4, 2);
  Thresholds relaxed;
  relaxed.local = 3;
  relaxed.numa = 3;
  EXPECT_EQ(Choose(Policy::kNextCore, 3, loads, bits, relaxed), 4);
  EXPECT_EQ(Choose(Policy::kNextCore, 3, loads, bits), 5);
}

TEST(NextCoreTest, OnlyActiveCpuOfItsNodeKeepsTheRequest) {
  ScriptedBits bits({});
  Loads loads(TwoNodesOfEight());
  loads.ActiveOnly({3, 8, 9}).Set(3, 50);  // node 1 is idle, but next-core stays in the node
  EXPECT_EQ(Choose(Policy::kNextCore, 3, loads, bits), 3);
  const Topology single_cpu_nodes = Topology::ForTest({{0}, {1}, {2}});
  Loads single(single_cpu_nodes);
  EXPECT_EQ(Choose(Policy::kNextCore, 1, single, bits, {}, single_cpu_nodes), 1);
}

TEST(NextCoreTest, WrapsBackToTheOwnerAsTheLastCandidate) {
  // Two active CPUs in the node: the cycle after 0 is 1, then 0 itself.
  ScriptedBits bits({});
  const Topology topology = Topology::ForTest({{0, 1}});
  Loads loads(topology);
  loads.Set(1, 5);
  EXPECT_EQ(Choose(Policy::kNextCore, 0, loads, bits, {}, topology), 0);
  loads.Set(0, 7);
  EXPECT_EQ(Choose(Policy::kNextCore, 0, loads, bits, {}, topology), 1);  // least loaded tried
}

TEST(P2cTest, OwnerBelowLocalThresholdKeepsTheRequestWithoutDrawing) {
  ScriptedBits bits({});
  Loads loads(TwoNodesOfEight());
  loads.Set(3, 1);
  EXPECT_EQ(Choose(Policy::kP2c, 3, loads, bits), 3);
}

TEST(P2cTest, LessLoadedOfTwoInTheNode) {
  ScriptedBits bits({3, 5});  // ranks 3 and 5 -> 6 (skips the first): CPUs 3 and 6
  Loads loads(TwoNodesOfEight());
  loads.Set(0, 2).Set(3, 2).Set(6, 1);
  EXPECT_EQ(Choose(Policy::kP2c, 0, loads, bits), 6);
  EXPECT_EQ(bits.left(), 0u);
}

TEST(P2cTest, TieGoesToTheFirstDrawn) {
  ScriptedBits bits({6, 1});  // CPUs 6 and 1
  Loads loads(TwoNodesOfEight());
  loads.Set(0, 2).Set(6, 1).Set(1, 1);
  EXPECT_EQ(Choose(Policy::kP2c, 0, loads, bits), 6);
}

TEST(P2cTest, DrawsOnlyActiveCpus) {
  ScriptedBits bits({1, 1});  // active node-0 CPUs {0,2,4,6}: ranks 1, 2 -> CPUs 2, 4
  Loads loads(TwoNodesOfEight());
  loads.ActiveOnly({0, 2, 4, 6, 8}).Set(0, 2).Set(2, 1).Set(4, 0);
  EXPECT_EQ(Choose(Policy::kP2c, 0, loads, bits), 4);
}

TEST(P2cTest, FallsBackToAllNodesAboveTheNumaThreshold) {
  // Node draw: CPUs 1 and 2, both at numa = 3. Global draw over 16: ranks 9 and 12 -> 9, 13.
  ScriptedBits bits({1, 1, 9, 12});
  Loads loads(TwoNodesOfEight());
  for (int cpu = 0; cpu < 8; ++cpu) loads.Set(cpu, 3);
  loads.Set(9, 3).Set(13, 2);
  EXPECT_EQ(Choose(Policy::kP2c, 0, loads, bits), 13);
}

TEST(P2cTest, EverythingBusyTakesTheLeastLoadedConsidered) {
  ScriptedBits bits({1, 1, 9, 12});  // node: 1, 2; global: 9, 13
  Loads loads(TwoNodesOfEight());
  for (int cpu = 0; cpu < 16; ++cpu) loads.Set(cpu, 9);
  loads.Set(0, 8).Set(2, 6).Set(13, 5).Set(15, 0);  // 15 idle but never drawn
  EXPECT_EQ(Choose(Policy::kP2c, 0, loads, bits), 13);
}

TEST(P2cTest, EverythingBusyTiesGoToTheOwner) {
  ScriptedBits bits({1, 1, 9, 12});
  Loads loads(TwoNodesOfEight());
  for (int cpu = 0; cpu < 16; ++cpu) loads.Set(cpu, 4);
  EXPECT_EQ(Choose(Policy::kP2c, 0, loads, bits), 0);
}

TEST(P2cTest, NodeWithOneActiveCpuUsesItWithTheNumaThreshold) {
  // The owner is the node's only active CPU: at 2 it is busy locally but below numa = 3.
  ScriptedBits bits({});
  Loads loads(TwoNodesOfEight());
  loads.ActiveOnly({3, 8, 9}).Set(3, 2);
  EXPECT_EQ(Choose(Policy::kP2c, 3, loads, bits), 3);
  // At 3 it goes global: ranks 0 and 1 among {3, 8, 9} -> 3 and 8.
  ScriptedBits global_bits({0, 0});
  loads.Set(3, 3).Set(8, 1);
  EXPECT_EQ(Choose(Policy::kP2c, 3, loads, global_bits), 8);
}

TEST(P2cTest, SingleCpuNodes) {
  const Topology topology = Topology::ForTest({{0}, {1}, {2}, {3}});
  Loads loads(topology);
  loads.Set(0, 5).Set(1, 4).Set(2, 1);
  ScriptedBits bits({1, 1});  // global ranks 1, 2 -> CPUs 1, 2
  EXPECT_EQ(Choose(Policy::kP2c, 0, loads, bits, {}, topology), 2);
}

TEST(P2cTest, ThresholdsAreHonoured) {
  Thresholds thresholds{4, 6, 8, 2};
  Loads loads(TwoNodesOfEight());
  loads.Set(0, 3);
  ScriptedBits none({});
  EXPECT_EQ(Choose(Policy::kP2c, 0, loads, none, thresholds), 0);
  loads.Set(0, 4).Set(1, 5).Set(2, 5);
  ScriptedBits node({1, 1});  // CPUs 1, 2 at 5 < numa 6
  EXPECT_EQ(Choose(Policy::kP2c, 0, loads, node, thresholds), 1);
}

TEST(P2cTest, SeededGeneratorIsDeterministicAndPicksOnlyActiveCpus) {
  Loads loads(TwoNodesOfEight());
  loads.ActiveOnly({0, 1, 2, 5, 9, 14});
  for (int cpu : {0, 1, 2, 5, 9, 14}) loads.Set(cpu, static_cast<uint32_t>(cpu % 5));
  std::mt19937_64 first(42);
  std::mt19937_64 second(42);
  std::vector<int> picks;
  for (int i = 0; i < 200; ++i) {
    const int pick = ChooseWorker(Policy::kP2c, 14, TwoNodesOfEight(), loads.view(), {}, first);
    EXPECT_EQ(pick, ChooseWorker(Policy::kP2c, 14, TwoNodesOfEight(), loads.view(), {}, second));
    EXPECT_THAT(pick, ::testing::AnyOf(0, 1, 2, 5, 9, 14));
    picks.push_back(pick);
  }
  // Owner 14 has 4 in flight; its node's other active CPU 9 has 4 too, so p2c goes global.
  EXPECT_THAT(picks, ::testing::Contains(0));
}

TEST(P2cTest, WorksWithAbslBitGen) {
  absl::BitGen gen;
  Loads loads(TwoNodesOfEight());
  loads.Set(0, 2);
  const int pick = ChooseWorker(Policy::kP2c, 0, TwoNodesOfEight(), loads.view(), {}, gen);
  EXPECT_EQ(TwoNodesOfEight().NodeOf(pick), 0);
}

TEST(ChooseWorkerTest, UnknownOwnerIsReturnedAsIs) {
  ScriptedBits bits({});
  Loads loads(TwoNodesOfEight());
  EXPECT_EQ(Choose(Policy::kP2c, 99, loads, bits), 99);
}

}  // namespace
}  // namespace ringfs::frontend::queue
