#include "frontend/queue/topology.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringfs::frontend::queue {
namespace {

// Larger than any kernel's NR_CPUS; bounds the lookup table against absurd input.
constexpr int kMaxCpu = 65535;

absl::StatusOr<std::string> ReadWholeFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  if (!in) return absl::UnavailableError(absl::StrFormat("cannot read %s", path.string()));
  return content.str();
}

// "node12" -> 12; anything else (e.g. "possible", "has_cpu") -> -1.
int NodeIdFromDirName(const std::string& name) {
  int node = -1;
  if (name.size() <= 4 || name.compare(0, 4, "node") != 0) return -1;
  if (!absl::SimpleAtoi(name.substr(4), &node) || node < 0 || node > kMaxCpu) return -1;
  return node;
}

}  // namespace

absl::StatusOr<std::vector<int>> ParseCpuList(std::string_view text) {
  absl::string_view trimmed =
      absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()));
  if (trimmed.empty()) return absl::InvalidArgumentError("empty CPU list");
  std::vector<int> cpus;
  for (absl::string_view part : absl::StrSplit(trimmed, ',')) {
    std::vector<absl::string_view> bounds = absl::StrSplit(part, '-');
    int first = -1;
    int last = -1;
    bool ok = (bounds.size() == 1 || bounds.size() == 2) && absl::SimpleAtoi(bounds[0], &first);
    last = first;
    if (ok && bounds.size() == 2) ok = absl::SimpleAtoi(bounds[1], &last);
    if (!ok || first < 0 || last < first || last > kMaxCpu) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "bad CPU list '%s': '%s' is not a CPU or an ascending range of CPUs (0-%d)",
          std::string(trimmed), std::string(part), kMaxCpu));
    }
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  }
  return cpus;
}

std::string FormatCpuList(std::span<const int> sorted_cpus) {
  std::string out;
  for (size_t i = 0; i < sorted_cpus.size();) {
    size_t j = i;
    while (j + 1 < sorted_cpus.size() && sorted_cpus[j + 1] == sorted_cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += (j == i) ? absl::StrFormat("%d", sorted_cpus[i])
                    : absl::StrFormat("%d-%d", sorted_cpus[i], sorted_cpus[j]);
    i = j + 1;
  }
  return out;
}

absl::StatusOr<Topology> Topology::FromSysfs(const std::string& sysfs_root) {
  const std::filesystem::path system = std::filesystem::path(sysfs_root) / "devices/system";
  absl::StatusOr<std::string> possible_text = ReadWholeFile(system / "cpu/possible");
  if (!possible_text.ok()) return possible_text.status();
  absl::StatusOr<std::vector<int>> possible = ParseCpuList(*possible_text);
  if (!possible.ok()) return possible.status();
  std::vector<int> cpus = std::move(*possible);
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());

  std::vector<int> node_of_cpu_index(cpus.size(), -1);
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(system / "node", error)) {
    const int node = NodeIdFromDirName(entry.path().filename().string());
    if (node < 0) continue;
    absl::StatusOr<std::string> list_text = ReadWholeFile(entry.path() / "cpulist");
    if (!list_text.ok()) return list_text.status();
    // Memory-only nodes have an empty cpulist.
    if (absl::StripAsciiWhitespace(*list_text).empty()) continue;
    absl::StatusOr<std::vector<int>> node_cpus = ParseCpuList(*list_text);
    if (!node_cpus.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: %s", (entry.path() / "cpulist").string(), node_cpus.status().message()));
    }
    for (int cpu : *node_cpus) {
      auto it = std::lower_bound(cpus.begin(), cpus.end(), cpu);
      if (it == cpus.end() || *it != cpu) continue;  // listed but not possible: no queue
      int& slot = node_of_cpu_index[it - cpus.begin()];
      // Directory order is arbitrary; keep the lowest node if a CPU were listed twice.
      slot = (slot < 0) ? node : std::min(slot, node);
    }
  }
  // A missing node directory means no NUMA; a CPU no node lists is put with node 0.
  for (int& node : node_of_cpu_index) {
    if (node < 0) node = 0;
  }
  return Topology(std::move(cpus), std::move(node_of_cpu_index));
}

Topology Topology::ForTest(const std::vector<std::vector<int>>& cpus_per_node) {
  std::vector<std::pair<int, int>> cpu_node;
  for (size_t node = 0; node < cpus_per_node.size(); ++node) {
    for (int cpu : cpus_per_node[node]) cpu_node.emplace_back(cpu, static_cast<int>(node));
  }
  std::sort(cpu_node.begin(), cpu_node.end());
  std::vector<int> cpus;
  std::vector<int> nodes;
  for (const auto& [cpu, node] : cpu_node) {
    cpus.push_back(cpu);
    nodes.push_back(node);
  }
  return Topology(std::move(cpus), std::move(nodes));
}

Topology::Topology(std::vector<int> cpus, std::vector<int> node_of_cpu_index)
    : cpus_(std::move(cpus)), node_of_cpu_index_(std::move(node_of_cpu_index)) {
  index_of_cpu_.assign(cpus_.empty() ? 0 : cpus_.back() + 1, -1);
  for (size_t i = 0; i < cpus_.size(); ++i) {
    index_of_cpu_[cpus_[i]] = static_cast<int>(i);
    const int node = node_of_cpu_index_[i];
    if (static_cast<size_t>(node) >= cpus_by_node_.size()) cpus_by_node_.resize(node + 1);
    cpus_by_node_[node].push_back(cpus_[i]);  // stays ascending: cpus_ is
  }
  for (size_t node = 0; node < cpus_by_node_.size(); ++node) {
    if (!cpus_by_node_[node].empty()) nodes_.push_back(static_cast<int>(node));
  }
}

int Topology::IndexOf(int cpu) const {
  if (cpu < 0 || static_cast<size_t>(cpu) >= index_of_cpu_.size()) return -1;
  return index_of_cpu_[cpu];
}

int Topology::NodeOf(int cpu) const {
  const int index = IndexOf(cpu);
  return index < 0 ? -1 : node_of_cpu_index_[index];
}

std::span<const int> Topology::CpusOfNode(int node) const {
  if (node < 0 || static_cast<size_t>(node) >= cpus_by_node_.size()) return {};
  return cpus_by_node_[node];
}

}  // namespace ringfs::frontend::queue
