#include "tests/harness/ringfs_env.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "controller/control_endpoint.h"

namespace ringfs::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr auto kStartTimeout = seconds(10);

std::string Tail(const std::string& text, size_t max_bytes = 16384) {
  if (text.size() <= max_bytes) return text;
  return "[... " + std::to_string(text.size() - max_bytes) + " bytes cut ...]\n" +
         text.substr(text.size() - max_bytes);
}

std::string Join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

bool IsCleanExit(const std::optional<int>& status) {
  return status && *status != -1 && WIFEXITED(*status) && WEXITSTATUS(*status) == 0;
}

}  // namespace

RingfsEnv::~RingfsEnv() { Teardown(); }

::testing::AssertionResult RingfsEnv::Init() {
  std::string tmpl = std::string(RINGFS_IT_PREFIX) + "XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return ::testing::AssertionFailure() << "mkdtemp " << tmpl << ": " << strerror(errno);
  }
  base_ = tmpl;
  Watchdog::Track(base_, base_ + "/cli/mnt");
  // World-traversable so that tests running as uid 65534 can reach the mount.
  ::chmod(base_.c_str(), 0755);
  export_dir_ = base_ + "/srv/export";
  mount_dir_ = base_ + "/cli/mnt";
  stats_path_ = base_ + "/stats";
  ready_path_ = base_ + "/ready";
  for (const std::string& d :
       {base_ + "/srv", export_dir_, base_ + "/srv/outside", base_ + "/cli", mount_dir_}) {
    if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) {
      return ::testing::AssertionFailure() << "mkdir " << d << ": " << strerror(errno);
    }
    ::chmod(d.c_str(), 0755);
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult RingfsEnv::StartServer(const ServerOptions& options) {
  return SpawnServer(options, ready_path_, server_log(), &server_, &server_address_);
}

::testing::AssertionResult RingfsEnv::StartExtraServer(const ServerOptions& options,
                                                       std::string* address) {
  const std::string n = std::to_string(extra_servers_.size() + 2);
  extra_servers_.emplace_back();
  return SpawnServer(options, base_ + "/ready" + n, base_ + "/server" + n + ".log",
                     &extra_servers_.back(), address);
}

