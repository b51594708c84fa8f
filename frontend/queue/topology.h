// The CPUs the kernel keeps FUSE ring queues for (every *possible* CPU) and their NUMA nodes.
// Immutable after construction; any thread may read it. Only FromSysfs() touches the OS.
// Index i of cpus() is the kernel queue (qid) of CPU cpus()[i]; the possible mask is contiguous
// in practice, so index == CPU number == qid, but callers should not rely on that.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ringfs::frontend::queue {

// Parses the kernel's CPU list format ("0-3,8,10-11") in the order written; duplicates are kept
// so that callers can report them. Empty or malformed text is InvalidArgument.
absl::StatusOr<std::vector<int>> ParseCpuList(std::string_view text);

// The inverse of ParseCpuList for sorted lists: {0,1,2,3,8} -> "0-3,8". Used in messages.
std::string FormatCpuList(std::span<const int> sorted_cpus);

class Topology {
 public:
  // Reads <sysfs_root>/devices/system/cpu/possible and <sysfs_root>/devices/system/node/node*/
  // cpulist. A CPU that no node lists belongs to node 0; without node directories (kernels built
  // without NUMA) every CPU does. The root is a parameter so tests can point at a fake tree.
  static absl::StatusOr<Topology> FromSysfs(const std::string& sysfs_root = "/sys");

  // Node n holds cpus_per_node[n]. REQUIRES: no CPU appears twice.
  static Topology ForTest(const std::vector<std::vector<int>>& cpus_per_node);

  // Possible CPUs, ascending.
  const std::vector<int>& cpus() const { return cpus_; }
  // node_of_cpu_index()[i] is the NUMA node of cpus()[i].
  const std::vector<int>& node_of_cpu_index() const { return node_of_cpu_index_; }
  // Nodes that hold at least one possible CPU, ascending.
  const std::vector<int>& nodes() const { return nodes_; }
  size_t size() const { return cpus_.size(); }

  bool Contains(int cpu) const { return IndexOf(cpu) >= 0; }
  // The index of `cpu` in cpus(), or -1 when it is not a possible CPU.
  int IndexOf(int cpu) const;
  // -1 when `cpu` is not a possible CPU.
  int NodeOf(int cpu) const;
  // The node's CPUs, ascending; empty for a node without CPUs. No allocation (hot path).
  std::span<const int> CpusOfNode(int node) const;

 private:
  // REQUIRES: cpus ascending and unique; node_of_cpu_index.size() == cpus.size().
  Topology(std::vector<int> cpus, std::vector<int> node_of_cpu_index);

  std::vector<int> cpus_;
  std::vector<int> node_of_cpu_index_;
  std::vector<int> nodes_;
  std::vector<int> index_of_cpu_;               // by CPU number; -1 = not possible
  std::vector<std::vector<int>> cpus_by_node_;  // by node id
};

}  // namespace ringfs::frontend::queue
