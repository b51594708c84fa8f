// The clients file: good lines and every kind of bad one (with the line number), the
// permission rule for the file and its secret files, and address prefixes.
#include "server/clients_file.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <fstream>

#include "server/test_client.h"

namespace ringfs::server {
namespace {

class ClientsFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text, mode_t mode = 0600) {
    std::string path = dir_.Join(name);
    std::ofstream(path) << text;
    chmod(path.c_str(), mode);
    return path;
  }
  absl::StatusOr<std::vector<ClientEntry>> Parse(const std::string& text, mode_t mode = 0600) {
    return ReadClientsFile(Write("clients", text, mode), defaults_);
  }
  testing::TempDir dir_;
  ExportOptions defaults_;
};

sockaddr_storage V4(const char* text) {
  sockaddr_storage s{};
  auto* in = reinterpret_cast<sockaddr_in*>(&s);
  in->sin_family = AF_INET;
  inet_pton(AF_INET, text, &in->sin_addr);
  return s;
}

sockaddr_storage V6(const char* text) {
  sockaddr_storage s{};
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&s);
  in6->sin6_family = AF_INET6;
  inet_pton(AF_INET6, text, &in6->sin6_addr);
  return s;
}

TEST_F(ClientsFileTest, GoodFile) {
  Write("alpha.key", "alpha-secret\n\n");
  defaults_.anonuid = 1234;
  auto entries = Parse(
      "# the build farm\n"
      "alpha secret=alpha.key options=ro,all_squash from=127.0.0.1/32,::1/128  # trailing\n"
      "\n"
      "   beta\tsecret=hex:000102030405060708090a0b0c0d0e0f\n"
      "gamma.host-1 secret=" +
      dir_.Join("alpha.key") + " options=no_root_squash,anonuid=7\n");
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 3u);
  const ClientEntry& alpha = (*entries)[0];
  EXPECT_EQ(alpha.name, "alpha");
  EXPECT_EQ(alpha.secret, "alpha-secret");
  EXPECT_TRUE(alpha.options.read_only);
  EXPECT_EQ(alpha.options.squash, ExportOptions::Squash::kAll);
  EXPECT_EQ(alpha.options.anonuid, 1234u) << "options= apply over --export-options";
  EXPECT_EQ(alpha.FromText(), "127.0.0.1/32,::1/128");
  EXPECT_TRUE(alpha.AllowsSource(V4("127.0.0.1")));
  EXPECT_FALSE(alpha.AllowsSource(V4("127.0.0.2")));
  EXPECT_TRUE(alpha.AllowsSource(V6("::1")));
  EXPECT_TRUE(alpha.AllowsSource(V6("::ffff:127.0.0.1"))) << "IPv4-mapped peer";
  const ClientEntry& beta = (*entries)[1];
  EXPECT_EQ(beta.secret,
            std::string("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f", 16));
  EXPECT_EQ(beta.options, defaults_);
  EXPECT_EQ(beta.FromText(), "any");
  EXPECT_TRUE(beta.AllowsSource(V4("10.1.2.3")));
  EXPECT_EQ((*entries)[2].options.squash, ExportOptions::Squash::kNone);
  EXPECT_EQ((*entries)[2].options.anonuid, 7u);
}

TEST_F(ClientsFileTest, BadLinesNameTheLine) {
  Write("k", "x\n");
  struct Case {
    std::string text;
    std::string want;  // in the message
  };
  const std::vector<Case> cases = {
      {"a secret=k\n\nbad/name secret=k\n", ":3: 'bad/name' is not a client name"},
      {"a secret=k\na secret=k\n", ":2: client 'a' is listed twice"},
      {"a options=ro\n", "has no secret="},
      {"a secret=k secret=k\n", "secret= given twice"},
      {"a secret=hex:0011\n", "hex digits"},
      {"a secret=hex:zz0102030405060708090a0b0c0d0e0f\n", "hex digits"},
      {"a secret=missing\n", "cannot"},
      {"a secret=k options=fast\n", "options="},
      {"a secret=k from=10.0.0.0/33\n", "from="},
      {"a secret=k from=host.example\n", "from="},
      {"a secret=k color=blue\n", "unknown key 'color'"},
      {"a secret=k ro\n", "'ro' is not KEY=VALUE"},
      {"# nothing\n", "lists no client"},
  };
  for (const Case& c : cases) {
    auto entries = Parse(c.text);
    ASSERT_FALSE(entries.ok()) << c.text;
    EXPECT_NE(entries.status().message().find(c.want), std::string::npos)
        << c.text << " -> " << entries.status().message();
  }
}

TEST_F(ClientsFileTest, RefusesFilesOthersCanRead) {
  Write("k", "x\n");
  auto open_file = Parse("a secret=k\n", 0644);
  ASSERT_FALSE(open_file.ok());
  EXPECT_NE(open_file.status().message().find("chmod 600"), std::string::npos)
      << open_file.status();
  Write("open.key", "y\n", 0640);
  auto open_secret = Parse("a secret=open.key\n");
  ASSERT_FALSE(open_secret.ok());
  EXPECT_NE(open_secret.status().message().find("open.key"), std::string::npos);
  EXPECT_NE(open_secret.status().message().find("0640"), std::string::npos);
  EXPECT_TRUE(Parse("a secret=k\n", 0400).ok());
}

TEST(AddressPrefixTest, ParseAndMatch) {
  auto net = ParseAddressPrefix("10.1.0.0/16");
  ASSERT_TRUE(net.ok());
  EXPECT_TRUE(net->Contains(V4("10.1.200.3")));
  EXPECT_FALSE(net->Contains(V4("10.2.0.1")));
  EXPECT_FALSE(net->Contains(V6("::1")));
  auto odd = ParseAddressPrefix("192.168.1.128/25");
  ASSERT_TRUE(odd.ok());
  EXPECT_TRUE(odd->Contains(V4("192.168.1.200")));
  EXPECT_FALSE(odd->Contains(V4("192.168.1.100")));
  auto all = ParseAddressPrefix("0.0.0.0/0");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->Contains(V4("8.8.8.8")));
  auto v6 = ParseAddressPrefix("fd00::/8");
  ASSERT_TRUE(v6.ok());
  EXPECT_TRUE(v6->Contains(V6("fd12::1")));
  EXPECT_FALSE(v6->Contains(V4("10.0.0.1")));
  EXPECT_EQ(ParseAddressPrefix("::1")->ToString(), "::1/128");
  EXPECT_FALSE(ParseAddressPrefix("10.0.0.0/").ok());
  EXPECT_FALSE(ParseAddressPrefix("10.0.0/8").ok());
  EXPECT_FALSE(ParseAddressPrefix("::1/129").ok());
  sockaddr_storage unix_peer{};
  unix_peer.ss_family = AF_UNIX;
  EXPECT_FALSE(all->Contains(unix_peer)) << "a Unix socket has no address to allow";
}

}  // namespace
}  // namespace ringfs::server
