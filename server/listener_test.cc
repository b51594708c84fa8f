// Listener::Validate, the server's answer to a ClientHello: what it accepts, what it refuses,
// and that every answer can be sent back.
#include "server/listener.h"

#include <gtest/gtest.h>

#include <string>

#include "common/wire.h"

namespace ringfs::server {
namespace {

wire::ClientHello GoodHello() {
  wire::ClientHello hello;
  hello.set_wire_version(wire::kWireVersion);
  hello.set_client_id("client");
  hello.set_export_name("/");
  hello.set_token("secret");
  hello.set_max_inflight(512);
  hello.set_max_frame_bytes(wire::kMaxFrameBytes);
  return hello;
}

Listener::Options SomeOptions() {
  Listener::Options options;
  options.token = "secret";
  options.max_inflight = 64;
  options.server_id = "test";
  return options;
}

TEST(ListenerValidateTest, AcceptsAndLowersTheLimitsToTheServers) {
  wire::ServerHello reply = Listener::Validate(GoodHello(), SomeOptions(), 9);
  EXPECT_EQ(reply.result(), wire::ServerHello::OK);
  EXPECT_EQ(reply.max_inflight(), 64u);
  EXPECT_EQ(reply.max_frame_bytes(), wire::kMaxFrameBytes);
  EXPECT_EQ(reply.session_id(), 9u);
}

TEST(ListenerValidateTest, RefusesWrongTokenVersionExportAndLimits) {
  wire::ClientHello hello = GoodHello();
  hello.set_token("other");
  EXPECT_EQ(Listener::Validate(hello, SomeOptions(), 1).result(), wire::ServerHello::AUTH_FAILED);
  hello = GoodHello();
  hello.set_wire_version(wire::kWireVersion + 1);
  EXPECT_EQ(Listener::Validate(hello, SomeOptions(), 1).result(),
            wire::ServerHello::VERSION_MISMATCH);
  hello = GoodHello();
  hello.set_export_name("/srv");
  wire::ServerHello reply = Listener::Validate(hello, SomeOptions(), 1);
  EXPECT_EQ(reply.result(), wire::ServerHello::NO_SUCH_EXPORT);
  EXPECT_NE(reply.message().find("'/srv'"), std::string::npos) << reply.message();
  hello = GoodHello();
  hello.set_max_frame_bytes(4095);
  EXPECT_EQ(Listener::Validate(hello, SomeOptions(), 1).result(), wire::ServerHello::BAD_REQUEST);
}

// Found by reading for the handshake fuzz target (tests/fuzz/fuzz_handshake.cc), whose
// invariant is that every answer can be sent: a ClientHello that fits the 64 KiB limit with an
// export name of nearly that size got a refusal that repeated the name, did not fit the limit
// itself, and so was never sent; the client saw only a closed connection.
TEST(ListenerValidateTest, RefusalOfAHugeExportNameStillFitsTheHandshake) {
  wire::ClientHello hello;
  hello.set_wire_version(wire::kWireVersion);
  hello.set_export_name(std::string(wire::kMaxHandshakeBytes - 16, 'x'));
  ASSERT_TRUE(wire::EncodeHandshake(hello).ok());
  Listener::Options options = SomeOptions();
  options.token.clear();
  wire::ServerHello reply = Listener::Validate(hello, options, 1);
  EXPECT_EQ(reply.result(), wire::ServerHello::NO_SUCH_EXPORT);
  EXPECT_TRUE(wire::EncodeHandshake(reply).ok()) << reply.message().size() << " bytes";
  EXPECT_LT(reply.message().size(), 200u);
}

}  // namespace
}  // namespace ringfs::server
