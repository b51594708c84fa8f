// ringfs-mount / mount.ringfs: parses the command line, daemonizes once the mount is ready
// (unless -f), runs the mount session (frontend/) with its control service and metrics
// (controller/) until it is unmounted.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "common/service_notify.h"
#include "controller/control_server.h"
#include "controller/frontend_metrics.h"
#include "frontend/mount_session.h"
#include "frontend/options.h"

namespace ringfs::controller {
namespace {

// The parent of a daemonizing mount waits on this pipe: "OK <line>" or an error message.
int g_ready_pipe = -1;

void ReportToParent(const std::string& message) {
  if (g_ready_pipe < 0) return;
  (void)!write(g_ready_pipe, message.data(), message.size());
  close(g_ready_pipe);
  g_ready_pipe = -1;
}

// Forks before any thread exists (io_uring rings and FUSE state must not cross a fork). The
// parent exits with the child's verdict; the child carries on detached.
void Daemonize() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    perror("ringfs-mount: pipe");
    exit(1);
  }
  pid_t child = fork();
  if (child < 0) {
    perror("ringfs-mount: fork");
    exit(1);
  }
  if (child > 0) {
    close(fds[1]);
    std::string message;
    char buffer[512];
    ssize_t n;
    while ((n = read(fds[0], buffer, sizeof(buffer))) > 0) message.append(buffer, n);
    if (message.rfind("OK ", 0) == 0) {
      printf("%s\n", message.substr(3).c_str());
      exit(0);
    }
    fprintf(stderr, "ringfs-mount: %s\n",
            message.empty() ? "the mount process died during start-up" : message.c_str());
    exit(1);
  }
  close(fds[0]);
  g_ready_pipe = fds[1];
  // Readiness goes to the parent through the pipe. A service manager waiting on $NOTIFY_SOCKET
  // runs ringfs-mount with -f (ringfs-mount@.service); a daemon left by mount(8) must not speak
  // for whatever service happened to start that mount. No thread exists yet: unsetenv is safe.
  unsetenv("NOTIFY_SOCKET");
  setsid();
  int null = open("/dev/null", O_RDWR);
  if (null >= 0) {
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
    close(null);
  }
}

absl::StatusOr<std::string> ReadToken(const std::string& path) {
  if (path.empty()) return std::string();
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError("cannot read token_file " + path);
  std::stringstream content;
  content << in.rdbuf();
  std::string token(absl::StripTrailingAsciiWhitespace(content.str()));
  if (token.empty()) return absl::InvalidArgumentError("token_file " + path + " is empty");
  return token;
}

LogLevel ParseLevel(const std::string& name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "warn") return LogLevel::kWarning;
  if (name == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

int Main(int argc, char** argv) {
  std::string program = argv[0];
  program = program.substr(program.rfind('/') + 1);
  bool as_helper = program == "mount.ringfs";
  SetLogPrefix("ringfs-mount");
  // Debian's Abseil is built without NDEBUG, so every Mutex acquisition would also update a
  // process-wide graph of lock orders (deadlock detection) under one global lock: a debugging aid
  // the unit tests keep, not a cost the daemon should pay on every request.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && (args[0] == "-h" || args[0] == "--help")) {
    printf("%s", frontend::Usage().c_str());
    return 0;
  }
  absl::StatusOr<frontend::MountOptions> parsed = frontend::ParseCommandLine(args, as_helper);
  if (!parsed.ok()) {
    fprintf(stderr, "%s: %s\n%s", program.c_str(), std::string(parsed.status().message()).c_str(),
            frontend::Usage().c_str());
    return 2;
  }
  frontend::MountOptions options = *parsed;
  SetLogLevel(ParseLevel(options.log_level));
  char resolved[PATH_MAX];
  if (realpath(options.mountpoint.c_str(), resolved) == nullptr) {
    fprintf(stderr, "%s: mountpoint %s: %s\n", program.c_str(), options.mountpoint.c_str(),
            strerror(errno));
    return 1;
  }
  options.mountpoint = resolved;
  absl::StatusOr<std::string> token = ReadToken(options.token_file);
  if (!token.ok()) {
    fprintf(stderr, "%s: %s\n", program.c_str(), std::string(token.status().message()).c_str());
    return 2;
  }
  if (absl::Status control = ControlServer::CheckOptions(
          {options.control, options.control_token_file, options.mountpoint});
      !control.ok()) {
    fprintf(stderr, "%s: %s\n", program.c_str(), std::string(control.message()).c_str());
    return 2;
  }
  if (absl::Status metrics = FrontendMetrics::CheckAddress(options.metrics); !metrics.ok()) {
    fprintf(stderr, "%s: %s\n", program.c_str(), std::string(metrics.message()).c_str());
    return 2;
  }
  if (options.fake) return 0;

  // Every thread inherits this mask; the main thread takes the signals with sigtimedwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if (!options.foreground) Daemonize();

  frontend::MountSession session(options, *token);
  if (absl::Status status = session.Start(); !status.ok()) {
    std::string message = std::string(status.message());
    RINGFS_LOG_ERROR("cannot mount %s on %s: %s", options.source, options.mountpoint, message);
    ReportToParent(message);
    return 1;
  }
  // The control plane and metrics start once the mount answers and stop once it has ended.
  // Failing to serve them is logged, not fatal: the mount itself works and stays up.
  ControlServer control(&session, {options.control, options.control_token_file, options.mountpoint,
                                   {options.tls_cert, options.tls_key, ""}});
  if (absl::Status status = control.Start(); !status.ok()) {
    RINGFS_LOG_ERROR("control service: %s", status.message());
  }
  std::unique_ptr<FrontendMetrics> metrics;
  if (!options.metrics.empty()) {
    metrics = std::make_unique<FrontendMetrics>(&session, options.metrics);
    if (absl::Status status = metrics->Start(); !status.ok()) {
      RINGFS_LOG_ERROR("metrics: %s", status.message());
    }
  }
  std::string description = session.Describe();
  RINGFS_LOG_INFO("%s", description);
  ReportToParent("OK " + description + "; unmount with: umount " + options.mountpoint);
  NotifyServiceManager("READY=1\nSTATUS=" + description);
  session.Run();
  NotifyServiceManager("STOPPING=1");
  if (metrics) metrics->Stop();
  control.Stop();
  return 0;
}

}  // namespace
}  // namespace ringfs::controller

int main(int argc, char** argv) { return ringfs::controller::Main(argc, argv); }
