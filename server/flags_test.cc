#include "server/flags.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace ringfs::server {
namespace {

absl::StatusOr<ServerConfig> Parse(std::vector<std::string> args) {
  std::vector<const char*> argv = {"ringfs-server"};
  for (const auto& a : args) argv.push_back(a.c_str());
  return ParseFlags(static_cast<int>(argv.size()), argv.data());
}

TEST(FlagsTest, ParsesAllFlags) {
  char dir[] = "/tmp/ringfs-flags-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string token_file = std::string(dir) + "/token";
  std::ofstream(token_file) << "s3cret \n\n";
  auto config = Parse({"--export", dir, "--listen=127.0.0.1:0", "--token-file", token_file,
                       "--workers", "3", "--max-inflight=17", "--ready-file", "/tmp/r",
                       "--log-level", "debug", "--node-fd-cache", "64", "--reclaim-grace=0",
                       "--max-clients", "10", "--max-sessions-per-client", "3",
                       "--idle-timeout", "0", "--max-open-files-per-client", "7"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->export_dir, dir);
  EXPECT_EQ(config->listen, "127.0.0.1:0");
  EXPECT_EQ(config->token, "s3cret");
  EXPECT_EQ(config->workers, 3u);
  EXPECT_EQ(config->max_inflight, 17u);
  EXPECT_EQ(config->ready_file, "/tmp/r");
  EXPECT_EQ(config->log_level, LogLevel::kDebug);
  EXPECT_FALSE(config->floor);
  EXPECT_EQ(config->node_fd_cache, 64u);
  EXPECT_EQ(config->reclaim_grace_s, 0u);
  EXPECT_EQ(config->max_clients, 10u);
  EXPECT_EQ(config->max_sessions_per_client, 3u);
  EXPECT_EQ(config->idle_timeout_s, 0u);
  EXPECT_EQ(config->max_open_files_per_client, 7u);
  unlink(token_file.c_str());
  rmdir(dir);
}

// --clients: entries default to --export-options wherever that flag stands; a file others can
// read, or a bad line, is a usage error.
TEST(FlagsTest, ClientsFile) {
  char dir[] = "/tmp/ringfs-flags-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string clients = std::string(dir) + "/clients";
  std::ofstream(clients) << "a secret=hex:00112233445566778899aabbccddeeff options=ro\n";
  ASSERT_EQ(chmod(clients.c_str(), 0600), 0);
  auto config = Parse({"--export", dir, "--listen", "1:1", "--clients", clients,
                       "--export-options", "all_squash,anonuid=5"});
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->clients.size(), 1u);
  EXPECT_EQ(config->clients[0].name, "a");
  EXPECT_TRUE(config->clients[0].options.read_only);
  EXPECT_EQ(config->clients[0].options.squash, ExportOptions::Squash::kAll);
  EXPECT_EQ(config->clients[0].options.anonuid, 5u);
  EXPECT_EQ(config->clients_file, clients);
  ASSERT_EQ(chmod(clients.c_str(), 0604), 0);
  auto open = Parse({"--export", dir, "--listen", "1:1", "--clients", clients});
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("chmod 600"), std::string::npos) << open.status();
  std::ofstream(clients) << "a secret=hex:00 \n";
  ASSERT_EQ(chmod(clients.c_str(), 0600), 0);
  EXPECT_FALSE(Parse({"--export", dir, "--listen", "1:1", "--clients", clients}).ok());
  unlink(clients.c_str());
  rmdir(dir);
}

TEST(FlagsTest, Rejects) {
  EXPECT_FALSE(Parse({"--listen", "127.0.0.1:0"}).ok());  // no export
  EXPECT_FALSE(Parse({"--export", "/", "--listen"}).ok());  // missing value
  EXPECT_FALSE(Parse({"--export", "/nonexistent-ringfs", "--listen", "127.0.0.1:0"}).ok());
  EXPECT_FALSE(Parse({"--export", "/", "--listen", "1:1", "--workers", "0"}).ok());
  EXPECT_FALSE(Parse({"--export", "/", "--listen", "1:1", "--bogus", "1"}).ok());
  EXPECT_FALSE(Parse({"--export", "/", "--listen", "1:1", "--node-fd-cache", "0"}).ok());
  EXPECT_FALSE(Parse({"--export", "/", "--listen", "1:1", "--log-level", "loud"}).ok());
  EXPECT_FALSE(Parse({"--export", "/", "--listen", "1:1", "--token-file", "/nonexistent"}).ok());
  EXPECT_FALSE(Parse({"--export", "/", "--listen", "1:1", "--token-file", "/dev/null"}).ok());
  auto defaults = Parse({"--export", "/", "--listen", "1:1"});
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->max_inflight, 256u);
  EXPECT_GE(defaults->workers, 1u);
  EXPECT_EQ(defaults->node_fd_cache, 0u);  // derived from RLIMIT_NOFILE at start
  EXPECT_EQ(defaults->reclaim_grace_s, 90u);
  EXPECT_EQ(defaults->max_clients, 0u);  // derived from RLIMIT_NOFILE at start
  EXPECT_EQ(defaults->max_sessions_per_client, 256u);
  EXPECT_EQ(defaults->idle_timeout_s, 900u);
  EXPECT_FALSE(Parse({"--export", "/", "--listen", "1:1", "--idle-timeout", "x"}).ok());
  EXPECT_FALSE(Parse({"--export", "/", "--listen", "1:1", "--reclaim-grace", "-1"}).ok());
  EXPECT_FALSE(Parse({"--export", "/", "--listen", "1:1", "--max-clients", "0"}).ok());
}

