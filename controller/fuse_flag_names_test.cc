#include "controller/fuse_flag_names.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "proto/fuse_abi.h"

namespace ringfs::controller {
namespace {

using ::testing::ElementsAre;

TEST(FuseFlagNamesTest, NamesSetBitsLowestFirst) {
  EXPECT_THAT(FuseFlagNames(FUSE_ASYNC_READ | FUSE_WRITEBACK_CACHE | fuse::kInitOverIoUring),
              ElementsAre("FUSE_ASYNC_READ", "FUSE_WRITEBACK_CACHE", "FUSE_OVER_IO_URING"));
}

TEST(FuseFlagNamesTest, Bit31IsNotSignExtended) {
  EXPECT_THAT(FuseFlagNames(1ULL << 31), ElementsAre("FUSE_INIT_RESERVED"));
}

TEST(FuseFlagNamesTest, UnnamedBits) {
  EXPECT_THAT(FuseFlagNames(1ULL << 63), ElementsAre("bit63"));
  EXPECT_TRUE(FuseFlagNames(0).empty());
}

TEST(FuseFlagNamesTest, EveryBitUpToRequestTimeoutHasAName) {
  for (int i = 0; i <= 42; ++i) {
    std::vector<std::string> names = FuseFlagNames(1ULL << i);
    ASSERT_EQ(names.size(), 1u);
    EXPECT_EQ(names[0].rfind("FUSE_", 0), 0u) << "bit " << i << ": " << names[0];
  }
}

}  // namespace
}  // namespace ringfs::controller
