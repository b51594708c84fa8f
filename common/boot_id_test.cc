#include "common/boot_id.h"

#include <gtest/gtest.h>

namespace ringfs {
namespace {

TEST(BootIdTest, ParsesTheKernelsUuidAndNothingElse) {
  EXPECT_EQ(ParseBootId("0f3c6a3e-2b8e-4d2a-9c53-5b1e2f6a7d80\n"),
            "0f3c6a3e-2b8e-4d2a-9c53-5b1e2f6a7d80");
  EXPECT_EQ(ParseBootId("0F3C6A3E-2B8E-4D2A-9C53-5B1E2F6A7D80"),
            "0F3C6A3E-2B8E-4D2A-9C53-5B1E2F6A7D80");
  EXPECT_EQ(ParseBootId(""), "");
  EXPECT_EQ(ParseBootId("\n"), "");
  EXPECT_EQ(ParseBootId("0f3c6a3e-2b8e-4d2a-9c53-5b1e2f6a7d8"), "") << "one digit short";
  EXPECT_EQ(ParseBootId("0f3c6a3e-2b8e-4d2a-9c53-5b1e2f6a7d800"), "") << "one digit long";
  EXPECT_EQ(ParseBootId("0f3c6a3e+2b8e-4d2a-9c53-5b1e2f6a7d80"), "") << "no dash";
  EXPECT_EQ(ParseBootId("0f3c6a3e-2b8e-4d2a-9c53-5b1e2f6a7dz0"), "") << "not hex";
}

TEST(BootIdTest, ThisHostHasOneAndItStays) {
  const std::string& id = ThisBootId();
  ASSERT_EQ(id.size(), 36u) << "no /proc/sys/kernel/random/boot_id on this host?";
  EXPECT_EQ(ParseBootId(id), id);
  EXPECT_EQ(&ThisBootId(), &id) << "read once";
}

}  // namespace
}  // namespace ringfs
