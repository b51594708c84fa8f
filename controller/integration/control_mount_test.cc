// The control service against a real mount: ringfs-server + ringfs-mount as child processes on
// loopback (control_test_base.h, tests/harness). Every RPC, every validation error, the TCP token
// rule, the Unix socket's permissions, and ringfsctl's JSON, watch and exit codes.
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/str_split.h"
#include "controller/integration/control_test_base.h"
#include "frontend/queue/queue_config.h"
#include "tests/harness/fs_util.h"
#include "tests/harness/system.h"

namespace ringfs::controller::testing {
namespace {

using ::ringfs::testing::BinPath;
using ::ringfs::testing::HttpGet;
using ::ringfs::testing::ReadFile;
using ::testing::HasSubstr;

constexpr uid_t kNobody = 65534;

class ControlMountTest : public ControlTest {
 protected:
  control::QueueState List() {
    grpc::ClientContext context;
    Authorize(&context);
    control::QueueState state;
    grpc::Status status = NewStub()->ListQueues(&context, {}, &state);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return state;
  }

  grpc::Status SetActive(std::vector<uint32_t> cpus, control::QueueState* state) {
    grpc::ClientContext context;
    Authorize(&context);
    control::SetActiveSetRequest request;
    for (uint32_t cpu : cpus) request.add_cpus(cpu);
    return NewStub()->SetActiveSet(&context, request, state);
  }

  grpc::Status SetLimit(std::optional<uint32_t> cpu, uint64_t limit, bool unlimited,
                        control::QueueState* state) {
    grpc::ClientContext context;
    Authorize(&context);
    control::SetBackgroundLimitRequest request;
    if (cpu) request.set_cpu(*cpu);
    request.set_limit(limit);
    request.set_unlimited(unlimited);
    return NewStub()->SetBackgroundLimit(&context, request, state);
  }

