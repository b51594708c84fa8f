// Listener::Validate, the pure part of the handshake: every refusal and the limits of an OK.
// (Who the client is, is the Authenticator's: auth_wire_test.)
#include "server/listener.h"

#include <gtest/gtest.h>

#include "common/wire.h"
#include "server/test_client.h"

namespace ringfs::server {
namespace {

TEST(ListenerValidateTest, Paths) {
  Listener::Options options;
  options.max_inflight = 64;
  options.server_id = "host:1";
  options.instance_id = 42;
  wire::ClientHello hello = testing::DefaultHello();
  wire::ServerHello ok = Listener::Validate(hello, options, 7);
  EXPECT_EQ(ok.result(), wire::ServerHello::OK);
  EXPECT_EQ(ok.session_id(), 7u);
  EXPECT_EQ(ok.instance_id(), 42u);
  EXPECT_LE(ok.max_inflight(), 64u);
  EXPECT_FALSE(ok.has_challenge());

  wire::ClientHello h = hello;
  h.set_wire_version(wire::kWireVersion + 1);
  EXPECT_EQ(Listener::Validate(h, options, 1).result(), wire::ServerHello::VERSION_MISMATCH);
  h = hello;
  h.set_export_name("/other");
  EXPECT_EQ(Listener::Validate(h, options, 1).result(), wire::ServerHello::NO_SUCH_EXPORT);
  h = hello;
  h.set_max_inflight(0);
  EXPECT_EQ(Listener::Validate(h, options, 1).result(), wire::ServerHello::BAD_REQUEST);
  h = hello;
  h.set_max_frame_bytes(1000);
  EXPECT_EQ(Listener::Validate(h, options, 1).result(), wire::ServerHello::BAD_REQUEST);
  // A client name or nonce alone decides nothing here: that is the authenticator's.
  h = hello;
  h.set_client_name("whoever");
  h.set_client_nonce(std::string(32, 'n'));
  EXPECT_EQ(Listener::Validate(h, options, 1).result(), wire::ServerHello::OK);
}

TEST(ClientStateKeyTest, NamesSeparateStates) {
  EXPECT_NE(ClientStateKey("alpha", "id-1"), ClientStateKey("beta", "id-1"));
  EXPECT_NE(ClientStateKey("", "alpha/id-1"), ClientStateKey("alpha", "id-1"))
      << "a nameless client cannot reach a named client's state through its client_id";
  EXPECT_EQ(ClientStateKey("alpha", ""), "") << "no client_id: a private state";
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
  Listener::Options options;
  options.max_inflight = 64;
  wire::ServerHello reply = Listener::Validate(hello, options, 1);
  EXPECT_EQ(reply.result(), wire::ServerHello::NO_SUCH_EXPORT);
  EXPECT_TRUE(wire::EncodeHandshake(reply).ok()) << reply.message().size() << " bytes";
  EXPECT_LT(reply.message().size(), 200u);
}

}  // namespace
}  // namespace ringfs::server
