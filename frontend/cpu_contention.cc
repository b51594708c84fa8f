#include "frontend/cpu_contention.h"

#include <charconv>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace ringfs::frontend {

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
    const uint64_t busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    t.busy_ns = busy * ns_per_tick;
    t.total_ns = (busy + v[3] + v[4]) * ns_per_tick;
    out.push_back(t);
  }
  if (out.empty()) return absl::InvalidArgumentError("no CPU lines in /proc/stat");
  return out;
}

bool CpuContention::Update(const CpuTimes& times, uint64_t worker_ns) {
  auto [it, fresh] = cpus_.try_emplace(times.cpu);
  State& s = it->second;
  if (fresh || times.total_ns < s.last.total_ns || times.busy_ns < s.last.busy_ns) {
    // First look, or the counters went back (a CPU taken offline and back): start over.
    s.last = times;
    s.last_worker_ns = worker_ns;
    return s.contended;
  }
  const uint64_t interval = times.total_ns - s.last.total_ns;
  if (interval < kMinIntervalNs) return s.contended;
  const uint64_t busy = times.busy_ns - s.last.busy_ns;
  // A restarted worker's time starts again from 0: then count none of it.
  const uint64_t worker = worker_ns >= s.last_worker_ns ? worker_ns - s.last_worker_ns : 0;
  const double others =
      static_cast<double>(busy > worker ? busy - worker : 0) / static_cast<double>(interval);
  s.contended = s.contended ? others >= kLeave : others >= kEnter;
  s.last = times;
  s.last_worker_ns = worker_ns;
  return s.contended;
}

}  // namespace ringfs::frontend
