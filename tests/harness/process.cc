#include "tests/harness/process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace ringfs::testing {

std::unique_ptr<ChildProcess> ChildProcess::Spawn(const std::vector<std::string>& argv,
                                                  const std::string& log_path, std::string* error) {
  if (argv.empty()) {
    *error = "empty argv";
    return nullptr;
  }
  int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    *error = "open " + log_path + ": " + strerror(errno);
    return nullptr;
  }
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int exec_pipe[2];
  if (null_fd < 0 || ::pipe2(exec_pipe, O_CLOEXEC) != 0) {
    *error = std::string("pipe/devnull: ") + strerror(errno);
    ::close(log_fd);
    if (null_fd >= 0) ::close(null_fd);
    return nullptr;
  }
  // Everything the child needs is prepared before fork: only async-signal-safe calls after it.
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) {
    *error = std::string("fork: ") + strerror(errno);
    ::close(log_fd);
    ::close(null_fd);
    ::close(exec_pipe[0]);
    ::close(exec_pipe[1]);
    return nullptr;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(126);
    ::setpgid(0, 0);  // Its own group: a terminal's SIGINT goes to the test, not the daemons.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    ::execv(cargv[0], cargv.data());
    int err = errno;
    ssize_t ignored = ::write(exec_pipe[1], &err, sizeof(err));
    (void)ignored;
    ::_exit(127);
  }
  ::close(log_fd);
  ::close(null_fd);
  ::close(exec_pipe[1]);
  int child_err = 0;
  ssize_t n;
  do {
    n = ::read(exec_pipe[0], &child_err, sizeof(child_err));
  } while (n < 0 && errno == EINTR);
  ::close(exec_pipe[0]);
  auto child = std::unique_ptr<ChildProcess>(new ChildProcess(pid, argv, log_path));
  if (n == static_cast<ssize_t>(sizeof(child_err))) {
    *error = "exec " + argv[0] + ": " + strerror(child_err);
    child->WaitExit(std::chrono::seconds(5));
    return nullptr;
  }
  return child;
}

ChildProcess::~ChildProcess() { Kill(); }

bool ChildProcess::TryReap() {
  if (status_) return true;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    status_ = status;
    return true;
  }
  if (r < 0 && errno == ECHILD) {  // Reaped elsewhere; treat as gone.
    status_ = -1;
    return true;
  }
  return false;
}

bool ChildProcess::Running() { return !TryReap(); }

std::optional<int> ChildProcess::WaitExit(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!TryReap()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return status_;
}

void ChildProcess::Signal(int sig) {
  if (!TryReap()) ::kill(pid_, sig);
}

void ChildProcess::Kill() {
  if (TryReap()) return;
  ::kill(pid_, SIGKILL);
  WaitExit(std::chrono::seconds(10));
}

std::string DescribeWaitStatus(int status) {
  std::ostringstream out;
  if (status == -1) {
    out << "reaped elsewhere";
  } else if (WIFEXITED(status)) {
    out << "exited with " << WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    out << "killed by signal " << WTERMSIG(status) << " (" << strsignal(WTERMSIG(status)) << ")";
  } else {
    out << "wait status " << status;
  }
  return out.str();
}

std::optional<int> RunCommand(const std::vector<std::string>& argv, const std::string& log_path,
                              std::chrono::milliseconds timeout) {
  std::string error;
  auto child = ChildProcess::Spawn(argv, log_path, &error);
  if (!child) return std::nullopt;
  auto status = child->WaitExit(timeout);
  if (!status) child->Kill();
  return status;
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool StopAndWait(ChildProcess* process, std::chrono::milliseconds timeout) {
  process->Signal(SIGSTOP);
  const std::string tasks = "/proc/" + std::to_string(process->pid()) + "/task";
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    bool all = true;
    for (const auto& task : std::filesystem::directory_iterator(tasks)) {
      std::ifstream in(task.path() / "stat");
      std::string line;
      std::getline(in, line);
      // The state follows the command name, which is in parentheses and may contain spaces.
      size_t paren = line.rfind(')');
      all = all && paren != std::string::npos && paren + 2 < line.size() &&
            line[paren + 2] == 'T';
    }
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

}  // namespace ringfs::testing
