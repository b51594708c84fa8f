// The queue engine under the load of issue 9 (item 4): two verifying fio jobs on a ring mount —
// psync 4 KiB writes with fsyncs (foreground) and 64 KiB O_DIRECT io_uring at depth 16
// (background, FUSE_ASYNC_DIO) — while the active set is switched between {0} and {0,1} and the
// background limit changed, through the real control service. On main both jobs hung for good:
// ring entries vanished in handoffs from retiring workers. At the end every job must have
// finished with its data verified, the kernel must wait on nothing, every entry must be back
// and both CPUs' queues must answer, and no process may be left in D state.
// RINGFS_STRESS_SECONDS (default 30) and RINGFS_STRESS_CHANGES (default 100 of each kind) make
// it longer for a soak.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "controller/integration/control_test_base.h"
#include "tests/harness/process.h"
#include "tests/harness/system.h"

namespace ringfs::controller::testing {
namespace {

using Clock = std::chrono::steady_clock;
using ringfs::testing::ChildProcess;

int EnvInt(const char* name, int fallback) {
  const char* text = std::getenv(name);
  int value = text ? std::atoi(text) : 0;
  return value > 0 ? value : fallback;
}

// Tasks (threads included) in uninterruptible sleep whose process is this test or whose
// command line names `needle`.
std::vector<std::string> TasksInDState(const std::string& needle) {
  std::vector<std::string> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* process = readdir(proc)) {
    std::string pid = process->d_name;
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = ringfs::testing::ReadFileOrEmpty("/proc/" + pid + "/cmdline");
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    if (pid != std::to_string(getpid()) && cmdline.find(needle) == std::string::npos) continue;
    DIR* tasks = opendir(("/proc/" + pid + "/task").c_str());
    if (tasks == nullptr) continue;
    while (dirent* task = readdir(tasks)) {
      std::string tid = task->d_name;
      if (tid.find_first_not_of("0123456789") != std::string::npos) continue;
      std::string stat = ringfs::testing::ReadFileOrEmpty("/proc/" + pid + "/task/" + tid + "/stat");
      size_t paren = stat.rfind(')');
      if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'D') {
        found.push_back(tid + " (" + cmdline.substr(0, 120) + ")");
      }
    }
    closedir(tasks);
  }
  closedir(proc);
  return found;
}

// `"error" : N` of the first job in fio's JSON output; -1 when absent.
int FioJobError(const std::string& json) {
  size_t at = json.find("\"error\"");
  if (at == std::string::npos) return -1;
  at = json.find(':', at);
  return at == std::string::npos ? -1 : std::atoi(json.c_str() + at + 1);
}

class QueueStressTest : public ControlTest {
 protected:
  std::chrono::seconds Budget() const override { return std::chrono::seconds(220); }

  uint32_t Waiting(control::QueueControl::Stub* stub) {
    grpc::ClientContext context;
    control::KernelLimits limits;
    grpc::Status status =
        stub->GetKernelLimits(&context, control::GetKernelLimitsRequest(), &limits);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return status.ok() ? limits.waiting() : UINT32_MAX;
  }

  std::string Describe(control::QueueControl::Stub* stub) {
    std::ostringstream out;
    out << "fusectl waiting=" << Waiting(stub) << "; queues:";
    control::QueueState state = ListQueuesOrFail(stub);
    for (const auto& q : state.queues()) {
      out << " [qid " << q.qid() << " " << q.worker_state() << " held " << q.entries_held()
          << " registered " << q.ring_entries() << " inflight " << q.inflight() << " bg queued " << q.background_queued() << "]";
    }
    return out.str();
  }

