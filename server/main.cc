// ringfs-server: serves one exported directory to ringfs-mount clients over the data wire.
// Parses flags, starts the Server, waits for SIGINT/SIGTERM, stops it.
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>

#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "common/service_notify.h"
#include "server/flags.h"
#include "server/server.h"

int main(int argc, char** argv) {
  using namespace ringfs;
  SetLogPrefix("ringfs-server");
  // Debian's Abseil is built without NDEBUG, so every Mutex acquisition would also update a
  // process-wide graph of lock orders (deadlock detection) under one global lock: a debugging aid
  // the unit tests keep, not a cost the daemon should pay on every request.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::StatusOr<server::ServerConfig> config = server::ParseFlags(argc, argv);
  if (!config.ok()) {
    std::fprintf(stderr, "ringfs-server: %s\n%s", std::string(config.status().message()).c_str(),
                 std::string(server::Usage()).c_str());
    return 2;
  }
  SetLogLevel(config->log_level);
  // Modes in create requests are final: the kernel already applied the caller's umask.
  umask(0);
  signal(SIGPIPE, SIG_IGN);
  // Block the stop signals in every thread; main waits for them with sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  server::Server srv(*config);
  if (absl::Status started = srv.Start(); !started.ok()) {
    RINGFS_LOG_ERROR("cannot start: %s", started.message());
    srv.Stop();
    return 1;
  }
  if (!config->ready_file.empty()) {
    if (absl::Status written = server::WriteFileAtomically(config->ready_file, srv.bound_address());
        !written.ok()) {
      RINGFS_LOG_ERROR("cannot write ready file: %s", written.message());
      srv.Stop();
      return 1;
    }
  }
  RINGFS_LOG_INFO("listening on %s, export %s", srv.bound_address(), config->export_dir);
  NotifyServiceManager("READY=1\nSTATUS=listening on " + srv.bound_address());
  if (config->floor) {
    RINGFS_LOG_WARN("floor mode: READ answers zeros, WRITE discards data (benchmarks only)");
  }
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  RINGFS_LOG_INFO("signal %d: shutting down", signal_number);
  NotifyServiceManager("STOPPING=1");
  srv.Stop();
  return 0;
}