  grpc::Status SetPolicy(const control::SetPolicyRequest& request, control::QueueState* state) {
    grpc::ClientContext context;
    Authorize(&context);
    return NewStub()->SetPolicy(&context, request, state);
  }
};

void ExpectInvalid(const grpc::Status& status, const std::string& message_part) {
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr(message_part));
}

TEST_F(ControlMountTest, ListQueuesReportsEveryPossibleCpuAndTheDefaults) {
  control::QueueState state = List();
  std::vector<int> possible;
  {
    std::string text = ReadFile("/sys/devices/system/cpu/possible");
    for (absl::string_view part : absl::StrSplit(text, ',')) {
      int lo = 0, hi = 0;
      if (sscanf(std::string(part).c_str(), "%d-%d", &lo, &hi) == 2) {
        for (int c = lo; c <= hi; ++c) possible.push_back(c);
      } else if (sscanf(std::string(part).c_str(), "%d", &lo) == 1) {
        possible.push_back(lo);
      }
    }
  }
  ASSERT_EQ(state.queues_size(), static_cast<int>(possible.size()));
  uint64_t entries = 0;
  uint64_t registered = 0;
  for (int i = 0; i < state.queues_size(); ++i) {
    const control::QueueInfo& q = state.queues(i);
    EXPECT_EQ(q.qid(), static_cast<uint32_t>(possible[i]));
    EXPECT_EQ(q.owner_cpu(), q.qid()) << "every CPU is active by default";
    EXPECT_TRUE(q.active());
    EXPECT_EQ(q.worker_state(), "active");
    EXPECT_EQ(q.background_limit(), 0u) << "unlimited";
    entries += q.entries_held();
    registered += q.ring_entries();
    // Every queue registers queue_depth entries (16 by default).
    EXPECT_EQ(q.ring_entries(), 16u);
    // Nothing for an entry that never served, a header page and the 16 KiB resident head for one
    // that did (frontend/ring_memory.h).
    EXPECT_LE(q.ring_memory_bytes(), 20480u * q.ring_entries());
  }
  EXPECT_EQ(entries, registered) << "every registered entry is held by a worker";
  EXPECT_EQ(state.settings().active_cpus_size(), static_cast<int>(possible.size()));
  // The engine's defaults, whatever they are tuned to.
  const frontend::queue::QueueConfig defaults;
  EXPECT_EQ(state.settings().foreground_policy(), frontend::queue::PolicyName(defaults.foreground));
  EXPECT_EQ(state.settings().background_policy(), frontend::queue::PolicyName(defaults.background));
  EXPECT_EQ(state.settings().commit_locality(),
            frontend::queue::CommitLocalityName(defaults.commit));
  EXPECT_EQ(state.settings().default_background_limit(), 0u);
  EXPECT_EQ(state.settings().thresholds().local(), defaults.thresholds.local);
  EXPECT_GT(state.timestamp_unix_ns(), 0);
  // The probe statfs at mount time went through the mount, so something was received.
  uint64_t received = 0;
  for (const auto& q : state.queues()) received += q.received_total();
  EXPECT_GT(received, 0u);
}

// Regression guard for issue 3's promise: switching {0,1} -> {0} -> {0,1} while I/O runs on
// CPU 1 loses nothing, and the inactive worker takes no new backend work.
std::string Data(int i) {
  std::vector<char> bytes = ringfs::testing::RandomBytes(256 * 1024 + i * 777, i + 1);
  return std::string(bytes.begin(), bytes.end());
}

TEST_F(ControlMountTest, SetActiveSetBackAndForthWithIoInBetween) {
  control::QueueState state = List();
  if (state.queues_size() < 2) GTEST_SKIP() << "needs 2 possible CPUs";
  // Written through the mount from CPU 1, read back through the mount and from the export
  // (so the data provably reached the server).
  auto io_on_cpu1 = [&](const std::string& tag) {
    std::thread worker([&] {
      ASSERT_TRUE(PinToCpu(1));
      for (int i = 0; i < 4; ++i) {
        std::string name = tag + std::to_string(i);
        ASSERT_EQ(ringfs::testing::WriteFile(env_->Mnt(name), Data(i)), 0) << name;
        EXPECT_EQ(ringfs::testing::ReadFile(env_->Mnt(name)), Data(i)) << name;
        struct stat st {};
        ASSERT_EQ(stat(env_->Mnt(name).c_str(), &st), 0);
      }
    });
    worker.join();
  };
  io_on_cpu1("before-");

  ASSERT_TRUE(SetActive({0}, &state).ok());
  ASSERT_EQ(state.settings().active_cpus_size(), 1);
  EXPECT_EQ(state.settings().active_cpus(0), 0u);
  EXPECT_FALSE(state.queues(1).active());
  EXPECT_EQ(state.queues(1).owner_cpu(), 0u) << "qid 1 now belongs to the worker on CPU 0";
  uint64_t forwarded1 = state.queues(1).forwarded_total();
  uint64_t received1 = state.queues(1).received_total();
  uint64_t forwarded0 = state.queues(0).forwarded_total();

  io_on_cpu1("during-");
  state = List();
  EXPECT_EQ(state.queues(1).forwarded_total(), forwarded1)
      << "the inactive worker on CPU 1 forwarded new requests";
  EXPECT_GT(state.queues(1).received_total(), received1) << "the I/O did not arrive on qid 1";
  EXPECT_GT(state.queues(0).forwarded_total(), forwarded0);

  ASSERT_TRUE(SetActive({0, 1}, &state).ok());
  EXPECT_EQ(state.settings().active_cpus_size(), 2);
  EXPECT_TRUE(state.queues(1).active());
  EXPECT_EQ(state.queues(1).owner_cpu(), 1u);
  EXPECT_EQ(state.queues(1).worker_state(), "active");
  io_on_cpu1("after-");
  state = List();
  EXPECT_GT(state.queues(1).forwarded_total(), forwarded1) << "CPU 1's worker is back at work";

  // Everything written in any phase is still there.
  for (const char* tag : {"before-", "during-", "after-"}) {
    for (int i = 0; i < 4; ++i) {
      std::string name = tag + std::to_string(i);
      EXPECT_EQ(ringfs::testing::ReadFile(env_->Mnt(name)), Data(i)) << name;
      EXPECT_EQ(ringfs::testing::ReadFile(env_->Exp(name)), Data(i)) << name << " on the server";
    }
  }
}

TEST_F(ControlMountTest, SetActiveSetRefusesWhatIsWrongAndChangesNothing) {
  control::QueueState before = List(), state;
  ExpectInvalid(SetActive({}, &state), "empty");
  ExpectInvalid(SetActive({99}, &state), "CPU 99 is not a possible CPU");
  ExpectInvalid(SetActive({4294967295u}, &state), "not a possible CPU");
  ExpectInvalid(SetActive({0, 0}, &state), "listed twice");
  EXPECT_EQ(List().settings().SerializeAsString(), before.settings().SerializeAsString());
}

TEST_F(ControlMountTest, SetBackgroundLimitIsAppliedByTheWorkersAndReadBack) {
  control::QueueState state;
  ASSERT_TRUE(SetLimit(std::nullopt, 4, false, &state).ok());
  EXPECT_EQ(state.settings().default_background_limit(), 4u);
  for (const auto& q : state.queues()) EXPECT_EQ(q.background_limit(), 4u) << "qid " << q.qid();

  ASSERT_TRUE(SetLimit(0, 2, false, &state).ok());
  EXPECT_EQ(state.settings().default_background_limit(), 4u);
  ASSERT_EQ(state.settings().background_limit_by_cpu().count(0), 1u);
  EXPECT_EQ(state.settings().background_limit_by_cpu().at(0), 2u);
  EXPECT_EQ(state.queues(0).background_limit(), 2u);
  if (state.queues_size() > 1) {
    EXPECT_EQ(state.queues(1).background_limit(), 4u);
  }
  EXPECT_EQ(List().queues(0).background_limit(), 2u);

  ASSERT_TRUE(SetLimit(std::nullopt, 0, true, &state).ok());
  EXPECT_EQ(state.settings().default_background_limit(), 0u);
  EXPECT_TRUE(state.settings().background_limit_by_cpu().empty()) << "all: overrides cleared";
  for (const auto& q : state.queues()) EXPECT_EQ(q.background_limit(), 0u);

  ExpectInvalid(SetLimit(std::nullopt, 0, false, &state), "at least 1");
  ExpectInvalid(SetLimit(0, 0, false, &state), "at least 1");
  ExpectInvalid(SetLimit(99, 3, false, &state), "CPU 99 is not a possible CPU");
}

TEST_F(ControlMountTest, SetPolicyChangesOnlyWhatIsSetAndValidates) {
  const std::string initial_foreground = List().settings().foreground_policy();
  control::QueueState state;
  control::SetPolicyRequest request;
  request.set_background("p2c");
  request.mutable_thresholds()->set_local(1);
  request.mutable_thresholds()->set_numa(2);
  request.mutable_thresholds()->set_global(3);
  request.mutable_thresholds()->set_next_core_retries(1);
  request.set_commit_locality("origin");
  ASSERT_TRUE(SetPolicy(request, &state).ok());
  EXPECT_EQ(state.settings().foreground_policy(), initial_foreground) << "unset: kept";
  EXPECT_EQ(state.settings().background_policy(), "p2c");
  EXPECT_EQ(state.settings().thresholds().global(), 3u);
  EXPECT_EQ(state.settings().thresholds().next_core_retries(), 1u);
  EXPECT_EQ(state.settings().commit_locality(), "origin");

  control::SetPolicyRequest foreground;
  foreground.set_foreground("next-core");
  ASSERT_TRUE(SetPolicy(foreground, &state).ok());
  EXPECT_EQ(state.settings().foreground_policy(), "next-core");
  EXPECT_EQ(state.settings().background_policy(), "p2c") << "unset: kept";
  EXPECT_EQ(List().settings().foreground_policy(), "next-core");

  control::QueueState before = List();
  control::SetPolicyRequest bad;
  bad.set_foreground("bogus");
  ExpectInvalid(SetPolicy(bad, &state), "bogus");
  bad.Clear();
  bad.set_background("fastest");
  ExpectInvalid(SetPolicy(bad, &state), "fastest");
  bad.Clear();
  bad.set_commit_locality("nowhere");
  ExpectInvalid(SetPolicy(bad, &state), "nowhere");
  bad.Clear();
  bad.mutable_thresholds()->set_local(3);
  bad.mutable_thresholds()->set_numa(2);
  bad.mutable_thresholds()->set_global(1);
  ExpectInvalid(SetPolicy(bad, &state), "local <= numa <= global");
  bad.Clear();
  bad.mutable_thresholds();  // all zero
  ExpectInvalid(SetPolicy(bad, &state), "at least 1");
  EXPECT_EQ(List().settings().SerializeAsString(), before.settings().SerializeAsString());
}

TEST_F(ControlMountTest, KernelLimitsReadAndWriteFusectl) {
  auto stub = NewStub();
  control::KernelLimits original;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub->GetKernelLimits(&context, {}, &original).ok());
  }
  EXPECT_GT(original.connection(), 0u);
  EXPECT_GT(original.max_background(), 0u);
  EXPECT_EQ(ReadFile("/sys/fs/fuse/connections/" + std::to_string(original.connection()) +
                     "/max_background"),
            std::to_string(original.max_background()) + "\n");

  control::SetKernelLimitsRequest request;
  request.set_max_background(20);
  request.set_congestion_threshold(15);
  control::KernelLimits changed;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub->SetKernelLimits(&context, request, &changed).ok());
  }
  EXPECT_EQ(changed.max_background(), 20u);
  EXPECT_EQ(changed.congestion_threshold(), 15u);
  {
    control::SetKernelLimitsRequest only_one;
    only_one.set_max_background(21);
    grpc::ClientContext context;
    ASSERT_TRUE(stub->SetKernelLimits(&context, only_one, &changed).ok());
    EXPECT_EQ(changed.max_background(), 21u);
    EXPECT_EQ(changed.congestion_threshold(), 15u) << "unset: kept";
  }
  for (uint32_t bad : {0u, 70000u}) {
    control::SetKernelLimitsRequest invalid;
    invalid.set_max_background(bad);
    grpc::ClientContext context;
    ExpectInvalid(stub->SetKernelLimits(&context, invalid, &changed), "max_background");
  }
  {
    control::SetKernelLimitsRequest invalid;
    invalid.set_congestion_threshold(0);
    grpc::ClientContext context;
    ExpectInvalid(stub->SetKernelLimits(&context, invalid, &changed), "congestion_threshold");
  }
}

