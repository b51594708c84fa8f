#include "controller/control_endpoint.h"

#include <gtest/gtest.h>

namespace ringfs::controller {
namespace {

TEST(EscapePathTest, MatchesSystemdEscapePath) {
  // Expected values as printed by `systemd-escape --path`.
  struct {
    const char* path;
    const char* escaped;
  } cases[] = {
      {"/mnt/data", "mnt-data"},
      {"/", "-"},
      {"//mnt//data/", "mnt-data"},
      {"/mnt/my-data", "mnt-my\\x2ddata"},
      {"/mnt/a b", "mnt-a\\x20b"},
      {"/.hidden/x", "\\x2ehidden-x"},
      {"/mnt/.x", "mnt-.x"},
      {"/srv/ring_fs:1", "srv-ring_fs:1"},
      {"/mnt/\xc3\xa9", "mnt-\\xc3\\xa9"},
  };
  for (const auto& c : cases) EXPECT_EQ(EscapePath(c.path), c.escaped) << c.path;
}

TEST(EscapePathTest, DefaultSocketPath) {
  EXPECT_EQ(DefaultSocketPath("/mnt/data"), "/run/ringfs/mnt-data.sock");
}

TEST(ParseControlOptionTest, Forms) {
  auto def = ParseControlOption("", "/mnt/data");
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(def->kind, rpc::Endpoint::Kind::kUnix);
  EXPECT_EQ(def->address, "/run/ringfs/mnt-data.sock");
  EXPECT_EQ(def->GrpcAddress(), "unix:/run/ringfs/mnt-data.sock");

  auto none = ParseControlOption("none", "/mnt/data");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->kind, rpc::Endpoint::Kind::kNone);
  EXPECT_EQ(none->ToString(), "none");

  auto unix_path = ParseControlOption("unix:/tmp/c.sock", "/mnt/data");
  ASSERT_TRUE(unix_path.ok());
  EXPECT_EQ(unix_path->kind, rpc::Endpoint::Kind::kUnix);
  EXPECT_EQ(unix_path->address, "/tmp/c.sock");

  auto tcp = ParseControlOption("127.0.0.1:7000", "/mnt/data");
  ASSERT_TRUE(tcp.ok());
  EXPECT_EQ(tcp->kind, rpc::Endpoint::Kind::kTcp);
  EXPECT_EQ(tcp->GrpcAddress(), "127.0.0.1:7000");

  EXPECT_TRUE(ParseControlOption("[::1]:7000", "/m").ok());
}

TEST(ParseControlOptionTest, RefusesWhatIsNotAnAddress) {
  for (const char* bad : {"unix:", "unix:relative", "localhost", ":7000", "host:", "host:99999",
                          "host:x", "::1:7000"}) {
    auto parsed = ParseControlOption(bad, "/m");
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace ringfs::controller
