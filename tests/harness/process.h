// A child process started by a test, with stdout and stderr captured to one log file.
// Owned by one test thread. The destructor SIGKILLs and reaps the child if it still runs, so a
// failing test never leaves the process behind. Children get PR_SET_PDEATHSIG(SIGTERM): if the
// test binary itself dies, they are told to stop too.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ringfs::testing {

class ChildProcess {
 public:
  // Starts argv[0] (a path) with argv, stdin from /dev/null, stdout+stderr appended to log_path.
  // Returns nullptr and sets *error when fork/exec fails (exec failure is reported by the child
  // through a close-on-exec pipe, so a missing binary is an error here, not a later exit 127).
  static std::unique_ptr<ChildProcess> Spawn(const std::vector<std::string>& argv,
                                             const std::string& log_path, std::string* error);

  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  const std::vector<std::string>& argv() const { return argv_; }

  // True while the child has not been reaped and has not exited (reaps it if it has).
  bool Running();
  // Waits up to `timeout` for the child to exit. Returns the raw wait status, or nullopt on
  // timeout. Once reaped, returns the same status again.
  std::optional<int> WaitExit(std::chrono::milliseconds timeout);
  // Sends `sig` if the child has not been reaped yet.
  void Signal(int sig);
  // SIGKILL and reap (bounded); a no-op if already reaped.
  void Kill();

 private:
  ChildProcess(pid_t pid, std::vector<std::string> argv, std::string log_path)
      : pid_(pid), argv_(std::move(argv)), log_path_(std::move(log_path)) {}
  bool TryReap();

  pid_t pid_;
  std::vector<std::string> argv_;
  std::string log_path_;
  std::optional<int> status_;
};

// "exited with 0", "killed by signal 9", ...
std::string DescribeWaitStatus(int status);
// Runs argv to completion (bounded by timeout; SIGKILL after), output appended to log_path.
// Returns the wait status or nullopt when it could not start or timed out.
std::optional<int> RunCommand(const std::vector<std::string>& argv, const std::string& log_path,
                              std::chrono::milliseconds timeout);
// Whole file as a string ("" when missing).
std::string ReadFileOrEmpty(const std::string& path);

// Sends SIGSTOP and waits (up to `timeout`) until every thread of the process is stopped: SIGSTOP
// takes effect as each thread is next scheduled, and no request may be answered after a test
// believes the server stopped. False on timeout.
bool StopAndWait(ChildProcess* process,
                 std::chrono::milliseconds timeout = std::chrono::seconds(2));

}  // namespace ringfs::testing
