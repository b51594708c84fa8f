// One lead per new instance, waiters until it is done, and no two servers taking the mount
// from each other.
#include "frontend/server_binding.h"

#include <gtest/gtest.h>

namespace ringfs::frontend {
namespace {

std::vector<SocketAddress> Servers(int n) {
  std::vector<SocketAddress> servers(n);
  for (int i = 0; i < n; ++i) servers[i].text = "s" + std::to_string(i);
  return servers;
}

using Verdict = ServerBinding::Verdict;

TEST(ServerBindingTest, OneLeadPerNewInstance) {
  ServerBinding binding(Servers(1));
  uint64_t epoch = 99;
  EXPECT_EQ(binding.Arrived(100, 0, &epoch), Verdict::kReady);  // first connection
  EXPECT_EQ(epoch, 0u);
  EXPECT_EQ(binding.Arrived(100, 0, &epoch), Verdict::kReady);
  EXPECT_EQ(binding.Arrived(200, 0, &epoch), Verdict::kLead);  // restarted
  EXPECT_EQ(binding.Arrived(200, 0, &epoch), Verdict::kWait);
  EXPECT_EQ(binding.Arrived(100, 0, &epoch), Verdict::kWait);
  binding.Finished(200, 7);
  EXPECT_EQ(binding.Arrived(200, 0, &epoch), Verdict::kReady);
  EXPECT_EQ(epoch, 7u);
  EXPECT_EQ(binding.bound(), 200u);
}

TEST(ServerBindingTest, AnAbandonedReclaimIsTakenOver) {
  ServerBinding binding(Servers(1));
  uint64_t epoch = 0;
  binding.Arrived(1, 0, &epoch);
  EXPECT_EQ(binding.Arrived(2, 0, &epoch), Verdict::kLead);
  binding.Abandoned(2);
  EXPECT_EQ(binding.Arrived(2, 0, &epoch), Verdict::kLead);
}

TEST(ServerBindingTest, FailoverMovesOnAndOnlyTheCurrentServerBinds) {
  ServerBinding binding(Servers(3));
  uint64_t epoch = 0;
  EXPECT_EQ(binding.Arrived(10, 0, &epoch), Verdict::kReady);
  binding.ConnectFailed(0);
  binding.ConnectFailed(0);  // a second channel that failed on the same server: no extra step
  EXPECT_EQ(binding.Current().index, 1u);
  EXPECT_EQ(binding.Current().address.text, "s1");
  EXPECT_EQ(binding.Arrived(30, 2, &epoch), Verdict::kStale);
  EXPECT_EQ(binding.Arrived(20, 1, &epoch), Verdict::kLead);
  binding.Finished(20, 1);
  EXPECT_EQ(binding.Arrived(10, 0, &epoch), Verdict::kStale);
  binding.ConnectFailed(1);
  binding.ConnectFailed(2);
  EXPECT_EQ(binding.Current().index, 0u);  // round robin
}

}  // namespace
}  // namespace ringfs::frontend
