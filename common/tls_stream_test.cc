#include "common/tls_stream.h"

#include <stdlib.h>

#include <string>

#include "common/tls_test_pki.h"
#include "gtest/gtest.h"

namespace ringfs::tls {
namespace {

class TlsStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ringfs-tls-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto pki = MakeTestPki(dir_);
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = *pki;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  std::unique_ptr<Stream> NewServer(bool mutual) {
    auto ctx = Context::ForServer({pki_.server_cert, pki_.server_key, mutual ? pki_.ca : ""});
    EXPECT_TRUE(ctx.ok()) << ctx.status();
    auto s = Stream::Server(*ctx);
    EXPECT_TRUE(s.ok());
    return *std::move(s);
  }
  std::unique_ptr<Stream> NewClient(const ClientFiles& files, const std::string& name) {
    auto ctx = Context::ForClient(files);
    EXPECT_TRUE(ctx.ok()) << ctx.status();
    auto s = Stream::Client(*ctx, name);
    EXPECT_TRUE(s.ok());
    return *std::move(s);
  }

  static void Move(Stream& from, Stream& to) {
    char buf[16384];
    while (size_t n = from.TakeCiphertext(buf, sizeof(buf))) to.FeedCiphertext(buf, n);
  }
  // Runs both handshakes to their end; returns the first error of each side.
  static std::pair<absl::Status, absl::Status> Handshake(Stream& client, Stream& server) {
    absl::Status c, s;
    for (int round = 0; round < 10; ++round) {
      if (c.ok() && !client.handshake_done()) {
        if (auto r = client.Handshake(); !r.ok()) c = r.status();
      }
      Move(client, server);
      if (s.ok() && !server.handshake_done()) {
        if (auto r = server.Handshake(); !r.ok()) s = r.status();
      }
      Move(server, client);
      if ((client.handshake_done() || !c.ok()) && (server.handshake_done() || !s.ok())) break;
    }
    return {c, s};
  }

  std::string dir_;
  TestPki pki_;
};

TEST_F(TlsStreamTest, HandshakeAndDataBothWays) {
  auto server = NewServer(false);
  auto client = NewClient({pki_.ca}, "localhost");
  auto [c, s] = Handshake(*client, *server);
  ASSERT_TRUE(c.ok()) << c;
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(client->handshake_done() && server->handshake_done());

  std::string big(300000, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  ASSERT_TRUE(client->WritePlaintext(big.data(), big.size()).ok());
  Move(*client, *server);
  std::string got(big.size(), '\0');
  size_t have = 0;
  while (have < got.size()) {
    auto n = server->ReadPlaintext(got.data() + have, got.size() - have);
    ASSERT_TRUE(n.ok()) << n.status();
    ASSERT_GT(*n, 0u);
    have += *n;
  }
  EXPECT_EQ(got, big);
  EXPECT_FALSE(server->HasBuffered());
  auto none = server->ReadPlaintext(got.data(), 10);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0u);

  ASSERT_TRUE(server->WritePlaintext("pong", 4).ok());
  Move(*server, *client);
  char pong[8] = {};
  auto n = client->ReadPlaintext(pong, sizeof(pong));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(std::string(pong, *n), "pong");
  EXPECT_EQ(server->PeerSubject(), "");  // no client certificate asked for
  EXPECT_EQ(client->PeerCommonName(), "localhost");
}

TEST_F(TlsStreamTest, IpAddressNameMatchesIpSan) {
  auto server = NewServer(false);
  auto client = NewClient({pki_.ca}, "127.0.0.1");
  auto [c, s] = Handshake(*client, *server);
  EXPECT_TRUE(c.ok()) << c;
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(TlsStreamTest, WrongCaRefused) {
  auto server = NewServer(false);
  auto client = NewClient({pki_.other_ca}, "localhost");
  auto [c, s] = Handshake(*client, *server);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("certificate verify failed"), std::string::npos) << c;
  EXPECT_FALSE(s.ok());  // the client's alert
}

TEST_F(TlsStreamTest, WrongNameRefused) {
  auto server = NewServer(false);
  auto client = NewClient({pki_.ca}, "fileserver.example");
  auto [c, s] = Handshake(*client, *server);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("hostname mismatch"), std::string::npos) << c;
}