  // A stat() of the mount root from `cpu` (so on that CPU's kernel queue) within 10 s.
  bool StatFromCpu(int cpu) {
    auto done = std::make_shared<std::atomic<int>>(0);  // 1 ok, 2 failed
    std::thread probe([done, cpu, path = mountpoint()] {
      PinToCpu(cpu);
      struct stat info;
      *done = stat(path.c_str(), &info) == 0 ? 1 : 2;
    });
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (done->load() == 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (done->load() == 0) {
      ADD_FAILURE() << "stat on CPU " << cpu << " hung; "
                    << ringfs::testing::ForceUnmount(mountpoint());
    }
    probe.join();
    return done->load() == 1;
  }
};

TEST_F(QueueStressTest, VerifyingFioSurvivesActiveSetAndBackgroundLimitChanges) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs two CPUs";
  const std::string fio = FindInPath("fio");
  if (fio.empty()) GTEST_SKIP() << "fio is not installed (scripts/install-deps.sh installs it)";
  const int seconds = EnvInt("RINGFS_STRESS_SECONDS", 30);
  const int changes = EnvInt("RINGFS_STRESS_CHANGES", 100);
  auto stub = NewStub();
  uint32_t depth = 0;
  {
    grpc::ClientContext context;
    control::MountInfo info;
    ASSERT_TRUE(stub->GetMountInfo(&context, control::GetMountInfoRequest(), &info).ok());
    depth = info.queue_depth();
  }

  // --thread: one process per job, so nothing outlives a kill. verify_backlog makes a
  // time-based job verify as it goes (otherwise its verify phase would never start).
  const std::vector<std::vector<std::string>> jobs = {
      {"--name=a", "--rw=randwrite", "--bs=4k", "--ioengine=psync", "--fsync=16",
       "--size=32m", "--verify_backlog=256"},
      {"--name=b", "--rw=randrw", "--bs=64k", "--direct=1", "--ioengine=io_uring",
       "--iodepth=16", "--size=64m", "--verify_backlog=64"},
  };
  std::vector<std::unique_ptr<ChildProcess>> fios;
  std::vector<std::string> outputs;
  for (const auto& job : jobs) {
    std::string name = job[0].substr(7);
    outputs.push_back(env_->base() + "/fio-" + name + ".json");
    std::vector<std::string> argv = {fio, "--thread", "--directory=" + mountpoint(),
                                     "--verify=crc32c", "--verify_fatal=1", "--time_based",
                                     "--runtime=" + std::to_string(seconds),
                                     "--output-format=json", "--output=" + outputs.back()};
    argv.insert(argv.end(), job.begin(), job.end());
    std::string error;
    fios.push_back(ChildProcess::Spawn(argv, env_->base() + "/fio-" + name + ".log", &error));
    ASSERT_NE(fios.back(), nullptr) << error;
  }

  // The two kinds of change, each from its own thread as an operator's loops would be, paced
  // over the run with jitter (some back to back, so a worker is also restarted right after it
  // retired).
  const auto run_end = Clock::now() + std::chrono::seconds(seconds);
  std::atomic<int> failed_calls{0};
  std::atomic<int> set_active_calls{0}, limit_calls{0}, retired_seen{0};
  std::string first_failure;
  std::mutex failure_mu;
  auto note = [&](const grpc::Status& status, const char* what) {
    if (status.ok()) return;
    std::lock_guard<std::mutex> lock(failure_mu);
    if (failed_calls++ == 0) first_failure = std::string(what) + ": " + status.error_message();
  };
  auto pause = [&](std::mt19937& random) {
    auto average = std::chrono::milliseconds(seconds * 1000 / changes);
    if (random() % 4 == 0) return;
    std::this_thread::sleep_for(average * static_cast<int>(random() % 200) / 100);
  };
  std::thread toggler([&] {
    auto toggle_stub = NewStub();
    std::mt19937 random(1);
    for (int i = 0; i < changes && Clock::now() < run_end; ++i) {
      bool only_zero = i % 2 == 0;
      if (!only_zero) {
        // Before rejoining: has CPU 1's worker retired all the way (thread ended)?
        grpc::ClientContext context;
        control::QueueState state;
        if (toggle_stub->ListQueues(&context, control::ListQueuesRequest(), &state).ok()) {
          for (const auto& q : state.queues()) {
            if (q.qid() == 1 && q.worker_state() == "stopped") ++retired_seen;
          }
        }
      }
      grpc::ClientContext context;
      control::SetActiveSetRequest request;
      request.add_cpus(0);
      if (!only_zero) request.add_cpus(1);
      control::QueueState state;
      note(toggle_stub->SetActiveSet(&context, request, &state), "set-active");
      ++set_active_calls;
      pause(random);
    }
  });
  std::thread limiter([&] {
    auto limit_stub = NewStub();
    std::mt19937 random(2);
    const uint32_t limits[] = {1, 2, 4, 0};  // 0: unlimited
    for (int i = 0; i < changes && Clock::now() < run_end; ++i) {
      grpc::ClientContext context;
      control::SetBackgroundLimitRequest request;
      if (limits[i % 4] == 0) {
        request.set_unlimited(true);
      } else {
        request.set_limit(limits[i % 4]);
      }
      control::QueueState state;
      note(limit_stub->SetBackgroundLimit(&context, request, &state), "bg-limit");
      ++limit_calls;
      pause(random);
    }
  });
  toggler.join();
  limiter.join();

