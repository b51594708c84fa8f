#include "controller/integration/control_test_base.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include "common/rpc/endpoint.h"
#include "tests/harness/fs_util.h"
#include "tests/harness/system.h"

namespace ringfs::controller::testing {
namespace {

using Clock = std::chrono::steady_clock;
using ringfs::testing::BinPath;

constexpr auto kEndpointTimeout = std::chrono::seconds(10);

bool Connects(const sockaddr* address, socklen_t size) {
  int fd = socket(address->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool ok = fd >= 0 && connect(fd, address, size) == 0;
  if (fd >= 0) close(fd);
  return ok;
}

bool TcpConnects(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return Connects(reinterpret_cast<sockaddr*>(&a), sizeof(a));
}

bool UnixConnects(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
  return Connects(reinterpret_cast<sockaddr*>(&a), sizeof(a));
}

}  // namespace

CommandResult RunCapture(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                         void (*setup)()) {
  CommandResult result;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return result;
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return result;
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    if (setup != nullptr) setup();
    execv(args[0], args.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (pid < 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return result;
  }
  auto deadline = Clock::now() + timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_pipes = 2;
  bool killed = false;
  while (open_pipes > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      kill(pid, SIGKILL);
      killed = true;
      break;
    }
    if (poll(fds, 2, static_cast<int>(left.count())) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        sinks[i]->append(buffer, n);
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_pipes;
      }
    }
  }
  for (const pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!killed && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

CommandResult RunCtl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BinPath("ringfsctl")};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCapture(argv);
}

std::string FindInPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

bool PinToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

void ControlTest::SetUp() {
  RingfsTestBase::SetUp();
  if (HasFatalFailure() || IsSkipped()) return;
  ASSERT_TRUE(NewEnv());
  ASSERT_TRUE(env_->StartServer());
  const ControlSpec spec = Spec();
  ringfs::testing::MountOptions options;
  options.transport = spec.transport;
  options.extra = spec.extra_mount_options;
  int control_port = 0;
  if (spec.control == ControlSpec::Control::kUnix) {
    socket_path_ = env_->base() + "/control.sock";
    control_address_ = "unix:" + socket_path_;
    options.extra.push_back("control=" + control_address_);
  } else {
    control_port = ringfs::testing::UnusedLoopbackPort();
    control_address_ = "127.0.0.1:" + std::to_string(control_port);
    token_ = "s3cret-" + std::to_string(getpid());
    token_file_ = env_->base() + "/control.token";
    ASSERT_EQ(ringfs::testing::WriteFile(token_file_, token_ + "\n", 0600), 0);
    options.extra.push_back("control=" + control_address_);
    options.extra.push_back("control_token_file=" + token_file_);
  }
  if (spec.metrics) {
    metrics_port_ = ringfs::testing::UnusedLoopbackPort();
    options.extra.push_back("metrics=127.0.0.1:" + std::to_string(metrics_port_));
  }
  ASSERT_TRUE(env_->Mount(options));
  // The control service and metrics start right after the mount answers.
  auto deadline = Clock::now() + kEndpointTimeout;
  while (!((control_port == 0 || TcpConnects(control_port)) &&
           (socket_path_.empty() || UnixConnects(socket_path_)) &&
           (metrics_port_ == 0 || TcpConnects(metrics_port_)))) {
    ASSERT_LT(Clock::now(), deadline) << "control/metrics endpoints never answered:\n"
                                      << env_->DescribeLogs();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::unique_ptr<control::QueueControl::Stub> ControlTest::NewStub() const {
  return control::QueueControl::NewStub(
      grpc::CreateChannel(control_address_, grpc::InsecureChannelCredentials()));
}

void ControlTest::Authorize(grpc::ClientContext* context) const {
  if (!token_.empty()) context->AddMetadata("authorization", rpc::BearerValue(token_));
}

CommandResult ControlTest::Ctl(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"--control", control_address_};
  if (!token_file_.empty()) {
    argv.push_back("--token-file");
    argv.push_back(token_file_);
  }
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCtl(argv);
}

control::QueueInfo QueueOf(const control::QueueState& state, uint32_t qid) {
  for (const auto& queue : state.queues()) {
    if (queue.qid() == qid) return queue;
  }
  ADD_FAILURE() << "no queue " << qid;
  return {};
}

control::QueueState ListQueuesOrFail(control::QueueControl::Stub* stub) {
  grpc::ClientContext context;
  control::QueueState state;
  grpc::Status status = stub->ListQueues(&context, control::ListQueuesRequest(), &state);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return state;
}

}  // namespace ringfs::controller::testing
