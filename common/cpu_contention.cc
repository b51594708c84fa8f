#include "common/cpu_contention.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/log.h"

namespace ringfs {

absl::StatusOr<std::vector<CpuTimes>> ParseProcStat(std::string_view text,
                                                    uint64_t ticks_per_second) {
  if (ticks_per_second == 0) return absl::InvalidArgumentError("USER_HZ of 0");
  const uint64_t ns_per_tick = 1'000'000'000 / ticks_per_second;
  std::vector<CpuTimes> out;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    // "cpu" alone is the sum over every CPU; "cpuN" are the CPUs.
    if (line.size() < 4 || line.substr(0, 3) != "cpu" || line[3] < '0' || line[3] > '9') continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    // cpuN user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is
    // already counted in user and nice.
    if (fields.size() < 9) return absl::InvalidArgumentError("short /proc/stat line");
    uint64_t v[8];
    for (int i = 0; i < 8; ++i) {
      absl::string_view f = fields[i + 1];
      auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v[i]);
      if (ec != std::errc() || end != f.data() + f.size()) {
        return absl::InvalidArgumentError("malformed /proc/stat line");
      }
    }
    CpuTimes t;
    absl::string_view number = fields[0].substr(3);
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), t.cpu);
    if (ec != std::errc() || end != number.data() + number.size()) {
      return absl::InvalidArgumentError("malformed /proc/stat CPU name");
    }
    // Steal is the hypervisor running someone else: nothing that competes in our run queue.
    const uint64_t busy = v[0] + v[1] + v[2] + v[5] + v[6];
    t.busy_ns = busy * ns_per_tick;
    t.total_ns = (busy + v[3] + v[4] + v[7]) * ns_per_tick;
    out.push_back(t);
  }
  if (out.empty()) return absl::InvalidArgumentError("no CPU lines in /proc/stat");
  return out;
}

absl::StatusOr<ThreadSched> ParseSchedstat(std::string_view text) {
  std::vector<absl::string_view> fields = absl::StrSplit(
      absl::string_view(text.data(), text.size()), absl::ByAnyChar(" \n"), absl::SkipEmpty());
  if (fields.size() < 3) return absl::InvalidArgumentError("short schedstat");
  uint64_t v[3];
  for (int i = 0; i < 3; ++i) {
    auto [end, ec] = std::from_chars(fields[i].data(), fields[i].data() + fields[i].size(), v[i]);
    if (ec != std::errc() || end != fields[i].data() + fields[i].size()) {
      return absl::InvalidArgumentError("malformed schedstat");
    }
  }
  return ThreadSched{v[0], v[1], v[2]};
}

char ParseTaskState(std::string_view stat) {
  // "pid (comm) S ...": the command may hold spaces and parentheses; the state follows the last.
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos || close + 2 >= stat.size()) return 0;
  return stat[close + 2];
}

namespace {

// A small proc file read whole; "" when it cannot be read.
std::string ReadProcFile(const char* path) {
  std::string text;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
  close(fd);
  return text;
}

}  // namespace

absl::StatusOr<std::vector<CpuTimes>> ReadCpuTimes() {
  static const uint64_t ticks_per_second = static_cast<uint64_t>(sysconf(_SC_CLK_TCK));
  return ParseProcStat(ReadProcFile("/proc/stat"), ticks_per_second);
}

ThreadSched ReadThreadSched(pid_t tid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", static_cast<int>(tid));
  ThreadSched sched = ParseSchedstat(ReadProcFile(path)).value_or(ThreadSched{});
  std::snprintf(path, sizeof(path), "/proc/self/task/%d/stat", static_cast<int>(tid));
  sched.runnable = ParseTaskState(ReadProcFile(path)) == 'R';
  return sched;
}

bool CpuContention::Update(const CpuTimes& times, const ThreadSched& worker) {
  auto [it, fresh] = cpus_.try_emplace(times.cpu);
  State& s = it->second;
  if (fresh || times.total_ns < s.last.total_ns || times.busy_ns < s.last.busy_ns) {
    // First look, or the counters went back (a CPU taken offline and back): start over.
    s.last = times;
    s.last_worker = worker;
    return s.contended;
  }
  const uint64_t interval = times.total_ns - s.last.total_ns;
  if (interval < kMinIntervalNs) return s.contended;
  const uint64_t busy = times.busy_ns - s.last.busy_ns;
  // A restarted worker's counters start again from 0: then nothing of it is known this once.
  ThreadSched delta;
  if (worker.cpu_ns >= s.last_worker.cpu_ns && worker.run_delay_ns >= s.last_worker.run_delay_ns &&
      worker.runs >= s.last_worker.runs) {
    delta = {worker.cpu_ns - s.last_worker.cpu_ns, worker.run_delay_ns - s.last_worker.run_delay_ns,
             worker.runs - s.last_worker.runs};
  }
  if (s.contended) {
    const double others = static_cast<double>(busy > delta.cpu_ns ? busy - delta.cpu_ns : 0) /
                          static_cast<double>(interval);
    s.contended = others >= kLeave;
  } else {
    s.contended = delta.runs > 0 ? delta.run_delay_ns / delta.runs >= kStarvedWaitNs
                                 : worker.runnable;  // waiting the whole interval, or running it
  }
  s.last = times;
  s.last_worker = worker;
  return s.contended;
}

bool CanLeaveSchedIdle() {
  // Tried rather than deduced: the kernel checks CAP_SYS_NICE in the initial user namespace
  // (capget answers for ours) and RLIMIT_NICE against the thread's own nice value.
  rlimit limit{};
  if (getrlimit(RLIMIT_NICE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NICE, &limit);
  }
  bool back = false;
  std::thread probe([&back] {
    sched_param param{};
    if (sched_setscheduler(0, SCHED_IDLE, &param) != 0) return;
    back = sched_setscheduler(0, SCHED_OTHER, &param) == 0;
  });
  probe.join();
  return back;
}

bool PinCurrentThread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); err != 0) {
    RINGFS_LOG_WARN("cannot pin worker to CPU %d (error %d); it runs unpinned", cpu, err);
    return false;
  }
  return true;
}

bool SetThreadIdle(pid_t tid, bool idle) {
  sched_param param{};
  // Linux schedules threads, not processes: a thread id names one thread.
  if (sched_setscheduler(tid, idle ? SCHED_IDLE : SCHED_OTHER, &param) == 0) return true;
  // Once: the callers retry every 200 ms (EPERM without CAP_SYS_NICE stays).
  static std::atomic<bool> warned{false};
  if (errno != ESRCH && !warned.exchange(true)) {
    RINGFS_LOG_WARN("cannot make a worker thread %s: %s (logged once)",
                    idle ? "SCHED_IDLE" : "SCHED_OTHER", std::strerror(errno));
  }
  return false;
}

}  // namespace ringfs
