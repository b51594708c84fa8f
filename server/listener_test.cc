// Listener::Validate, the pure part of the handshake: every refusal and the limits of an OK.
// (Who the client is, is the Authenticator's: auth_wire_test.)
#include "server/listener.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ringfs::server
