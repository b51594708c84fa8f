#include "frontend/queue/ownership.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringfs::frontend::queue {
namespace {

using ::testing::ElementsAre;

Topology TwoNodesOfEight() {
  return Topology::ForTest({{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}});
}

TEST(ComputeOwnersTest, InactiveCpusGoToTheNearestActiveCpuOfTheirNode) {
  absl::StatusOr<std::vector<int>> owners = ComputeOwners(TwoNodesOfEight(), {1, 6, 8, 15});
  ASSERT_TRUE(owners.ok()) << owners.status();
  EXPECT_THAT(*owners, ElementsAre(1, 1, 1, 1, 6, 6, 6, 6,  // node 0: 3 is nearer 1 (2) than 6
                                   8, 8, 8, 8, 15, 15, 15, 15));
}

TEST(ComputeOwnersTest, TiesGoToTheLowerCpu) {
  // 3 is 2 away from both 1 and 5; 11 is 3 away from both 8 and 14.
  absl::StatusOr<std::vector<int>> owners = ComputeOwners(TwoNodesOfEight(), {1, 5, 8, 14});
  ASSERT_TRUE(owners.ok()) << owners.status();
  EXPECT_THAT(*owners, ElementsAre(1, 1, 1, 1, 5, 5, 5, 5, 8, 8, 8, 8, 14, 14, 14, 14));
}

TEST(ComputeOwnersTest, NodeWithoutActiveCpuGoesToTheNearestActiveAnywhere) {
  absl::StatusOr<std::vector<int>> owners = ComputeOwners(TwoNodesOfEight(), {2, 6});
  ASSERT_TRUE(owners.ok()) << owners.status();
  // 4 is a tie between 2 and 6; node 1 has no active CPU and 6 is nearest to all of it.
  EXPECT_THAT(*owners, ElementsAre(2, 2, 2, 2, 2, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6));
}

TEST(ComputeOwnersTest, SameNodeBeatsNearerCpuOfAnotherNode) {
  // Queue 8 is 1 away from CPU 7 (node 0) but belongs to node 1, whose active CPU is 15.
  absl::StatusOr<std::vector<int>> owners = ComputeOwners(TwoNodesOfEight(), {7, 15});
  ASSERT_TRUE(owners.ok()) << owners.status();
  EXPECT_EQ((*owners)[8], 15);
}

TEST(ComputeOwnersTest, OneActiveCpuOwnsEverything) {
  absl::StatusOr<std::vector<int>> owners = ComputeOwners(TwoNodesOfEight(), {9});
  ASSERT_TRUE(owners.ok()) << owners.status();
  EXPECT_EQ(*owners, std::vector<int>(16, 9));
}

TEST(ComputeOwnersTest, AllActiveOwnThemselves) {
  Topology topology = TwoNodesOfEight();
  absl::StatusOr<std::vector<int>> owners = ComputeOwners(topology, topology.cpus());
  ASSERT_TRUE(owners.ok()) << owners.status();
  EXPECT_EQ(*owners, topology.cpus());
}

TEST(ComputeOwnersTest, OrderOfActiveSetDoesNotMatter) {
  EXPECT_EQ(*ComputeOwners(TwoNodesOfEight(), {14, 8, 5, 1}),
            *ComputeOwners(TwoNodesOfEight(), {1, 5, 8, 14}));
}

TEST(ComputeOwnersTest, ThisMachineShape) {
  Topology topology = Topology::ForTest({{0, 1}});
  EXPECT_THAT(*ComputeOwners(topology, {0}), ElementsAre(0, 0));
  EXPECT_THAT(*ComputeOwners(topology, {1}), ElementsAre(1, 1));
  EXPECT_THAT(*ComputeOwners(topology, {0, 1}), ElementsAre(0, 1));
}

TEST(ComputeOwnersTest, RejectsBadActiveSets) {
  const Topology topology = TwoNodesOfEight();
  absl::StatusOr<std::vector<int>> empty = ComputeOwners(topology, {});
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.status().message(), "active CPU set is empty");

  absl::StatusOr<std::vector<int>> unknown = ComputeOwners(topology, {0, 16});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().message(), "active CPU 16 is not a possible CPU (possible: 0-15)");

  absl::StatusOr<std::vector<int>> negative = ComputeOwners(topology, {-1});
  EXPECT_EQ(negative.status().message(), "active CPU -1 is not a possible CPU (possible: 0-15)");

  absl::StatusOr<std::vector<int>> duplicate = ComputeOwners(topology, {3, 4, 3});
  EXPECT_EQ(duplicate.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(duplicate.status().message(), "active CPU 3 is listed twice");
}

}  // namespace
}  // namespace ringfs::frontend::queue
