#include "frontend/options.h"

#include <gtest/gtest.h>

namespace ringfs::frontend {
namespace {

TEST(OptionsTest, ParsesTheDocumentedForm) {
  auto parsed = ParseCommandLine(
      {"127.0.0.1:7000:/", "/mnt/x", "-f", "-o",
       "transport=uring,queue_depth=32,token_file=/t,stats_file=/s,writeback_cache,"
       "entry_timeout=2.5,attr_timeout=0"},
      false);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->server, "127.0.0.1:7000");
  EXPECT_EQ(parsed->export_path, "/");
  EXPECT_EQ(parsed->mountpoint, "/mnt/x");
  EXPECT_TRUE(parsed->foreground);
  EXPECT_EQ(parsed->transport, Transport::kUring);
  EXPECT_EQ(parsed->queue_depth, 32u);
  EXPECT_EQ(parsed->token_file, "/t");
  EXPECT_EQ(parsed->stats_file, "/s");
  EXPECT_TRUE(parsed->writeback_cache);
  EXPECT_EQ(parsed->entry_timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(parsed->attr_timeout, std::chrono::nanoseconds(0));
}

TEST(OptionsTest, AcceptsIpv6AndUnixServers) {
  auto v6 = ParseCommandLine({"[::1]:7000:/", "/mnt"}, false);
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->server, "[::1]:7000");
  auto unix_socket = ParseCommandLine({"unix:/run/r.sock:/", "/mnt"}, false);
  ASSERT_TRUE(unix_socket.ok()) << unix_socket.status();
  EXPECT_EQ(unix_socket->server, "unix:/run/r.sock");
}

TEST(OptionsTest, MountHelperConvention) {
  auto parsed = ParseCommandLine(
      {"host:1:/", "/mnt", "-snv", "-f", "-o", "rw,_netdev,noauto,x-systemd.automount,ro"}, true);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->fake);
  EXPECT_FALSE(parsed->foreground);
  EXPECT_TRUE(parsed->read_only);
}

TEST(OptionsTest, AsyncDirectIoOnHardMountsIsAskedFor) {
  auto hard = ParseCommandLine({"host:1:/", "/mnt", "-o", "hard"}, false);
  ASSERT_TRUE(hard.ok()) << hard.status();
  EXPECT_FALSE(hard->async_dio_on_hard);
  auto fast = ParseCommandLine({"host:1:/", "/mnt", "-o", "hard,async_dio"}, false);
  ASSERT_TRUE(fast.ok()) << fast.status();
  EXPECT_TRUE(fast->async_dio_on_hard);
  EXPECT_FALSE(ParseCommandLine({"host:1:/", "/mnt", "-o", "hard,async_dio=no"}, false).ok());
}

TEST(OptionsTest, RingQueueSizing) {
  auto defaults = ParseCommandLine({"host:1:/", "/mnt"}, false);
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->queue_depth, 16u);
  EXPECT_EQ(defaults->initial_depth, 16u) << "every queue registers queue_depth entries";
  auto deep = ParseCommandLine({"host:1:/", "/mnt", "-o", "queue_depth=64"}, false);
  ASSERT_TRUE(deep.ok()) << deep.status();
  EXPECT_EQ(deep->initial_depth, 64u) << "initial_depth follows queue_depth unless given";
  auto growing = ParseCommandLine({"host:1:/", "/mnt", "-o", "initial_depth=1"}, false);
  ASSERT_TRUE(growing.ok()) << growing.status();
  EXPECT_EQ(growing->initial_depth, 1u);
  EXPECT_TRUE(defaults->reduced_queues);
  auto fixed = ParseCommandLine(
      {"host:1:/", "/mnt", "-o", "queue_depth=8,initial_depth=8,ring_queues=all"}, false);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(fixed->initial_depth, 8u);
  EXPECT_FALSE(fixed->reduced_queues);
  EXPECT_FALSE(
      ParseCommandLine({"host:1:/", "/mnt", "-o", "queue_depth=4,initial_depth=5"}, false).ok());
  EXPECT_FALSE(ParseCommandLine({"host:1:/", "/mnt", "-o", "initial_depth=0"}, false).ok());
  EXPECT_FALSE(ParseCommandLine({"host:1:/", "/mnt", "-o", "ring_queues=some"}, false).ok());
  EXPECT_FALSE(defaults->return_idle_pages);
  auto ret = ParseCommandLine({"host:1:/", "/mnt", "-o", "idle_pages=return"}, false);
  ASSERT_TRUE(ret.ok());
  EXPECT_TRUE(ret->return_idle_pages);
  EXPECT_FALSE(ParseCommandLine({"host:1:/", "/mnt", "-o", "idle_pages=drop"}, false).ok());
}