TEST_F(TlsStreamTest, MutualTlsNamesTheClient) {
  auto server = NewServer(true);
  auto client = NewClient({pki_.ca, pki_.client_cert, pki_.client_key}, "localhost");
  auto [c, s] = Handshake(*client, *server);
  ASSERT_TRUE(c.ok()) << c;
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(server->PeerCommonName(), "ringfs-test-client");
  EXPECT_NE(server->PeerSubject().find("CN=ringfs-test-client"), std::string::npos)
      << server->PeerSubject();
}

TEST_F(TlsStreamTest, MutualTlsWithoutClientCertRefused) {
  auto server = NewServer(true);
  auto client = NewClient({pki_.ca}, "localhost");
  auto [c, s] = Handshake(*client, *server);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("certificate"), std::string::npos) << s;
  // TLS 1.3: the client finished its side; it learns of the refusal at its first read.
  if (c.ok()) {
    char b[4];
    auto n = client->ReadPlaintext(b, sizeof(b));
    ASSERT_FALSE(n.ok());
    EXPECT_NE(n.status().message().find("certificate required"), std::string::npos)
        << n.status();
  }
}

TEST_F(TlsStreamTest, PlaintextPeerNamed) {
  auto server = NewServer(false);
  const char hello[12] = {'R', 'G', 'F', 'S', 4, 0, 0, 0, 1, 2, 3, 4};
  server->FeedCiphertext(hello, sizeof(hello));
  auto r = server->Handshake();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("plaintext ringfs wire"), std::string::npos) << r.status();
}

TEST_F(TlsStreamTest, ExportedKeyingMaterialMatchesAcrossPeers) {
  auto server = NewServer(false);
  auto client = NewClient({pki_.ca}, "localhost");
  auto [c, s] = Handshake(*client, *server);
  ASSERT_TRUE(c.ok() && s.ok());
  auto a = client->ExportKeyingMaterial("EXPORTER-ringfs-auth");
  auto b = server->ExportKeyingMaterial("EXPORTER-ringfs-auth");
  auto other = client->ExportKeyingMaterial("EXPORTER-something-else");
  ASSERT_TRUE(a.ok() && b.ok() && other.ok());
  EXPECT_EQ(a->size(), 32u);
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *other);
  // Another session gets other material.
  auto server2 = NewServer(false);
  auto client2 = NewClient({pki_.ca}, "localhost");
  Handshake(*client2, *server2);
  EXPECT_NE(*client2->ExportKeyingMaterial("EXPORTER-ringfs-auth"), *a);
  // Before the handshake there is nothing to export.
  auto fresh = NewClient({pki_.ca}, "localhost");
  EXPECT_FALSE(fresh->ExportKeyingMaterial("EXPORTER-ringfs-auth").ok());
}

TEST_F(TlsStreamTest, ContextErrorsNameTheFile) {
  auto ctx = Context::ForServer({dir_ + "/missing.pem", pki_.server_key, ""});
  ASSERT_FALSE(ctx.ok());
  EXPECT_NE(ctx.status().message().find("--tls-cert"), std::string::npos);
  EXPECT_NE(ctx.status().message().find("missing.pem"), std::string::npos) << ctx.status();
  auto mismatch = Context::ForServer({pki_.server_cert, pki_.client_key, ""});
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("mismatch"), std::string::npos)
      << mismatch.status();
  auto ca = Context::ForClient({dir_ + "/nope-ca.pem"});
  ASSERT_FALSE(ca.ok());
  EXPECT_NE(ca.status().message().find("tls_ca"), std::string::npos) << ca.status();
  auto garbage = Context::ForClient({pki_.server_key});
  EXPECT_FALSE(garbage.ok());
}

}  // namespace
}  // namespace ringfs::tls
