#include "frontend/kept_pages.h"

namespace ringfs::frontend {
namespace {

int64_t Ns(uint64_t sec, uint32_t nsec) { return static_cast<int64_t>(sec) * 1'000'000'000 + nsec; }

// A READ that ended at `ended_ns` (0: none yet) may still be landing at `now_ns`: its answer
// fills the kernel's pages as its request ends, and a second is a wide margin. `now_ns` may be
// older than `ended_ns` (read before another thread recorded the end).
bool Landing(uint64_t ended_ns, uint64_t now_ns) {
  return ended_ns != 0 && now_ns < ended_ns + 1'000'000'000;
}

}  // namespace

KeptPages::Node* KeptPages::FindOrAddLocked(uint64_t nodeid, uint64_t now_ns) {
  if (auto it = nodes_.find(nodeid); it != nodes_.end()) return &it->second;
  if (nodes_.size() >= max_nodes_) {
    // A forgotten file's next open drops its pages; one whose READ may still land must stay,
    // or a drop would not know it.
    const size_t before = nodes_.size();
    absl::erase_if(nodes_, [now_ns](const auto& kv) {
      return kv.second.in_flight == 0 && !Landing(kv.second.ended_ns, now_ns);
    });
    forgot_ = forgot_ || nodes_.size() < before;
    if (nodes_.size() >= max_nodes_) return nullptr;
  }
  Node& added = nodes_[nodeid];
  added.may_hold = forgot_;
  return &added;
}

KeptPages::AtOpenAnswer KeptPages::AtOpen(uint64_t nodeid, const fuse_attr* record,
                                          uint64_t now_ns) {
  absl::MutexLock lock(&mu_);
  Node* n = FindOrAddLocked(nodeid, now_ns);
  // Nothing recorded: no open keeps the pages before one that finds the node recorded drops
  // them, unconfirmed (forgot_).
  if (n == nullptr) return AtOpenAnswer::kDrop;
  if (record != nullptr && n->baseline && !n->poisoned && n->confirmed_gen >= n->drop_gen &&
      n->ctime_ns == Ns(record->ctime, record->ctimensec) &&
      n->mtime_ns == Ns(record->mtime, record->mtimensec) && n->size == record->size) {
    kept_.fetch_add(1, std::memory_order_relaxed);
    return AtOpenAnswer::kKeep;
  }
  // The kernel drops the file's pages at this open; what READs fill them with from now on was
  // read as the record shows the file, unless one sent before lands after the drop.
  n->poisoned = n->in_flight != 0 || Landing(n->ended_ns, now_ns);
  n->baseline = record != nullptr;
  if (record != nullptr) {
    n->ctime_ns = Ns(record->ctime, record->ctimensec);
    n->mtime_ns = Ns(record->mtime, record->mtimensec);
    n->size = record->size;
  }
  // A drop that sets no trusted baseline (no record, or poisoned) needs no confirmation: no
  // open keeps the pages before a later drop, which asks for its own. Nor does one of a file
  // whose pages the kernel cannot hold.
  if (!n->may_hold || !n->baseline || n->poisoned) return AtOpenAnswer::kDrop;
  n->drop_gen = ++next_gen_;
  return AtOpenAnswer::kDropUnconfirmed;
}

void KeptPages::IoSent(uint64_t nodeid, bool write) {
  absl::MutexLock lock(&mu_);
  // Added even past the bound: one in flight must be known to the next drop.
  Node& n = nodes_[nodeid];
  ++n.in_flight;
  n.may_hold = true;
  if (write) n.poisoned = true;
}

void KeptPages::IoEnded(uint64_t nodeid, uint64_t now_ns) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(nodeid);
  if (it == nodes_.end()) return;
  if (it->second.in_flight != 0) --it->second.in_flight;
  it->second.ended_ns = now_ns;
}

std::optional<uint64_t> KeptPages::DropStarting(uint64_t nodeid) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(nodeid);
  if (it == nodes_.end()) return 0;
  if (it->second.in_flight != 0) return std::nullopt;
  return it->second.drop_gen;
}

void KeptPages::DropWritten(uint64_t nodeid, uint64_t token) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(nodeid);
  if (it != nodes_.end() && it->second.confirmed_gen < token) it->second.confirmed_gen = token;
}

void KeptPages::Reset() {
  absl::MutexLock lock(&mu_);
  // READs in flight keep their count: a drop after this one must still know of them.
  for (auto& [id, n] : nodes_) n.baseline = false;
}

size_t KeptPages::nodes() const {
  absl::MutexLock lock(&mu_);
  return nodes_.size();
}

}  // namespace ringfs::frontend
