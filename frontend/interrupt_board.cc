#include "frontend/interrupt_board.h"

#include <algorithm>

namespace ringfs::frontend {

void InterruptBoard::Post(uint64_t unique, uint64_t now_ns) {
  absl::MutexLock lock(&mu_);
  ExpireLocked(now_ns);
  posted_.push_back({unique, now_ns});
  count_.store(posted_.size(), std::memory_order_release);
}

bool InterruptBoard::Take(uint64_t unique) {
  if (empty()) return false;
  absl::MutexLock lock(&mu_);
  auto it = std::find_if(posted_.begin(), posted_.end(),
                         [unique](const Posted& p) { return p.unique == unique; });
  if (it == posted_.end()) return false;
  posted_.erase(it);
  count_.store(posted_.size(), std::memory_order_release);
  return true;
}

std::vector<uint64_t> InterruptBoard::Pending(uint64_t now_ns) {
  std::vector<uint64_t> out;
  if (empty()) return out;
  absl::MutexLock lock(&mu_);
  ExpireLocked(now_ns);
  for (const Posted& p : posted_) out.push_back(p.unique);
  return out;
}

void InterruptBoard::ExpireLocked(uint64_t now_ns) {
  const uint64_t keep_ns = std::chrono::nanoseconds(kKeep).count();
  // Not `now_ns - p.at_ns`: for an entry stamped after now_ns that wraps around and erased a
  // fresh INTERRUPT, leaving its caller blocked (it_faults HardMountTest burst, classic).
  std::erase_if(posted_, [&](const Posted& p) { return p.at_ns + keep_ns < now_ns; });
  count_.store(posted_.size(), std::memory_order_release);
}

}  // namespace ringfs::frontend