TEST(FlagsTest, FloorTakesNoValue) {
  auto config = Parse({"--export", "/", "--floor", "--listen", "127.0.0.1:0"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->floor);
  EXPECT_EQ(config->listen, "127.0.0.1:0");
  EXPECT_FALSE(Parse({"--export", "/", "--listen", "1:1", "--floor=yes"}).ok());
}

// One worker per CPU this process may use, placed per CPU and idle beside a local mount, unless
// told otherwise.
TEST(FlagsTest, WorkerPlacementAndScheduling) {
  auto config = Parse({"--export", "/", "--listen", "127.0.0.1:0"});
  ASSERT_TRUE(config.ok()) << config.status();
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(config->workers, static_cast<uint32_t>(CPU_COUNT(&set)));
  EXPECT_TRUE(config->pin_workers);
  EXPECT_TRUE(config->worker_sched_idle);
  config = Parse(
      {"--export", "/", "--listen", "127.0.0.1:0", "--no-pin-workers", "--worker-sched=normal"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->pin_workers);
  EXPECT_FALSE(config->worker_sched_idle);
  config = Parse({"--export", "/", "--listen", "127.0.0.1:0", "--worker-sched", "idle"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->worker_sched_idle);
  EXPECT_FALSE(Parse({"--export", "/", "--listen", "1:1", "--worker-sched", "fifo"}).ok());
  EXPECT_FALSE(Parse({"--export", "/", "--listen", "1:1", "--no-pin-workers=yes"}).ok());
}

TEST(FlagsTest, AdminAndMetrics) {
  auto config = Parse({"--export", "/", "--listen", "1:1", "--admin", "unix:/run/admin.sock",
                       "--metrics=127.0.0.1:9102"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->admin, "unix:/run/admin.sock");
  EXPECT_EQ(config->metrics, "127.0.0.1:9102");
  EXPECT_FALSE(Parse({"--export", "/", "--listen", "1:1", "--admin", "unix:relative"}).ok());
  EXPECT_FALSE(Parse({"--export", "/", "--listen", "1:1", "--admin", "nonsense"}).ok());
  EXPECT_FALSE(Parse({"--export", "/", "--listen", "1:1", "--metrics", "unix:/tmp/m"}).ok());
  EXPECT_FALSE(Parse({"--export", "/", "--listen", "1:1", "--metrics", "127.0.0.1"}).ok());
}

TEST(FlagsTest, TcpAdminNeedsTheTokenFile) {
  auto refused = Parse({"--export", "/", "--listen", "1:1", "--admin", "127.0.0.1:0"});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--token-file"), std::string_view::npos)
      << refused.status();

  char dir[] = "/tmp/ringfs-flags-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string token_file = std::string(dir) + "/token";
  std::ofstream(token_file) << "t0ken\n";
  // The token file may come after --admin.
  auto config = Parse(
      {"--export", "/", "--listen", "1:1", "--admin", "127.0.0.1:0", "--token-file", token_file});
  EXPECT_TRUE(config.ok()) << config.status();
  unlink(token_file.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace ringfs::server

namespace ringfs::server {
namespace {

TEST(FlagsTest, HandleKeyDefaultsToVarLibAndMayBeGiven) {
  auto defaults = Parse({"--export", "/tmp", "--listen", "127.0.0.1:0"});
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->handle_key_file, "/var/lib/ringfs/handle.key");
  EXPECT_FALSE(defaults->handle_key_explicit);
  auto given = Parse({"--export", "/tmp", "--listen", "127.0.0.1:0", "--handle-key", "/k/key"});
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->handle_key_file, "/k/key");
  EXPECT_TRUE(given->handle_key_explicit);
  EXPECT_FALSE(Parse({"--export", "/tmp", "--listen", "127.0.0.1:0", "--handle-key="}).ok());
}

TEST(FlagsTest, TlsFlags) {
  auto config = Parse({"--export", "/", "--listen", "1:1", "--tls-cert", "/c", "--tls-key=/k",
                       "--tls-ca", "/ca"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->tls_cert, "/c");
  EXPECT_EQ(config->tls_key, "/k");
  EXPECT_EQ(config->tls_ca, "/ca");
  EXPECT_FALSE(Parse({"--export", "/", "--listen", "1:1", "--tls-cert", "/c"}).ok());
  EXPECT_FALSE(Parse({"--export", "/", "--listen", "1:1", "--tls-ca", "/ca"}).ok());
  auto none = Parse({"--export", "/", "--listen", "1:1"});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->tls_cert.empty());
}

}  // namespace
}  // namespace ringfs::server
