#include "server/client_registry.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "common/unique_fd.h"

namespace ringfs::server {
namespace {

class ClientRegistryTest : public ::testing::Test {
 protected:
  ClientRegistry::Options Options() {
    ClientRegistry::Options options;
    options.reclaim_grace = absl::Seconds(90);
    options.max_clients = 3;
    options.max_sessions_per_client = 2;
    options.now = [this] { return now_; };
    return options;
  }

  UniqueFd root_{open("/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC)};
  absl::Time now_ = absl::FromUnixSeconds(1'000'000);
};

TEST_F(ClientRegistryTest, StateOutlivesItsLastSessionForTheGracePeriodOnly) {
  ClientRegistry registry(root_.get(), Options());
  std::weak_ptr<ClientState> weak;
  {
    auto lease = registry.Attach("a");
    ASSERT_TRUE(lease.ok());
    weak = lease->state();
    EXPECT_EQ(registry.sessions("a"), 1u);
    now_ += absl::Hours(1);
    EXPECT_EQ(registry.Reap(), 0u);  // a session holds it, however long
  }
  EXPECT_EQ(registry.sessions("a"), 0u);
  now_ += absl::Seconds(89);
  EXPECT_EQ(registry.Reap(), 0u);
  {
    auto again = registry.Attach("a");  // reconnect within the grace: the same state
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->state(), weak.lock());
  }
  now_ += absl::Seconds(89);
  EXPECT_EQ(registry.Reap(), 0u);  // the grace restarted when that session ended
  now_ += absl::Seconds(1);
  EXPECT_EQ(registry.Reap(), 1u);
  EXPECT_EQ(registry.size(), 0u);
  EXPECT_TRUE(weak.expired());
}

TEST_F(ClientRegistryTest, MovedLeaseDetachesOnce) {
  ClientRegistry registry(root_.get(), Options());
  auto first = registry.Attach("a");
  auto second = registry.Attach("a");
  ASSERT_TRUE(first.ok() && second.ok());
  ClientRegistry::Lease moved = *std::move(first);
  ClientRegistry::Lease other;
  other = std::move(moved);
  EXPECT_EQ(registry.sessions("a"), 2u);
  other = ClientRegistry::Lease();
  EXPECT_EQ(registry.sessions("a"), 1u);
}

TEST_F(ClientRegistryTest, CapsRefuseClearly) {
  ClientRegistry registry(root_.get(), Options());
  auto a1 = registry.Attach("a");
  auto a2 = registry.Attach("a");
  ASSERT_TRUE(a1.ok() && a2.ok());
  auto a3 = registry.Attach("a");
  EXPECT_EQ(a3.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(a3.status().message().find("too many sessions"), std::string::npos);
  ASSERT_TRUE(registry.Attach("b").ok());  // its lease ends at once; the state stays
  ASSERT_TRUE(registry.Attach("c").ok());
  auto d = registry.Attach("d");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(d.status().message().find("too many clients"), std::string::npos);
  EXPECT_TRUE(registry.Attach("b").ok());  // a known client is not new
  now_ += absl::Seconds(90);
  EXPECT_EQ(registry.Reap(), 2u);  // b and c; a still has sessions
  EXPECT_TRUE(registry.Attach("d").ok());
}

TEST_F(ClientRegistryTest, AnonymousClientsAreNeitherKeptNorCounted) {
  ClientRegistry registry(root_.get(), Options());
  std::weak_ptr<ClientState> weak;
  {
    auto lease = registry.Attach("");
    ASSERT_TRUE(lease.ok());
    weak = lease->state();
    EXPECT_EQ(registry.size(), 0u);
  }
  EXPECT_TRUE(weak.expired());
}

}  // namespace
}  // namespace ringfs::server
