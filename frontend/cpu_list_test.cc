#include "frontend/cpu_list.h"

#include <gtest/gtest.h>

namespace ringfs::frontend {
namespace {

TEST(CpuListTest, Parses) {
  EXPECT_EQ(*ParseCpuList("0"), std::vector<int>({0}));
  EXPECT_EQ(*ParseCpuList("0-1\n"), std::vector<int>({0, 1}));
  EXPECT_EQ(*ParseCpuList("0-2,4,6-7"), std::vector<int>({0, 1, 2, 4, 6, 7}));
}

TEST(CpuListTest, Rejects) {
  EXPECT_FALSE(ParseCpuList("").ok());
  EXPECT_FALSE(ParseCpuList("3-1").ok());
  EXPECT_FALSE(ParseCpuList("a").ok());
  EXPECT_FALSE(ParseCpuList("1-2-3").ok());
}

TEST(CpuListTest, ThisMachineHasPossibleCpus) {
  auto cpus = PossibleCpus();
  ASSERT_TRUE(cpus.ok()) << cpus.status();
  EXPECT_FALSE(cpus->empty());
  EXPECT_EQ(cpus->front(), 0);
}

}  // namespace
}  // namespace ringfs::frontend
