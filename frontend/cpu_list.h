// Reads the kernel's CPU lists ("0-3,8,10-11" format) that decide the FUSE ring queues.
// Pure functions; callable from any thread.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ringfs::frontend {

absl::StatusOr<std::vector<int>> ParseCpuList(std::string_view text);

// The kernel creates one ring queue per *possible* CPU (not per online CPU).
absl::StatusOr<std::vector<int>> PossibleCpus();

}  // namespace ringfs::frontend
