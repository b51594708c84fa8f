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
  EXPECT_EQ(endpoint->kind, rpc::Endpoint::Kind::kTcp);
}

// Regression: `ringfsctl MNT queues --json` was refused ("unknown option --json").
TEST(RingfsctlArgsTest, GlobalOptionsAfterTheCommand) {
  auto c = Parse({"/mnt/data", "queues", "--json", "--token-file", "/t"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->json);
  EXPECT_EQ(c->token_file, "/t");
  EXPECT_EQ(c->target, "/mnt/data");
  EXPECT_EQ(c->verb, CtlVerb::kQueues);

  auto between = Parse({"/mnt/data", "--json", "info"});
  ASSERT_TRUE(between.ok()) << between.status();
  EXPECT_TRUE(between->json);
  EXPECT_EQ(between->target, "/mnt/data");
  EXPECT_EQ(between->verb, CtlVerb::kInfo);

  // --control after the command still names the service: `info` is the command, not a target.
  auto control = Parse({"info", "--control=127.0.0.1:7000"});
  ASSERT_TRUE(control.ok()) << control.status();
  EXPECT_EQ(control->control, "127.0.0.1:7000");
  EXPECT_TRUE(control->target.empty());
  EXPECT_EQ(control->verb, CtlVerb::kInfo);
}

TEST(RingfsctlArgsTest, GlobalOptionsAmongTheCommandsOwn) {
  auto w = Parse({"m", "watch", "--interval", "200ms", "--json", "--count", "3"});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(w->json);
  EXPECT_EQ(w->watch.interval_ms(), 200u);
  EXPECT_EQ(w->watch.count(), 3u);

  auto b = Parse({"m", "bg-limit", "--queue", "1", "--control", "unix:/run/x.sock", "4"});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->control, "unix:/run/x.sock");
  EXPECT_EQ(b->bg_limit.cpu(), 1u);
  EXPECT_EQ(b->bg_limit.limit(), 4u);

  auto s = Parse({"server", "--admin", "h:1", "sessions", "--json", "--token-file=/t"});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->json);
  EXPECT_EQ(s->token_file, "/t");
  EXPECT_EQ(s->verb, CtlVerb::kServerSessions);
  auto before = Parse({"--json", "server", "--token-file", "/t", "--admin", "h:1", "export"});
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_TRUE(before->json);
  EXPECT_EQ(before->token_file, "/t");
  EXPECT_EQ(before->verb, CtlVerb::kServerExport);
  auto clients = Parse({"server", "--admin", "h:1", "clients"});
  ASSERT_TRUE(clients.ok()) << clients.status();
  EXPECT_EQ(clients->verb, CtlVerb::kServerClients);
  EXPECT_TRUE(IsServerVerb(clients->verb));
}

TEST(RingfsctlArgsTest, ACommandOptionsValueIsNotTakenForAGlobalOption) {
  auto c = Parse({"m", "policy", "--foreground", "--json"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->json);
  EXPECT_EQ(c->policy.foreground(), "--json");
  // Nor the other way round: a global option's value may be any word, a command's name too.
  auto v = Parse({"--control", "queues", "info"});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->control, "queues");
  EXPECT_EQ(v->verb, CtlVerb::kInfo);
}

TEST(RingfsctlArgsTest, HelpAnywhere) {
  const std::vector<std::vector<std::string>> lines = {
      {"--help"}, {"-h"}, {"m", "queues", "--help"}, {"m", "watch", "-h", "--count", "x"}};
  for (const auto& args : lines) {
    auto c = Parse(args);
    ASSERT_TRUE(c.ok()) << args.back() << ": " << c.status();
    EXPECT_TRUE(c->help);
  }
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
      {"m", "--bogus", "queues"},
      {"m", "--queue", "1", "bg-limit", "4"},  // a command's option before the command
      {"m", "queues", "--json=yes"},
      {"m", "queues", "--control"},
      {"m", "queues", "--token-file"},
      {"--json"},
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

TEST(RingfsctlArgsTest, TlsOptionsAreGlobal) {
  auto c = Parse({"--tls-ca", "/ca", "server", "--admin", "127.0.0.1:7001", "sessions",
                  "--tls-cert=/c", "--tls-key", "/k"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->tls_ca, "/ca");
  EXPECT_EQ(c->tls_cert, "/c");
  EXPECT_EQ(c->tls_key, "/k");
  EXPECT_EQ(c->verb, CtlVerb::kServerSessions);
}

}  // namespace
}  // namespace ringfs::controller
