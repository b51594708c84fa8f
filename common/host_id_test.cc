#include "common/host_id.h"

#include <gtest/gtest.h>

namespace ringfs {
namespace {

TEST(HostIdTest, ParsesTheKernelsBootIdAndNothingElse) {
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

TEST(HostIdTest, ADigestThatTellsBootsApartAndHidesTheId) {
  const std::string boot = "0f3c6a3e-2b8e-4d2a-9c53-5b1e2f6a7d80";
  const std::string id = HostIdFromBootId(boot);
  ASSERT_EQ(id.size(), 32u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  EXPECT_EQ(HostIdFromBootId(boot), id) << "the same boot, the same id";
  EXPECT_NE(HostIdFromBootId("1f3c6a3e-2b8e-4d2a-9c53-5b1e2f6a7d80"), id);
  EXPECT_EQ(id.find("0f3c6a3e"), std::string::npos);
  EXPECT_EQ(HostIdFromBootId(""), "");
}

TEST(HostIdTest, ThisHostHasOneAndItStays) {
  const std::string& id = ThisHostId();
  ASSERT_EQ(id.size(), 32u) << "no /proc/sys/kernel/random/boot_id on this host?";
  EXPECT_EQ(&ThisHostId(), &id) << "read once";
}

}  // namespace
}  // namespace ringfs