TEST(OptionsTest, RejectsBadInput) {
  EXPECT_FALSE(ParseCommandLine({"host:1:/"}, false).ok());
  EXPECT_FALSE(ParseCommandLine({"host-without-port", "/mnt"}, false).ok());
  EXPECT_FALSE(ParseCommandLine({"host:1:/sub", "/mnt"}, false).ok());
  EXPECT_FALSE(ParseCommandLine({"host:1:/", "/mnt", "-o", "transport=carrier-pigeon"}, false).ok());
  EXPECT_FALSE(ParseCommandLine({"host:1:/", "/mnt", "-o", "queue_depth=0"}, false).ok());
  EXPECT_FALSE(ParseCommandLine({"host:1:/", "/mnt", "-o", "queue_depth=1000"}, false).ok());
  EXPECT_FALSE(ParseCommandLine({"host:1:/", "/mnt", "-o", "entry_timeout=-1"}, false).ok());
  EXPECT_FALSE(ParseCommandLine({"host:1:/", "/mnt", "-o", "bogus"}, false).ok());
  EXPECT_FALSE(ParseCommandLine({"host:1:/", "/mnt", "-o", "token_file="}, false).ok());
  EXPECT_FALSE(ParseCommandLine({"host:1:/", "/mnt", "-x"}, false).ok());
  EXPECT_FALSE(ParseCommandLine({"host:1:/", "/mnt", "-o"}, false).ok());
}

}  // namespace
}  // namespace ringfs::frontend

namespace ringfs::frontend {
namespace {

TEST(OptionsTest, SeveralServers) {
  auto from_source = ParseCommandLine({"a:1,b:2:/", "/mnt"}, false);
  ASSERT_TRUE(from_source.ok()) << from_source.status();
  EXPECT_EQ(from_source->servers, (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_EQ(from_source->server, "a:1");
  auto from_option =
      ParseCommandLine({"x:9:/", "/mnt", "-o", "hard,servers=c:3,unix:/s,[::1]:4,ro"}, false);
  ASSERT_TRUE(from_option.ok()) << from_option.status();
  EXPECT_EQ(from_option->servers, (std::vector<std::string>{"c:3", "unix:/s", "[::1]:4"}));
  EXPECT_TRUE(from_option->hard);
  EXPECT_TRUE(from_option->read_only);
  EXPECT_EQ(from_option->server, "c:3");
  EXPECT_FALSE(ParseCommandLine({"a:1,,b:2:/", "/mnt"}, false).ok());
  EXPECT_FALSE(ParseCommandLine({"a:1:/", "/mnt", "-o", "servers="}, false).ok());
  auto single = ParseCommandLine({"a:1:/", "/mnt", "-o", "no_reclaim"}, false);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->servers.size(), 1u);
  EXPECT_FALSE(single->reclaim);
}

TEST(OptionsTest, TlsOptions) {
  auto plain = ParseCommandLine({"h:1:/", "/mnt"}, false);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->tls);
  auto on = ParseCommandLine({"h:1:/", "/mnt", "-o", "tls"}, false);
  ASSERT_TRUE(on.ok());
  EXPECT_TRUE(on->tls);
  EXPECT_TRUE(on->tls_ca.empty());
  // Any tls_*= implies tls.
  auto full = ParseCommandLine(
      {"h:1:/", "/mnt", "-o", "tls_ca=/ca,tls_cert=/c,tls_key=/k,tls_name=files.example"}, false);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_TRUE(full->tls);
  EXPECT_EQ(full->tls_ca, "/ca");
  EXPECT_EQ(full->tls_cert, "/c");
  EXPECT_EQ(full->tls_key, "/k");
  EXPECT_EQ(full->tls_name, "files.example");
  EXPECT_FALSE(ParseCommandLine({"h:1:/", "/mnt", "-o", "tls_cert=/c"}, false).ok());
  EXPECT_FALSE(ParseCommandLine({"h:1:/", "/mnt", "-o", "tls_ca="}, false).ok());
}

}  // namespace
}  // namespace ringfs::frontend