  // fio ends on its own at `seconds`; give it time to finish its verification and close.
  std::vector<std::optional<int>> exits;
  for (auto& child : fios) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        run_end + std::chrono::seconds(60) - Clock::now());
    exits.push_back(child->WaitExit(std::max(left, std::chrono::milliseconds(1000))));
  }
  bool hung = false;
  for (size_t i = 0; i < fios.size(); ++i) {
    if (!exits[i]) hung = true;
  }
  if (hung) {
    // Record the state, then free the jobs (fusectl abort) so nothing stays in D state.
    ADD_FAILURE() << "fio hung: " << Describe(stub.get()) << "; "
                  << ringfs::testing::ForceUnmount(mountpoint());
    for (auto& child : fios) child->Kill();
    return;
  }
  for (size_t i = 0; i < fios.size(); ++i) {
    std::string json = ringfs::testing::ReadFileOrEmpty(outputs[i]);
    EXPECT_TRUE(WIFEXITED(*exits[i]) && WEXITSTATUS(*exits[i]) == 0)
        << "fio " << jobs[i][0] << ": " << ringfs::testing::DescribeWaitStatus(*exits[i]) << "\n"
        << ringfs::testing::ReadFileOrEmpty(fios[i]->log_path());
    EXPECT_EQ(FioJobError(json), 0) << "fio " << jobs[i][0] << " reported an error (verify?):\n"
                                    << json.substr(0, 2000);
  }
  EXPECT_EQ(failed_calls.load(), 0) << first_failure;
  EXPECT_GT(set_active_calls.load(), changes / 4);
  EXPECT_GT(limit_calls.load(), changes / 4);
  // The scenario that lost entries: CPU 1's worker handed off everything and its thread ended.
  EXPECT_GT(retired_seen.load(), 0) << "CPU 1's worker never retired all the way";

  // Everything settles: the kernel waits on nothing and every entry is back with a worker.
  {
    grpc::ClientContext context;
    control::SetActiveSetRequest request;
    request.add_cpus(0);
    request.add_cpus(1);
    control::QueueState state;
    ASSERT_TRUE(stub->SetActiveSet(&context, request, &state).ok());
  }
  uint32_t waiting = UINT32_MAX, held = 0, expected = 0;
  auto deadline = Clock::now() + std::chrono::seconds(10);
  do {
    if (waiting != UINT32_MAX) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    waiting = Waiting(stub.get());
    control::QueueState state = ListQueuesOrFail(stub.get());
    held = 0;
    expected = 0;
    for (const auto& q : state.queues()) {
      held += q.entries_held();
      expected += q.ring_entries();
      EXPECT_EQ(q.ring_entries(), depth) << "queue " << q.qid() << ": queue_depth registered";
    }
  } while ((waiting != 0 || held != expected) && Clock::now() < deadline);
  EXPECT_EQ(waiting, 0u) << Describe(stub.get());
  EXPECT_EQ(held, expected) << "ring entries vanished: " << Describe(stub.get());
  // The entries held are counted per worker; a request on each CPU shows each kernel queue
  // still has a live one.
  EXPECT_TRUE(StatFromCpu(0));
  EXPECT_TRUE(StatFromCpu(1));

  std::vector<std::string> stuck = TasksInDState(env_->base());
  EXPECT_TRUE(stuck.empty()) << "in D state: " << ::testing::PrintToString(stuck);
  std::cerr << "stress: " << set_active_calls << " set-active, " << limit_calls
            << " bg-limit calls; CPU 1's worker seen retired " << retired_seen << " times\n";
}

}  // namespace
}  // namespace ringfs::controller::testing
