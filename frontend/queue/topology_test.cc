#include "frontend/queue/topology.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringfs::frontend::queue {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(ParseCpuListTest, ParsesSinglesAndRangesInWrittenOrder) {
  EXPECT_THAT(*ParseCpuList("0-3,8,10-11\n"), ElementsAre(0, 1, 2, 3, 8, 10, 11));
  EXPECT_THAT(*ParseCpuList("5"), ElementsAre(5));
  EXPECT_THAT(*ParseCpuList("3,1,1"), ElementsAre(3, 1, 1));
}

TEST(ParseCpuListTest, RejectsMalformedText) {
  for (const char* bad : {"", " \n", "a", "1-", "-1", "3-1", "1,,2", "1-2-3", "99999"}) {
    EXPECT_EQ(ParseCpuList(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(ParseCpuList("0,3-1").status().message(),
              HasSubstr("bad CPU list '0,3-1': '3-1' is not"));
}

TEST(FormatCpuListTest, CollapsesRuns) {
  EXPECT_EQ(FormatCpuList(std::vector<int>{0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList(std::vector<int>{}), "");
  EXPECT_EQ(FormatCpuList(std::vector<int>{7}), "7");
}

TEST(TopologyTest, ForTestBuildsNodes) {
  Topology topology = Topology::ForTest({{0, 1, 2, 3}, {4, 5, 6, 7}});
  EXPECT_THAT(topology.cpus(), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_THAT(topology.node_of_cpu_index(), ElementsAre(0, 0, 0, 0, 1, 1, 1, 1));
  EXPECT_THAT(topology.nodes(), ElementsAre(0, 1));
  EXPECT_EQ(topology.NodeOf(5), 1);
  EXPECT_EQ(topology.NodeOf(8), -1);
  EXPECT_THAT(topology.CpusOfNode(1), ElementsAre(4, 5, 6, 7));
  EXPECT_THAT(topology.CpusOfNode(2), IsEmpty());
  EXPECT_THAT(topology.CpusOfNode(-1), IsEmpty());
  EXPECT_TRUE(topology.Contains(0));
  EXPECT_FALSE(topology.Contains(-1));
  EXPECT_FALSE(topology.Contains(8));
}

TEST(TopologyTest, ForTestHandlesInterleavedNodes) {
  // Some machines number CPUs round-robin across nodes.
  Topology topology = Topology::ForTest({{0, 2}, {1, 3}});
  EXPECT_THAT(topology.node_of_cpu_index(), ElementsAre(0, 1, 0, 1));
  EXPECT_EQ(topology.IndexOf(3), 3);
  EXPECT_THAT(topology.CpusOfNode(0), ElementsAre(0, 2));
}

class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/sysfs.XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void Write(const std::string& relative, const std::string& content) {
    const std::filesystem::path path = root_ / "devices/system" / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << content;
  }

  std::filesystem::path root_;
};

TEST_F(FakeSysfs, ReadsPossibleCpusAndNodes) {
  Write("cpu/possible", "0-7\n");
  Write("node/node0/cpulist", "0-3\n");
  Write("node/node1/cpulist", "4-7\n");
  Write("node/possible", "0-1\n");  // a file named like no node dir: ignored
  absl::StatusOr<Topology> topology = Topology::FromSysfs(root_.string());
  ASSERT_TRUE(topology.ok()) << topology.status();
  EXPECT_THAT(topology->cpus(), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_THAT(topology->node_of_cpu_index(), ElementsAre(0, 0, 0, 0, 1, 1, 1, 1));
}

TEST_F(FakeSysfs, WithoutNodeDirectoryEverythingIsNodeZero) {
  Write("cpu/possible", "0-3\n");
  absl::StatusOr<Topology> topology = Topology::FromSysfs(root_.string());
  ASSERT_TRUE(topology.ok()) << topology.status();
  EXPECT_THAT(topology->node_of_cpu_index(), ElementsAre(0, 0, 0, 0));
  EXPECT_THAT(topology->nodes(), ElementsAre(0));
}

TEST_F(FakeSysfs, UnlistedCpusGoToNodeZeroAndUnknownOnesAreIgnored) {
  Write("cpu/possible", "0-5\n");
  Write("node/node1/cpulist", "2-3,9\n");  // 4-5 are in no node (offline at boot); 9 not possible
  Write("node/node2/cpulist", "\n");       // memory-only node
  absl::StatusOr<Topology> topology = Topology::FromSysfs(root_.string());
  ASSERT_TRUE(topology.ok()) << topology.status();
  EXPECT_THAT(topology->cpus(), ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_THAT(topology->node_of_cpu_index(), ElementsAre(0, 0, 1, 1, 0, 0));
  EXPECT_THAT(topology->nodes(), ElementsAre(0, 1));
}

TEST_F(FakeSysfs, MissingPossibleFileIsAnError) {
  EXPECT_EQ(Topology::FromSysfs(root_.string()).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(FakeSysfs, MalformedNodeListNamesTheFile) {
  Write("cpu/possible", "0-1\n");
  Write("node/node0/cpulist", "zero\n");
  absl::StatusOr<Topology> topology = Topology::FromSysfs(root_.string());
  EXPECT_EQ(topology.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(topology.status().message(), HasSubstr("node0/cpulist: bad CPU list 'zero'"));
}

TEST(TopologyTest, ThisMachineHasAtLeastOneCpu) {
  absl::StatusOr<Topology> topology = Topology::FromSysfs();
  ASSERT_TRUE(topology.ok()) << topology.status();
  EXPECT_FALSE(topology->cpus().empty());
  EXPECT_EQ(topology->node_of_cpu_index().size(), topology->cpus().size());
}

}  // namespace
}  // namespace ringfs::frontend::queue
