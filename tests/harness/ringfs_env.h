// One ringfs deployment for one test: a temp tree under /tmp, a ringfs-server on 127.0.0.1
// with a free port, and a ringfs-mount on a private mountpoint.
//
// Layout:  BASE=/tmp/ringfs-it-<build tag>.XXXXXX (0755; prefix from RINGFS_IT_PREFIX)
//            srv/export   exported directory      cli/mnt   mountpoint
//            srv/outside  "server-side" sibling   server.log mount.log stats ready
// Owned and used by one test thread. Teardown() (also run by the destructor) never leaves a
// mount, a process or the temp tree behind: SIGTERM to the mount, bounded wait, then
// abort + lazy unmount + SIGKILL; then the server; then the tree. Everything it had to force
// is recorded in teardown_notes() so a test can fail on an unclean stop.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/harness/process.h"
#include "tests/harness/system.h"

namespace ringfs::testing {

struct ServerOptions {
  std::string listen = "127.0.0.1:0";
  std::string token_file;  // Empty: no --token-file.
  int workers = 0;         // 0: server default.
  std::string log_level = "info";
  std::vector<std::string> extra_args;  // Appended to the command line, e.g. {"--admin", ...}.
  // Put before the server's command line: a launcher that execs it (e.g. seccomp_exec).
  std::vector<std::string> wrapper;
  // --export-options. The tests act as root on a root-owned export, like on a local disk; the
  // squash tests ask for root_squash (the server's own default) themselves.
  std::string export_options = "no_root_squash";
};

struct MountOptions {
  std::string transport = "uring";  // Empty: no transport= option.
  std::vector<std::string> extra;   // More -o options, e.g. "writeback_cache".
  std::string token_file;           // Empty: no token_file=.
  bool foreground = true;           // -f; otherwise the daemonizing form.
  bool use_mount_helper = false;    // Run bin/mount.ringfs (implies !foreground).
  std::string log_level = "info";
  // Put before the mount's command line: a launcher that execs it (e.g. setpriv).
  std::vector<std::string> wrapper;
};

class RingfsEnv {
 public:
  RingfsEnv() = default;
  ~RingfsEnv();
  RingfsEnv(const RingfsEnv&) = delete;
  RingfsEnv& operator=(const RingfsEnv&) = delete;

  // Creates the temp tree. REQUIRES: called once, before anything else.
  ::testing::AssertionResult Init();

  // Starts ringfs-server and waits (10 s) for its ready file.
  ::testing::AssertionResult StartServer(const ServerOptions& options = {});
  // SIGTERM; expects exit 0 within `timeout`.
  ::testing::AssertionResult StopServer(
      std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // SIGKILL (a crash: nothing is flushed or closed by the server itself) and reap; expects the
  // server to die by that signal. The mount keeps running.
  ::testing::AssertionResult KillServer();
  // Starts a new ringfs-server on the same address (same port) and export as the last one,
  // e.g. after KillServer(). `options.listen` is ignored. Its output is appended to server.log.
  ::testing::AssertionResult RestartServer(const ServerOptions& options = {});
  // Another ringfs-server on the same export (failover tests), with its own ready file and log
  // (server2.log, ...); stopped by Teardown like the first. `options.listen` is used as given.
  ::testing::AssertionResult StartExtraServer(const ServerOptions& options, std::string* address);
  // SIGKILL of extra server `i` (0: the first StartExtraServer).
  ::testing::AssertionResult KillExtraServer(size_t i);

  // Starts ringfs-mount and waits (10 s) until mountinfo lists the mountpoint as fuse.ringfs.
  // `address` defaults to the running server's.
  ::testing::AssertionResult Mount(const MountOptions& options, std::string address = "");
  // Starts a mount that is expected to FAIL: returns its wait status within `timeout`
  // (nullopt if it was still running; it is then killed). Its output is in mount_log().
  std::optional<int> MountExpectingFailure(const MountOptions& options, std::string address,
                                           std::chrono::milliseconds timeout);
  // Sends `sig` to the foreground mount process; expects exit 0 and the mount gone.
  ::testing::AssertionResult Unmount(int sig = SIGTERM,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(15));
  // Unmounts a daemonized mount with umount(8); expects the daemon to exit.
  ::testing::AssertionResult UnmountDaemonized(
      std::chrono::milliseconds timeout = std::chrono::seconds(15));

  // See the class comment. Idempotent.
  void Teardown();
  const std::string& teardown_notes() const { return teardown_notes_; }
  // DescribeLogs() as it was at the end of Teardown(), before the tree was removed.
  const std::string& final_logs() const { return final_logs_; }

  const std::string& base() const { return base_; }
  const std::string& export_dir() const { return export_dir_; }
  const std::string& mount_dir() const { return mount_dir_; }
  const std::string& stats_path() const { return stats_path_; }
  const std::string& server_address() const { return server_address_; }
  std::string server_log() const { return base_ + "/server.log"; }
  std::string mount_log() const { return base_ + "/mount.log"; }
  std::string Mnt(const std::string& rel) const { return mount_dir_ + "/" + rel; }
  std::string Exp(const std::string& rel) const { return export_dir_ + "/" + rel; }
  ChildProcess* mount_process() { return mount_.get(); }
  ChildProcess* server_process() { return server_.get(); }

  Stats ReadStats() const;
  // Waits until the mount has written its stats file, i.e. has passed its own start-up probe
  // (Mount() returns as soon as the kernel lists the mount, while the daemon may still be
  // checking the path to the server, and would unmount again if the server died meanwhile).
  ::testing::AssertionResult WaitMountServing(
      std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Both daemons' logs, for failure messages.
  std::string DescribeLogs() const;

 private:
  std::string SpecFor(const std::string& address) const { return address + ":/"; }
  std::vector<std::string> MountArgv(const MountOptions& options, const std::string& address) const;
  ::testing::AssertionResult WaitMounted(ChildProcess* launcher, bool launcher_exits);
  ::testing::AssertionResult SpawnServer(const ServerOptions& options,
                                         const std::string& ready_path,
                                         const std::string& log_path,
                                         std::unique_ptr<ChildProcess>* process,
                                         std::string* address);

  std::string base_, export_dir_, mount_dir_, stats_path_, ready_path_;
  std::string server_address_;
  std::unique_ptr<ChildProcess> server_;
  std::vector<std::unique_ptr<ChildProcess>> extra_servers_;
  std::unique_ptr<ChildProcess> mount_;  // Foreground mount (or the daemonizing launcher).
  bool daemonized_ = false;
  bool torn_down_ = false;
  std::string teardown_notes_;
  std::string final_logs_;
};

// A process-wide watchdog thread: if a test overruns its budget (a hung FUSE request, say), it
// aborts and lazily unmounts every tracked mountpoint, SIGKILLs every process whose arguments
// name a tracked base dir, prints the tracked logs and exits the binary with status 1 — before
// ctest's TIMEOUT would kill us and leave the mounts orphaned. Any thread may call these.
class Watchdog {
 public:
  static void Arm(std::chrono::seconds budget, const std::string& test_name);
  static void Disarm();
  static void Track(const std::string& base, const std::string& mount_dir);
  static void Untrack(const std::string& base);
};

}  // namespace ringfs::testing
