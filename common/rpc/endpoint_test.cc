#include "common/rpc/endpoint.h"

#include <gtest/gtest.h>

namespace ringfs::rpc {
namespace {

TEST(ParseAddressTest, Forms) {
  auto unix_path = ParseAddress("unix:/tmp/c.sock");
  ASSERT_TRUE(unix_path.ok());
  EXPECT_EQ(unix_path->kind, Endpoint::Kind::kUnix);
  EXPECT_EQ(unix_path->address, "/tmp/c.sock");
  EXPECT_EQ(unix_path->GrpcAddress(), "unix:/tmp/c.sock");

  auto tcp = ParseAddress("127.0.0.1:7000");
  ASSERT_TRUE(tcp.ok());
  EXPECT_EQ(tcp->kind, Endpoint::Kind::kTcp);
  EXPECT_EQ(tcp->GrpcAddress(), "127.0.0.1:7000");
  EXPECT_EQ(tcp->ToString(), "127.0.0.1:7000");

  EXPECT_TRUE(ParseAddress("[::1]:7000").ok());
  EXPECT_EQ(Endpoint{}.ToString(), "none");
}

TEST(ParseAddressTest, RefusesWhatIsNotAnAddress) {
  for (const char* bad : {"", "none", "unix:", "unix:relative", "localhost", ":7000",
                          "host:", "host:99999", "host:x", "::1:7000"}) {
    EXPECT_EQ(ParseAddress(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(TokenTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("Bearer abc", "Bearer abc"));
  EXPECT_FALSE(ConstantTimeEquals("Bearer abc", "Bearer abd"));
  EXPECT_FALSE(ConstantTimeEquals("Bearer abc", "Bearer ab"));
  EXPECT_FALSE(ConstantTimeEquals("Bearer ab", "Bearer abc"));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  // A prefix padded with NULs must not compare equal to the longer string.
  EXPECT_FALSE(ConstantTimeEquals(std::string("ab\0", 3), "ab"));
  EXPECT_EQ(BearerValue("t0k"), "Bearer t0k");
}

}  // namespace
}  // namespace ringfs::rpc