TEST_F(ControlMountTest, MountInfoDescribesTheMount) {
  control::MountInfo info;
  grpc::ClientContext context;
  ASSERT_TRUE(NewStub()->GetMountInfo(&context, {}, &info).ok());
  EXPECT_EQ(info.mountpoint(), mountpoint());
  EXPECT_EQ(info.server(), env_->server_address());
  EXPECT_EQ(info.source(), env_->server_address() + ":/");
  EXPECT_EQ(info.transport(), "uring");
  EXPECT_EQ(info.fuse_major(), 7u);
  EXPECT_GE(info.fuse_minor(), 40u);
  EXPECT_EQ(info.queue_depth(), 16u);
  EXPECT_NE(info.fuse_flags(), 0u);
  EXPECT_THAT(info.fuse_flag_names(), ::testing::Contains("FUSE_OVER_IO_URING"));
  EXPECT_THAT(info.fuse_flag_names(), ::testing::Contains("FUSE_INIT_EXT"));
  EXPECT_GT(info.uptime_seconds(), 0);
  EXPECT_FALSE(info.client_id().empty());
}

TEST_F(ControlMountTest, WatchQueuesStreamsAtTheIntervalUntilCountOrCancel) {
  auto stub = NewStub();
  {
    grpc::ClientContext context;
    control::WatchQueuesRequest request;
    request.set_interval_ms(100);
    request.set_count(3);
    auto reader = stub->WatchQueues(&context, request);
    std::vector<int64_t> stamps;
    control::QueueState state;
    while (reader->Read(&state)) stamps.push_back(state.timestamp_unix_ns());
    ASSERT_TRUE(reader->Finish().ok());
    ASSERT_EQ(stamps.size(), 3u);
    for (size_t i = 1; i < stamps.size(); ++i) {
      EXPECT_GE(stamps[i] - stamps[i - 1], 80'000'000) << "states closer than the interval";
    }
  }
  {
    // count 0: until the client goes away.
    grpc::ClientContext context;
    control::WatchQueuesRequest request;
    request.set_interval_ms(100);
    auto reader = stub->WatchQueues(&context, request);
    control::QueueState state;
    ASSERT_TRUE(reader->Read(&state));
    ASSERT_TRUE(reader->Read(&state));
    auto started = std::chrono::steady_clock::now();
    context.TryCancel();
    while (reader->Read(&state)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  }
  {
    grpc::ClientContext context;
    control::WatchQueuesRequest request;
    request.set_interval_ms(50);
    auto reader = stub->WatchQueues(&context, request);
    control::QueueState state;
    EXPECT_FALSE(reader->Read(&state));
    ExpectInvalid(reader->Finish(), "minimum");
  }
}

TEST_F(ControlMountTest, UnixSocketIsRootOnlyAndRemovedAtUnmount) {
  struct stat st {};
  ASSERT_EQ(stat(socket_path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, 0u);

  // A process that is not root cannot connect.
  const std::string path = socket_path();
  std::string as_nobody_connect =
      ringfs::testing::RunAsUser(kNobody, kNobody, [&]() -> std::string {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
        int rc = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
        int err = errno;
        close(fd);
        if (rc == 0) return "uid 65534 connected to the 0600 control socket";
        return err == EACCES ? "" : "connect failed with " + ringfs::testing::ErrnoName(err);
      });
  EXPECT_EQ(as_nobody_connect, "");

  // Neither can ringfsctl run as nobody.
  CommandResult as_nobody =
      RunCapture({BinPath("ringfsctl"), control_address(), "queues"}, std::chrono::seconds(20), [] {
        if (setgroups(0, nullptr) != 0 || setgid(kNobody) != 0 || setuid(kNobody) != 0) _exit(3);
      });
  EXPECT_EQ(as_nobody.exit_code, 1) << as_nobody.out << as_nobody.err;
  EXPECT_THAT(as_nobody.err, HasSubstr("Permission denied"));

  ASSERT_TRUE(env_->Unmount());
  EXPECT_FALSE(std::filesystem::exists(path)) << "ringfs-mount left its control socket behind";
}

bool ParseState(const std::string& json, control::QueueState* state) {
  auto status = google::protobuf::util::JsonStringToMessage(json, state);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return status.ok();
}

TEST_F(ControlMountTest, RingfsctlJsonIsProtobufJson) {
  CommandResult queues = Ctl({"--json", "queues"});
  ASSERT_EQ(queues.exit_code, 0) << queues.err;
  control::QueueState state;
  ASSERT_TRUE(ParseState(queues.out, &state));
  control::QueueState direct = List();
  EXPECT_EQ(state.queues_size(), direct.queues_size());
  EXPECT_EQ(state.settings().SerializeAsString(), direct.settings().SerializeAsString());

  CommandResult info = RunCtl({"--json", control_address(), "info"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  control::MountInfo mount_info;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(info.out, &mount_info).ok());
  EXPECT_EQ(mount_info.mountpoint(), mountpoint());
}

TEST_F(ControlMountTest, RingfsctlChangesSettingsAndReportsRefusals) {
  const std::string& addr = control_address();
  CommandResult limit = RunCtl({"--json", addr, "bg-limit", "--queue", "0", "3"});
  ASSERT_EQ(limit.exit_code, 0) << limit.err;
  control::QueueState state;
  ASSERT_TRUE(ParseState(limit.out, &state));
  EXPECT_EQ(state.queues(0).background_limit(), 3u);
  EXPECT_EQ(List().queues(0).background_limit(), 3u);

  CommandResult table = RunCtl({addr, "queues"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("QID"));
  EXPECT_THAT(table.out, HasSubstr("per CPU: 0=3"));

  const uint32_t retries = List().settings().thresholds().next_core_retries();
  CommandResult policy = RunCtl({addr, "policy", "--background", "local", "--thresholds", "2/4/6"});
  ASSERT_EQ(policy.exit_code, 0) << policy.err;
  EXPECT_EQ(List().settings().thresholds().global(), 6u);
  EXPECT_EQ(List().settings().thresholds().next_core_retries(), retries) << "kept";

  CommandResult kernel = RunCtl({addr, "kernel", "--congestion-threshold", "12"});
  ASSERT_EQ(kernel.exit_code, 0) << kernel.err;
  EXPECT_THAT(kernel.out, HasSubstr("congestion_threshold 12"));

  CommandResult refused = RunCtl({addr, "set-active", "99"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(refused.err, HasSubstr("CPU 99 is not a possible CPU"));

  CommandResult zero = RunCtl({addr, "bg-limit", "0"});
  EXPECT_EQ(zero.exit_code, 1);
  EXPECT_THAT(zero.err, HasSubstr("at least 1"));

  CommandResult usage = RunCtl({addr, "set-active"});
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_THAT(usage.err, HasSubstr("usage:"));

  CommandResult unreachable = RunCtl({"unix:" + env_->base() + "/no-such.sock", "queues"});
  EXPECT_EQ(unreachable.exit_code, 1);
  EXPECT_THAT(unreachable.err, HasSubstr("no control socket"));

  CommandResult no_tcp =
      RunCtl({"127.0.0.1:" + std::to_string(ringfs::testing::UnusedLoopbackPort()), "queues"});
  EXPECT_EQ(no_tcp.exit_code, 1);
  EXPECT_THAT(no_tcp.err, HasSubstr("cannot reach"));
}

TEST_F(ControlMountTest, RingfsctlWatchRedrawsAndStreamsJsonLines) {
  auto started = std::chrono::steady_clock::now();
  CommandResult table = RunCtl({control_address(), "watch", "--count", "3", "--interval", "200ms"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(400));
  size_t headers = 0;
  for (size_t at = table.out.find("QID"); at != std::string::npos;
       at = table.out.find("QID", at + 1)) {
    ++headers;
  }
  EXPECT_EQ(headers, 3u) << table.out;
  EXPECT_THAT(table.out, HasSubstr("FWD/S")) << "rates from the second state on";

  CommandResult json =
      RunCtl({"--json", control_address(), "watch", "--count", "3", "--interval", "200ms"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  std::vector<std::string> lines = absl::StrSplit(json.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << json.out;
  for (const std::string& line : lines) {
    control::QueueState state;
    EXPECT_TRUE(ParseState(line, &state));
    EXPECT_GT(state.queues_size(), 0);
  }
}

class TcpControlTest : public ControlMountTest {
 protected:
  ControlSpec Spec() const override {
    ControlSpec spec;
    spec.control = ControlSpec::Control::kTcp;
    return spec;
  }
};

TEST_F(TcpControlTest, EveryCallNeedsTheToken) {
  auto stub = NewStub();
  control::QueueState state;
  control::MountInfo info;
  {
    grpc::ClientContext context;
    grpc::Status status = stub->ListQueues(&context, {}, &state);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  }
  {
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer wrong-token");
    grpc::Status status = stub->GetMountInfo(&context, {}, &info);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    context.AddMetadata("authorization", token());  // without "Bearer "
    EXPECT_EQ(stub->GetMountInfo(&context, {}, &info).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    // A refused change must not have happened.
    grpc::ClientContext context;
    control::SetActiveSetRequest request;
    request.add_cpus(0);
    EXPECT_EQ(stub->SetActiveSet(&context, request, &state).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    control::WatchQueuesRequest request;
    request.set_count(1);
    auto reader = stub->WatchQueues(&context, request);
    EXPECT_FALSE(reader->Read(&state));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  state = List();  // with the token
  EXPECT_EQ(state.settings().active_cpus_size(), state.queues_size()) << "nothing changed";
  {
    grpc::ClientContext context;
    Authorize(&context);
    EXPECT_TRUE(stub->GetMountInfo(&context, {}, &info).ok());
  }

  CommandResult with_token = Ctl({"info"});
  EXPECT_EQ(with_token.exit_code, 0) << with_token.err;
  CommandResult without = RunCtl({control_address(), "info"});
  EXPECT_EQ(without.exit_code, 1);
  EXPECT_THAT(without.err, HasSubstr("UNAUTHENTICATED"));
}

class ControlOptionsTest : public ringfs::testing::RingfsTestBase {};

TEST_F(ControlOptionsTest, TcpControlWithoutTokenFileIsRefusedBeforeMounting) {
  ASSERT_TRUE(NewEnv());
  CommandResult result = RunCapture({BinPath("ringfs-mount"), "127.0.0.1:1:/", env_->mount_dir(),
                                     "-f", "-o", "control=127.0.0.1:7777"});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_THAT(result.err, HasSubstr("control_token_file"));
  EXPECT_FALSE(ringfs::testing::IsMounted(env_->mount_dir()));
}

class ClassicTransportTest : public ControlMountTest {
 protected:
  ControlSpec Spec() const override {
    ControlSpec spec;
    spec.transport = "classic";
    spec.metrics = true;
    return spec;
  }
};

TEST_F(ClassicTransportTest, QueueCallsNeedTheRingButInfoAndKernelWork) {
  auto stub = NewStub();
  control::QueueState state;
  {
    grpc::ClientContext context;
    grpc::Status status = stub->ListQueues(&context, {}, &state);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(status.error_message(), HasSubstr("queue engine needs transport=uring"));
  }
  EXPECT_EQ(SetActive({0}, &state).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(SetLimit(std::nullopt, 1, false, &state).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  control::SetPolicyRequest policy;
  policy.set_background("local");
  EXPECT_EQ(SetPolicy(policy, &state).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  {
    grpc::ClientContext context;
    auto reader = stub->WatchQueues(&context, {});
    EXPECT_FALSE(reader->Read(&state));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  }
  control::MountInfo info;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub->GetMountInfo(&context, {}, &info).ok());
    EXPECT_EQ(info.transport(), "classic");
  }
  control::KernelLimits limits;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub->GetKernelLimits(&context, {}, &limits).ok());
    EXPECT_GT(limits.max_background(), 0u);
  }
  // Metrics: what exists without the queue engine. Per-worker series come from the /dev/fuse
  // workers; a write through the mount shows up in them.
  ASSERT_EQ(ringfs::testing::WriteFile(env_->Mnt("classic-metrics"), "x"), 0);
  std::string metrics = HttpGet(metrics_port(), "/metrics");
  EXPECT_THAT(metrics, HasSubstr("ringfs_frontend_info{transport=\"classic\""));
  EXPECT_THAT(metrics, HasSubstr("ringfs_frontend_kernel_max_background "));
  EXPECT_THAT(metrics, HasSubstr("ringfs_frontend_requests_received_total{queue=\"0\"}"));
  EXPECT_THAT(metrics, ::testing::ContainsRegex("ringfs_frontend_requests_total\\{[^}]*op=\"WRITE\""));
  EXPECT_THAT(metrics, HasSubstr("ringfs_frontend_backend_rtt_seconds_count{queue=\"0\"}"));
  EXPECT_THAT(metrics, ::testing::Not(HasSubstr("ringfs_frontend_queue_active")));
  EXPECT_THAT(metrics, ::testing::Not(HasSubstr("ringfs_frontend_background_limit")));
}

}  // namespace
}  // namespace ringfs::controller::testing
