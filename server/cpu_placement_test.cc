#include "server/cpu_placement.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/host_id.h"
#include "server/test_client.h"

namespace ringfs::server {
namespace {

using testing::AllowedCpus;

TEST(CpuPlacementTest, OneWorkerPerUsableCpuIsPinnedInOrder) {
  const std::vector<int> cpus = AllowedCpus();
  CpuPlacement placement = CpuPlacement::Plan(cpus.size(), /*pin=*/true);
  for (uint32_t i = 0; i < cpus.size(); ++i) {
    EXPECT_EQ(placement.cpu(i), cpus[i]);
    EXPECT_EQ(placement.WorkerOn(cpus[i]), i);
  }
  EXPECT_EQ(placement.cpu(cpus.size()), -1);
  EXPECT_EQ(placement.WorkerOn(CPU_SETSIZE + 1), std::nullopt) << "a queue beyond our CPUs";
}

TEST(CpuPlacementTest, AnotherWorkerCountOrNoPinningPinsNothing) {
  const uint32_t cpus = AllowedCpus().size();
  for (CpuPlacement placement :
       {CpuPlacement::Plan(cpus + 1, true), CpuPlacement::Plan(cpus, false)}) {
    EXPECT_EQ(placement.cpu(0), -1);
    EXPECT_EQ(placement.WorkerOn(0), std::nullopt);
    EXPECT_NE(placement.description().find("unpinned"), std::string::npos);
  }
}

// A connected pair over the given listening socket address.
std::pair<int, int> ConnectedPair(int family, const sockaddr* address, socklen_t length) {
  int listener = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_EQ(bind(listener, address, length), 0);
  EXPECT_EQ(listen(listener, 1), 0);
  sockaddr_storage bound{};
  socklen_t bound_length = sizeof(bound);
  getsockname(listener, reinterpret_cast<sockaddr*>(&bound), &bound_length);
  int client = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&bound), bound_length), 0);
  int server = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  close(listener);
  return {server, client};
}

TEST(PeerIsLocalTest, LoopbackAndUnixPeersAreOnThisHost) {
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  auto [server4, client4] = ConnectedPair(AF_INET, reinterpret_cast<sockaddr*>(&v4), sizeof(v4));
  EXPECT_TRUE(PeerIsLocal(server4));
  close(server4);
  close(client4);

  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  v6.sin6_addr = in6addr_loopback;
  int probe = socket(AF_INET6, SOCK_STREAM, 0);
  const bool have_v6 = probe >= 0 && bind(probe, reinterpret_cast<sockaddr*>(&v6), sizeof(v6)) == 0;
  if (probe >= 0) close(probe);
  if (have_v6) {
    auto [server6, client6] = ConnectedPair(AF_INET6, reinterpret_cast<sockaddr*>(&v6), sizeof(v6));
    EXPECT_TRUE(PeerIsLocal(server6));
    close(server6);
    close(client6);
  }

  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  EXPECT_TRUE(PeerIsLocal(pair[0]));
  close(pair[0]);
  close(pair[1]);
  EXPECT_FALSE(PeerIsLocal(-1)) << "not a socket";
}

TEST(ClientIsLocalTest, TheHostIdTheClientSentDecidesOverItsAddress) {
  const std::string& ours = ThisHostId();
  ASSERT_FALSE(ours.empty());
  std::string other = ours;
  other[0] = other[0] == '0' ? '1' : '0';
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  // A Unix peer is local by its address; a remote host's id says it came through a proxy.
  EXPECT_FALSE(ClientIsLocal(pair[0], other));
  EXPECT_TRUE(ClientIsLocal(pair[0], ours));
  EXPECT_TRUE(ClientIsLocal(pair[0], "")) << "an older client: its address decides";
  close(pair[0]);
  close(pair[1]);
  // Not a socket, so no address says local: this host's id does (a container's own network
  // namespace makes a local mount's address look remote).
  EXPECT_TRUE(ClientIsLocal(-1, ours));
  EXPECT_FALSE(ClientIsLocal(-1, ""));
}

}  // namespace
}  // namespace ringfs::server
