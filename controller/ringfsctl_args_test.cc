#include "controller/ringfsctl_args.h"

#include <gtest/gtest.h>

namespace ringfs::controller {
namespace {

absl::StatusOr<CtlCommand> Parse(std::vector<std::string> args) { return ParseCtlArgs(args); }

TEST(RingfsctlArgsTest, GlobalOptionsTargetAndCommand) {
  auto c = Parse({"--json", "--token-file=/t", "/mnt/data", "queues"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->json);
  EXPECT_EQ(c->token_file, "/t");
  EXPECT_EQ(c->target, "/mnt/data");
  EXPECT_EQ(c->verb, CtlVerb::kQueues);
}

TEST(RingfsctlArgsTest, ControlReplacesTheTarget) {
  auto c = Parse({"--control", "127.0.0.1:7000", "info"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->control, "127.0.0.1:7000");
  EXPECT_TRUE(c->target.empty());
  EXPECT_EQ(c->verb, CtlVerb::kInfo);
  auto endpoint = ResolveTarget(*c);
  ASSERT_TRUE(endpoint.ok());
  EXPECT_EQ(endpoint->kind, Endpoint::Kind::kTcp);
}

TEST(RingfsctlArgsTest, SetActiveParsesACpuList) {
  auto c = Parse({"unix:/run/x.sock", "set-active", "0,2-3"});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->set_active.cpus_size(), 3);
  EXPECT_EQ(c->set_active.cpus(2), 3u);
  auto endpoint = ResolveTarget(*c);
  ASSERT_TRUE(endpoint.ok());
  EXPECT_EQ(endpoint->address, "/run/x.sock");
}

TEST(RingfsctlArgsTest, BgLimit) {
  auto one = Parse({"m", "bg-limit", "--queue", "1", "4"});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_TRUE(one->bg_limit.has_cpu());
  EXPECT_EQ(one->bg_limit.cpu(), 1u);
  EXPECT_EQ(one->bg_limit.limit(), 4u);
  auto all = Parse({"m", "bg-limit", "unlimited"});
  ASSERT_TRUE(all.ok());
  EXPECT_FALSE(all->bg_limit.has_cpu());
  EXPECT_TRUE(all->bg_limit.unlimited());
  // 0 is the service's to refuse (with its message), not a usage error.
  EXPECT_TRUE(Parse({"m", "bg-limit", "0"}).ok());
}

TEST(RingfsctlArgsTest, Policy) {
  auto c =
      Parse({"m", "policy", "--background=p2c", "--thresholds", "1/2/3", "--commit", "origin"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->policy.has_foreground());
  EXPECT_EQ(c->policy.background(), "p2c");
  EXPECT_EQ(c->policy.thresholds().global(), 3u);
  EXPECT_TRUE(c->keep_next_core_retries);
  EXPECT_EQ(c->policy.commit_locality(), "origin");
  auto with_retries = Parse({"m", "policy", "--thresholds", "1/2/3/5"});
  ASSERT_TRUE(with_retries.ok());
  EXPECT_FALSE(with_retries->keep_next_core_retries);
  EXPECT_EQ(with_retries->policy.thresholds().next_core_retries(), 5u);
}

TEST(RingfsctlArgsTest, KernelAndWatch) {
  auto k = Parse({"m", "kernel", "--max-background", "24"});
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_TRUE(k->kernel.has_max_background());
  EXPECT_FALSE(k->kernel.has_congestion_threshold());
  auto w = Parse({"m", "watch", "--interval", "200ms", "--count", "3"});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->watch.interval_ms(), 200u);
  EXPECT_EQ(w->watch.count(), 3u);
  auto seconds = Parse({"m", "watch", "--interval=2"});
  ASSERT_TRUE(seconds.ok());
  EXPECT_EQ(seconds->watch.interval_ms(), 2000u);
}

TEST(RingfsctlArgsTest, Server) {
  auto c = Parse({"server", "--admin", "unix:/run/a.sock", "set-limit", "7", "32"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->verb, CtlVerb::kServerSetLimit);
  EXPECT_EQ(c->set_session_limit.session_id(), 7u);
  EXPECT_EQ(c->set_session_limit.max_inflight(), 32u);
  auto drain = Parse({"server", "--admin=127.0.0.1:9", "drain", "--timeout", "2s"});
  ASSERT_TRUE(drain.ok()) << drain.status();
  EXPECT_EQ(drain->drain.timeout_ms(), 2000u);
  auto endpoint = ResolveTarget(*drain);
  ASSERT_TRUE(endpoint.ok());
  EXPECT_EQ(endpoint->address, "127.0.0.1:9");
}

TEST(RingfsctlArgsTest, UsageErrors) {
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"/mnt/data"},
      {"queues"},  // no target
      {"--bogus", "m", "queues"},
      {"m", "frobnicate"},
      {"m", "queues", "extra"},
      {"m", "set-active"},
      {"m", "set-active", "0-"},
      {"m", "bg-limit"},
      {"m", "bg-limit", "-1"},
      {"m", "bg-limit", "--queue", "x", "1"},
      {"m", "policy", "--thresholds", "1/2"},
      {"m", "policy", "--nope", "x"},
      {"m", "kernel", "--max-background"},
      {"m", "watch", "--interval", "soon"},
      {"m", "watch", "--interval", "0s"},
      {"server", "sessions"},  // no --admin
      {"server", "--admin", "h:1", "set-limit", "1"},
      {"server", "--admin", "h:1", "sessions", "--timeout", "1s"},
  };
  for (const auto& args : bad) {
    auto c = Parse(args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << joined;
  }
}

TEST(RingfsctlArgsTest, MountpointResolvesToItsDefaultSocket) {
  struct {
    const char* target;
    const char* socket;
  } cases[] = {
      {"/", "/run/ringfs/-.sock"},
      // The mountpoint itself is not looked up (a stuck mount must not hang ringfsctl), so it
      // need not exist; its parent is resolved.
      {"/tmp/ringfsctl-no-such-mount", "/run/ringfs/tmp-ringfsctl\\x2dno\\x2dsuch\\x2dmount.sock"},
      {"/tmp//./ringfsctl-x/", "/run/ringfs/tmp-ringfsctl\\x2dx.sock"},
      {"/tmp/..", "/run/ringfs/-.sock"},
  };
  for (const auto& c : cases) {
    auto command = Parse({c.target, "info"});
    ASSERT_TRUE(command.ok()) << c.target;
    auto endpoint = ResolveTarget(*command);
    ASSERT_TRUE(endpoint.ok()) << c.target << ": " << endpoint.status();
    EXPECT_EQ(endpoint->address, c.socket) << c.target;
  }
  auto missing_parent = Parse({"/no-such-dir-ringfsctl/mnt", "info"});
  ASSERT_TRUE(missing_parent.ok());
  EXPECT_FALSE(ResolveTarget(*missing_parent).ok());
}

}  // namespace
}  // namespace ringfs::controller