::testing::AssertionResult RingfsEnv::KillExtraServer(size_t i) {
  if (i >= extra_servers_.size() || !extra_servers_[i]) {
    return ::testing::AssertionFailure() << "no extra server " << i;
  }
  extra_servers_[i]->Kill();
  auto status = extra_servers_[i]->WaitExit(seconds(10));
  if (!status || !WIFSIGNALED(*status)) {
    return ::testing::AssertionFailure() << "extra server " << i << " did not die by SIGKILL";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult RingfsEnv::SpawnServer(const ServerOptions& options,
                                                  const std::string& ready_path,
                                                  const std::string& log_path,
                                                  std::unique_ptr<ChildProcess>* process,
                                                  std::string* address) {
  std::unique_ptr<ChildProcess>& server = *process;
  std::vector<std::string> argv = {
      BinPath("ringfs-server"), "--export",  export_dir_,   "--listen",       options.listen,
      "--ready-file",           ready_path, "--log-level", options.log_level};
  if (!options.token_file.empty()) {
    argv.push_back("--token-file");
    argv.push_back(options.token_file);
  }
  if (!options.export_options.empty()) {
    argv.push_back("--export-options");
    argv.push_back(options.export_options);
  }
  if (options.workers > 0) {
    argv.push_back("--workers");
    argv.push_back(std::to_string(options.workers));
  }
  argv.insert(argv.end(), options.extra_args.begin(), options.extra_args.end());
  if (std::find(argv.begin(), argv.end(), "--handle-key") == argv.end()) {
    // The test's own key, shared by every server of this deployment (restarts, failover),
    // instead of the machine's default /var/lib/ringfs/handle.key.
    argv.push_back("--handle-key");
    argv.push_back(base_ + "/handle.key");
  }
  argv.insert(argv.begin(), options.wrapper.begin(), options.wrapper.end());
  ::unlink(ready_path.c_str());
  std::string error;
  server = ChildProcess::Spawn(argv, log_path, &error);
  if (!server) {
    return ::testing::AssertionFailure() << "cannot start ringfs-server: " << error;
  }
  const auto deadline = Clock::now() + kStartTimeout;
  while (Clock::now() < deadline) {
    std::string ready = ReadFileOrEmpty(ready_path);
    if (!ready.empty() && ready.back() == '\n') {
      ready.pop_back();
      *address = ready;
      return ::testing::AssertionSuccess();
    }
    if (!server->Running()) {
      return ::testing::AssertionFailure()
             << "ringfs-server " << DescribeWaitStatus(*server->WaitExit(milliseconds(0)))
             << " before writing its ready file; argv: " << Join(argv, " ");
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  return ::testing::AssertionFailure()
         << "ringfs-server wrote no ready file " << ready_path << " within 10 s\n";
}

::testing::AssertionResult RingfsEnv::StopServer(milliseconds timeout) {
  if (!server_) return ::testing::AssertionFailure() << "no server";
  server_->Signal(SIGTERM);
  auto status = server_->WaitExit(timeout);
  if (!status) {
    server_->Kill();
    return ::testing::AssertionFailure()
           << "ringfs-server still running " << timeout.count() << " ms after SIGTERM\n";
  }
  if (!IsCleanExit(status)) {
    return ::testing::AssertionFailure()
           << "ringfs-server " << DescribeWaitStatus(*status) << " after SIGTERM\n";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult RingfsEnv::KillServer() {
  if (!server_) return ::testing::AssertionFailure() << "no server";
  server_->Kill();
  auto status = server_->WaitExit(milliseconds(0));
  if (!status || !WIFSIGNALED(*status) || WTERMSIG(*status) != SIGKILL) {
    return ::testing::AssertionFailure()
           << "ringfs-server " << (status ? DescribeWaitStatus(*status) : "not reaped")
           << " instead of being killed by SIGKILL";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult RingfsEnv::RestartServer(const ServerOptions& options) {
  if (server_address_.empty()) return ::testing::AssertionFailure() << "no earlier server";
  if (server_ && server_->Running()) {
    return ::testing::AssertionFailure() << "the earlier server is still running";
  }
  ServerOptions same_address = options;
  same_address.listen = server_address_;
  const std::string before = server_address_;
  ::testing::AssertionResult started = StartServer(same_address);
  if (started && server_address_ != before) {
    return ::testing::AssertionFailure()
           << "restarted server listens on " << server_address_ << ", not " << before;
  }
  return started;
}

std::vector<std::string> RingfsEnv::MountArgv(const MountOptions& options,
                                              const std::string& address) const {
  std::vector<std::string> opts;
  if (!options.transport.empty()) opts.push_back("transport=" + options.transport);
  opts.push_back("stats_file=" + stats_path_);
  if (!options.token_file.empty()) opts.push_back("token_file=" + options.token_file);
  if (!options.log_level.empty()) opts.push_back("log_level=" + options.log_level);
  for (const std::string& o : options.extra) opts.push_back(o);
  std::vector<std::string> argv;
  if (options.use_mount_helper) {
    argv = {BinPath("mount.ringfs"), SpecFor(address), mount_dir_, "-o", Join(opts, ",")};
  } else {
    argv = {BinPath("ringfs-mount"), SpecFor(address), mount_dir_};
    if (options.foreground) argv.push_back("-f");
    argv.push_back("-o");
    argv.push_back(Join(opts, ","));
  }
  argv.insert(argv.begin(), options.wrapper.begin(), options.wrapper.end());
  return argv;
}

::testing::AssertionResult RingfsEnv::WaitMounted(ChildProcess* launcher, bool launcher_exits) {
  const auto deadline = Clock::now() + kStartTimeout;
  bool launcher_done = false;
  while (Clock::now() < deadline) {
    if (launcher_exits) {
      if (!launcher_done) {
        auto status = launcher->WaitExit(milliseconds(0));
        if (status) {
          if (!IsCleanExit(status)) {
            return ::testing::AssertionFailure()
                   << "daemonizing mount " << DescribeWaitStatus(*status)
                   << "; argv: " << Join(launcher->argv(), " ");
          }
          // Contract: the parent exits 0 only once the mount is ready.
          std::optional<MountEntry> e = FindMount(mount_dir_);
          if (!e) {
            return ::testing::AssertionFailure() << "daemonizing mount exited 0 but " << mount_dir_
                                                 << " is not mounted at that moment";
          }
          if (e->fstype != "fuse.ringfs") {
            return ::testing::AssertionFailure()
                   << mount_dir_ << " has fstype " << e->fstype << ", want fuse.ringfs";
          }
          return ::testing::AssertionSuccess();
        }
      }
    } else {
      // The kernel lists the mount before ringfs-mount has proved it answers; its log line
      // "mounted ..." comes after that proof, so a test that stops the server next does not
      // race the mount's own probe.
      std::optional<MountEntry> e = FindMount(mount_dir_);
      if (e && e->fstype == "fuse.ringfs" &&
          ReadFileOrEmpty(launcher->log_path()).find("mounted ") != std::string::npos) {
        return ::testing::AssertionSuccess();
      }
      if (!launcher->Running()) {
        return ::testing::AssertionFailure()
               << "ringfs-mount " << DescribeWaitStatus(*launcher->WaitExit(milliseconds(0)))
               << " before the mount appeared; argv: " << Join(launcher->argv(), " ");
      }
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  return ::testing::AssertionFailure()
         << "mount " << mount_dir_
         << " not ready within 10 s; argv: " << Join(launcher->argv(), " ");
}

::testing::AssertionResult RingfsEnv::Mount(const MountOptions& options, std::string address) {
  if (address.empty()) address = server_address_;
  if (mount_ && mount_->Running()) {
    return ::testing::AssertionFailure() << "already mounted";
  }
  ::unlink(stats_path_.c_str());
  std::vector<std::string> argv = MountArgv(options, address);
  std::string error;
  mount_ = ChildProcess::Spawn(argv, mount_log(), &error);
  if (!mount_) return ::testing::AssertionFailure() << "cannot start mount: " << error;
  daemonized_ = options.use_mount_helper || !options.foreground;
  return WaitMounted(mount_.get(), daemonized_);
}

std::optional<int> RingfsEnv::MountExpectingFailure(const MountOptions& options,
                                                    std::string address, milliseconds timeout) {
  std::string error;
  mount_ = ChildProcess::Spawn(MountArgv(options, address), mount_log(), &error);
  if (!mount_) {
    std::cerr << "cannot start mount: " << error << "\n";
    return std::nullopt;
  }
  daemonized_ = options.use_mount_helper || !options.foreground;
  auto status = mount_->WaitExit(timeout);
  if (!status) mount_->Kill();
  return status;
}

::testing::AssertionResult RingfsEnv::Unmount(int sig, milliseconds timeout) {
  if (!mount_) return ::testing::AssertionFailure() << "no mount process";
  mount_->Signal(sig);
  auto status = mount_->WaitExit(timeout);
  if (!status) {
    return ::testing::AssertionFailure()
           << "ringfs-mount still running " << timeout.count() << " ms after signal " << sig << " ("
           << strsignal(sig) << ")";
  }
  if (!IsCleanExit(status)) {
    return ::testing::AssertionFailure()
           << "ringfs-mount " << DescribeWaitStatus(*status) << " after signal " << sig;
  }
  if (IsMounted(mount_dir_)) {
    return ::testing::AssertionFailure() << "ringfs-mount exited 0 after signal " << sig << " but "
                                         << mount_dir_ << " is still mounted";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult RingfsEnv::UnmountDaemonized(milliseconds timeout) {
  auto status = RunCommand({"/usr/bin/umount", mount_dir_}, mount_log(), seconds(10));
  if (!IsCleanExit(status)) {
    return ::testing::AssertionFailure() << "umount " << mount_dir_ << ": "
                                         << (status ? DescribeWaitStatus(*status) : "timed out");
  }
  if (IsMounted(mount_dir_)) {
    return ::testing::AssertionFailure() << mount_dir_ << " still mounted after umount";
  }
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (FindProcessesWithArg(mount_dir_).empty()) return ::testing::AssertionSuccess();
    std::this_thread::sleep_for(milliseconds(20));
  }
  return ::testing::AssertionFailure() << "the daemonized ringfs-mount is still running "
                                       << timeout.count() << " ms after umount";
}

void RingfsEnv::Teardown() {
  if (torn_down_ || base_.empty()) return;
  torn_down_ = true;
  std::ostringstream notes;
  if (mount_ && mount_->Running() && !daemonized_) {
    mount_->Signal(SIGTERM);
    auto status = mount_->WaitExit(seconds(10));
    if (!status) {
      notes << "ringfs-mount ignored SIGTERM for 10 s; ";
    } else if (!IsCleanExit(status)) {
      notes << "ringfs-mount " << DescribeWaitStatus(*status) << " after SIGTERM; ";
    }
  }
  if (daemonized_ && IsMounted(mount_dir_)) {
    auto status = RunCommand({"/usr/bin/umount", mount_dir_}, mount_log(), seconds(10));
    if (!IsCleanExit(status)) notes << "umount of the daemonized mount failed; ";
  }
  if (IsMounted(mount_dir_)) notes << ForceUnmount(mount_dir_) << "; ";
  if (mount_ && mount_->Running()) {
    notes << "ringfs-mount SIGKILLed; ";
    mount_->Kill();
  }
  // Daemonized mounts and anything else started with our paths in its arguments.
  const auto deadline = Clock::now() + seconds(5);
  for (;;) {
    std::vector<pid_t> left = FindProcessesWithArg(base_);
    if (server_) std::erase(left, server_->pid());
    for (const auto& extra : extra_servers_) {
      if (extra) std::erase(left, extra->pid());
    }
    if (left.empty()) break;
    if (Clock::now() >= deadline) {
      for (pid_t pid : left) {
        notes << "SIGKILL leftover pid " << pid << "; ";
        ::kill(pid, SIGKILL);
      }
      std::this_thread::sleep_for(milliseconds(100));
      break;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  if (IsMounted(mount_dir_)) notes << ForceUnmount(mount_dir_) << "; ";
  std::vector<ChildProcess*> servers = {server_.get()};
  for (const auto& extra : extra_servers_) servers.push_back(extra.get());
  for (ChildProcess* server : servers) {
    if (server == nullptr || !server->Running()) continue;
    server->Signal(SIGTERM);
    auto status = server->WaitExit(seconds(10));
    if (!status) {
      notes << "ringfs-server ignored SIGTERM for 10 s, SIGKILLed; ";
      server->Kill();
    } else if (!IsCleanExit(status)) {
      notes << "ringfs-server " << DescribeWaitStatus(*status) << " after SIGTERM; ";
    }
  }
  for (pid_t pid : FindProcessesWithArg(base_)) ::kill(pid, SIGKILL);
  final_logs_ = DescribeLogs();
  if (!IsMounted(mount_dir_)) {
    // A mount that died by SIGKILL (a fault test) leaves its control socket behind; with a new
    // base directory per test nothing would ever reuse the name.
    ::unlink(controller::DefaultSocketPath(mount_dir_).c_str());
    if (::getenv("RINGFS_KEEP_TMP") == nullptr && !RemoveTree(base_)) {
      notes << "could not remove " << base_ << "; ";
    }
  } else {
    notes << "LEFT MOUNTED: " << mount_dir_ << "; ";
  }
  Watchdog::Untrack(base_);
  teardown_notes_ = notes.str();
}

Stats RingfsEnv::ReadStats() const { return ParseStats(ReadFileOrEmpty(stats_path_)); }

::testing::AssertionResult RingfsEnv::WaitMountServing(milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (ReadStats().count("transport") == 0) {
    if (Clock::now() >= deadline) {
      return ::testing::AssertionFailure()
             << "the mount wrote no stats file " << stats_path_ << " within " << timeout.count()
             << " ms";
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  return ::testing::AssertionSuccess();
}

std::string RingfsEnv::DescribeLogs() const {
  std::ostringstream out;
  out << "----- " << server_log() << " -----\n"
      << Tail(ReadFileOrEmpty(server_log())) << "----- " << mount_log() << " -----\n"
      << Tail(ReadFileOrEmpty(mount_log())) << "----- " << stats_path_ << " -----\n"
      << ReadFileOrEmpty(stats_path_) << "-----\n";
  return out.str();
}

// ---------------------------------------------------------------------------------------------
// Watchdog

namespace {

struct WatchdogState {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::string> bases;  // base -> mount_dir
  std::optional<Clock::time_point> deadline;
  std::string test_name;
  bool thread_started = false;
};

WatchdogState& State() {
  static WatchdogState* state = new WatchdogState;  // Never destroyed: the thread outlives main.
  return *state;
}

[[noreturn]] void Fire(const std::string& test_name, std::map<std::string, std::string> bases) {
  // Read the logs first: once the mounts are aborted, the test thread may run on and remove
  // the tree before we get to print them.
  std::string logs;
  for (const auto& [base, mount_dir] : bases) {
    for (const char* log : {"/server.log", "/mount.log", "/stats"}) {
      logs += "----- " + base + log + " -----\n" + Tail(ReadFileOrEmpty(base + log)) + "\n";
    }
  }
  std::cerr << "\n*** ringfs test watchdog: " << test_name
            << " overran its time budget; aborting mounts and killing daemons ***\n"
            << logs;
  for (const auto& [base, mount_dir] : bases) {
    std::cerr << ForceUnmount(mount_dir, /*allow_fork=*/false) << "\n";
    for (pid_t pid : FindProcessesWithArg(base)) ::kill(pid, SIGKILL);
  }
  std::this_thread::sleep_for(milliseconds(300));
  for (const auto& [base, mount_dir] : bases) {
    if (IsMounted(mount_dir)) std::cerr << ForceUnmount(mount_dir, false) << "\n";
    if (!IsMounted(mount_dir)) RemoveTree(base);
  }
  std::cerr.flush();
  ::_exit(1);
}

void WatchdogLoop() {
  WatchdogState& s = State();
  std::unique_lock<std::mutex> lock(s.mu);
  for (;;) {
    if (!s.deadline) {
      s.cv.wait(lock);
      continue;
    }
    if (Clock::now() >= *s.deadline) {
      Fire(s.test_name, s.bases);
    }
    s.cv.wait_until(lock, *s.deadline);
  }
}

}  // namespace

void Watchdog::Arm(seconds budget, const std::string& test_name) {
  WatchdogState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.thread_started) {
    std::thread(WatchdogLoop).detach();
    s.thread_started = true;
  }
  // RINGFS_WATCHDOG_SECONDS shortens (or lengthens) every budget, e.g. to reproduce a hang.
  if (const char* env = ::getenv("RINGFS_WATCHDOG_SECONDS")) budget = seconds(atoi(env));
  s.deadline = Clock::now() + budget;
  s.test_name = test_name;
  s.cv.notify_all();
}

void Watchdog::Disarm() {
  WatchdogState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  s.deadline.reset();
  s.cv.notify_all();
}

void Watchdog::Track(const std::string& base, const std::string& mount_dir) {
  WatchdogState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  s.bases[base] = mount_dir;
}

void Watchdog::Untrack(const std::string& base) {
  WatchdogState& s = State();
  std::lock_guard<std::mutex> lock(s.mu);
  s.bases.erase(base);
}

}  // namespace ringfs::testing
