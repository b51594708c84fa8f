#include "common/net.h"

#include <gtest/gtest.h>

#include <thread>

#include "common/wire.h"

namespace ringfs {
namespace {

TEST(NetTest, ParsesAddresses) {
  auto v4 = ParseSocketAddress("127.0.0.1:7000");
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_FALSE(v4->is_unix);
  auto v6 = ParseSocketAddress("[::1]:7000");
  ASSERT_TRUE(v6.ok()) << v6.status();
  auto un = ParseSocketAddress("unix:/tmp/x.sock");
  ASSERT_TRUE(un.ok());
  EXPECT_TRUE(un->is_unix);
  EXPECT_FALSE(ParseSocketAddress("no-port").ok());
  EXPECT_FALSE(ParseSocketAddress("127.0.0.1:99999").ok());
  EXPECT_FALSE(ParseSocketAddress("[::1]7000").ok());
  EXPECT_FALSE(ParseSocketAddress("unix:").ok());
}

TEST(NetTest, HandshakeRoundTripOverLoopback) {
  auto address = ParseSocketAddress("127.0.0.1:0");
  ASSERT_TRUE(address.ok());
  auto listener = ListenOn(*address);
  ASSERT_TRUE(listener.ok()) << listener.status();
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(listener->get(), reinterpret_cast<sockaddr*>(&bound), &len);
  address->storage = bound;
  address->length = len;

  std::thread server([&] {
    UniqueFd conn(accept(listener->get(), nullptr, nullptr));
    wire::ClientHello hello;
    ASSERT_TRUE(wire::ReceiveHandshake(conn.get(), &hello).ok());
    EXPECT_EQ(hello.client_id(), "abc");
    wire::ServerHello reply;
    reply.set_result(wire::ServerHello::OK);
    ASSERT_TRUE(wire::SendHandshake(conn.get(), reply).ok());
  });
  auto client = ConnectTo(*address, std::chrono::milliseconds(2000));
  ASSERT_TRUE(client.ok()) << client.status();
  wire::ClientHello hello;
  hello.set_client_id("abc");
  ASSERT_TRUE(wire::SendHandshake(client->get(), hello).ok());
  wire::ServerHello reply;
  ASSERT_TRUE(wire::ReceiveHandshake(client->get(), &reply).ok());
  EXPECT_EQ(reply.result(), wire::ServerHello::OK);
  server.join();
}

TEST(NetTest, ReceiveGivesUpAtDeadline) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  UniqueFd a(fds[0]), b(fds[1]);
  char buf[4];
  absl::Status status = ReceiveAll(a.get(), buf, sizeof(buf), std::chrono::milliseconds(50));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
}

TEST(NetTest, BadMagicIsRejected) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  UniqueFd a(fds[0]), b(fds[1]);
  uint32_t junk[2] = {0x12345678, 4};
  ASSERT_EQ(write(b.get(), junk, sizeof(junk)), static_cast<ssize_t>(sizeof(junk)));
  wire::ClientHello hello;
  EXPECT_FALSE(wire::ReceiveHandshake(a.get(), &hello, std::chrono::milliseconds(200)).ok());
}

}  // namespace
}  // namespace ringfs
