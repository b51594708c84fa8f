#include "frontend/kept_entries.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>

namespace ringfs::frontend {
namespace {

constexpr uint64_t kSweepEveryNs = 1'000'000'000;

bool IsDir(const fuse_attr& attr) { return (attr.mode & S_IFMT) == S_IFDIR; }

uint64_t ValidNs(const fuse_entry_out& entry) {
  return entry.entry_valid * 1'000'000'000 + entry.entry_valid_nsec;
}

}  // namespace

uint64_t KeptEntries::Ticket() const {
  absl::MutexLock lock(&mu_);
  return disabled_ ? 0 : seq_;
}

void KeptEntries::Record(uint64_t dir, std::string_view name, const fuse_entry_out& entry,
                         uint64_t ticket, bool quiet, uint64_t now_ns) {
  if (!quiet || ticket == 0 || entry.nodeid == 0 || name.empty()) return;
  const uint64_t valid = ValidNs(entry);
  if (valid == 0 || entry.entry_valid > 86'400) return;
  absl::MutexLock lock(&mu_);
  if (disabled_ || ticket < floor_) return;
  if (auto it = touched_.find(dir); it != touched_.end() && it->second > ticket) return;
  Key key{dir, std::string(name)};
  if (auto it = names_.find(key); it != names_.end() && it->second.node != entry.nodeid) {
    EraseLocked(dir, name);  // the name now leads elsewhere
  }
  if (!names_.contains(key) && names_.size() >= max_entries_) {
    // Full: a sweep is a walk over every name, and one per record would make a mount that has
    // seen more names than the bound pay that walk on every LOOKUP and CREATE. So none before a
    // name can have expired, and none within a second of the last: names recorded at a steady
    // rate also expire one by one, and each walk would then free one (refusing a record is
    // always safe: its LOOKUPs go back to the server).
    if (now_ns < earliest_expiry_ns_ || now_ns < next_full_sweep_ns_) return;
    SweepLocked(now_ns);
    if (names_.size() >= max_entries_) return;
  }
  Name& recorded = names_[key];
  Node& node = nodes_[entry.nodeid];
  if (recorded.node == 0) {
    node.keys.push_back(key);
    by_dir_[dir].insert(key.second);
  }
  recorded.node = entry.nodeid;
  recorded.generation = entry.generation;
  recorded.expires_ns = now_ns + valid;
  earliest_expiry_ns_ = std::min(earliest_expiry_ns_, recorded.expires_ns);
  const uint64_t attr_valid = entry.attr_valid * 1'000'000'000 + entry.attr_valid_nsec;
  auto touched = touched_.find(entry.nodeid);
  node.attr = entry.attr;  // its type never changes; the rest is used only while trusted
  if (attr_valid != 0 && entry.attr_valid <= 86'400 &&
      (touched == touched_.end() || touched->second <= ticket)) {
    node.attr_expires_ns = now_ns + attr_valid;
    if (entry.attr.nlink > 1 && (entry.attr.mode & S_IFMT) != S_IFDIR) {
      linked_.insert(entry.nodeid);
    }
  } else {
    ForgetAttrLocked(entry.nodeid);
  }
}

bool KeptEntries::Keep(uint64_t node, uint64_t nlookup, uint64_t now_ns) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end() || nlookup == 0) return false;
  bool live = false;
  for (const Key& key : it->second.keys) {
    auto name = names_.find(key);
    live = live || (name != names_.end() && name->second.expires_ns > now_ns);
  }
  // Without attributes the kernel would ask the server for a file's next: nothing saved. A
  // directory is kept all the same: it keeps its node id (the names recorded in it stay usable)
  // and its place in this client's table (its pushes, its complete-directory knowledge).
  if (!live || (it->second.attr_expires_ns <= now_ns && !IsDir(it->second.attr))) return false;
  it->second.kept += nlookup;
  kept_ += nlookup;
  const uint64_t next = next_sweep_ns_.load(std::memory_order_relaxed);
  if (next == UINT64_MAX) next_sweep_ns_.store(now_ns + kSweepEveryNs, std::memory_order_relaxed);
  return true;
}

bool KeptEntries::Answer(uint64_t dir, std::string_view name, uint64_t now_ns,
                         fuse_entry_out* out) {
  if (name.empty()) return false;
  absl::MutexLock lock(&mu_);
  auto it = names_.find(Key{dir, std::string(name)});
  if (it == names_.end() || it->second.expires_ns <= now_ns) return false;
  Node& node = nodes_[it->second.node];
  if (node.kept == 0) return false;  // the kernel holds it: its own dentry went stale
  const bool attr_known = node.attr_expires_ns > now_ns;
  if (!attr_known && !IsDir(node.attr)) {
    ReturnKeptLocked(it->second.node, node);  // the server answers, attributes and all
    return false;
  }
  --node.kept;
  --kept_;
  const uint64_t left = it->second.expires_ns - now_ns;
  *out = fuse_entry_out{};
  out->nodeid = it->second.node;
  out->generation = it->second.generation;
  out->entry_valid = left / 1'000'000'000;
  out->entry_valid_nsec = static_cast<uint32_t>(left % 1'000'000'000);
  out->attr = node.attr;
  if (attr_known) {
    // Their whole lifetime: a push that reaches the kernel before it has built the inode from
    // this answer is written again (KernelNotifier).
    const uint64_t attr_left = node.attr_expires_ns - now_ns;
    out->attr_valid = attr_left / 1'000'000'000;
    out->attr_valid_nsec = static_cast<uint32_t>(attr_left % 1'000'000'000);
  }  // else attr_valid 0: the kernel asks the server before it uses them
  return true;
}

void KeptEntries::Changed(uint64_t node) {
  absl::MutexLock lock(&mu_);
  TouchLocked(node);
}

void KeptEntries::DropName(uint64_t dir, std::string_view name) {
  absl::MutexLock lock(&mu_);
  TouchLocked(dir);
  auto it = names_.find(Key{dir, std::string(name)});
  if (it == names_.end()) {
    // Perhaps another link of a file whose attributes are known: its link count changes.
    const std::vector<uint64_t> linked(linked_.begin(), linked_.end());
    for (uint64_t node : linked) TouchLocked(node);
    return;
  }
  TouchLocked(it->second.node);  // unlinked, renamed or replaced: its link count or ctime
  EraseLocked(dir, name);
}

void KeptEntries::DropNode(uint64_t dir) {
  absl::MutexLock lock(&mu_);
  TouchLocked(dir);
  auto it = by_dir_.find(dir);
  if (it == by_dir_.end()) return;
  std::vector<std::string> names(it->second.begin(), it->second.end());
  for (const std::string& name : names) EraseLocked(dir, name);
}

void KeptEntries::Gone(uint64_t node) {
  absl::MutexLock lock(&mu_);
  TouchLocked(node);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  const std::vector<Key> keys = it->second.keys;
  for (const Key& key : keys) {
    TouchLocked(key.first);
    EraseLocked(key.first, key.second);
  }
}

void KeptEntries::NoEntry(uint64_t dir, std::string_view name) {
  absl::MutexLock lock(&mu_);
  EraseLocked(dir, name);
}

void KeptEntries::Reset() {
  absl::MutexLock lock(&mu_);
  ClearLocked();
}

void KeptEntries::Disable() {
  absl::MutexLock lock(&mu_);
  disabled_ = true;
  ClearLocked();
}

std::vector<fuse_forget_one> KeptEntries::TakeReturns(uint64_t now_ns) {
  absl::MutexLock lock(&mu_);
  if (now_ns >= next_sweep_ns_.load(std::memory_order_relaxed)) SweepLocked(now_ns);
  returns_pending_.store(false, std::memory_order_relaxed);
  return std::exchange(returns_, {});
}

size_t KeptEntries::entries() const {
  absl::MutexLock lock(&mu_);
  return names_.size();
}

uint64_t KeptEntries::kept() const {
  absl::MutexLock lock(&mu_);
  return kept_;
}

uint64_t KeptEntries::sweeps() const {
  absl::MutexLock lock(&mu_);
  return sweeps_;
}

void KeptEntries::TouchLocked(uint64_t id) {
  ForgetAttrLocked(id);
  touched_[id] = ++seq_;
  if (touched_.size() > max_entries_) {
    // Forget the history; every request in flight now is refused instead.
    touched_.clear();
    floor_ = ++seq_;
  }
}

void KeptEntries::ForgetAttrLocked(uint64_t node) {
  if (auto it = nodes_.find(node); it != nodes_.end()) {
    it->second.attr_expires_ns = 0;
    if (!IsDir(it->second.attr)) ReturnKeptLocked(node, it->second);
  }
  linked_.erase(node);
}

void KeptEntries::ReturnKeptLocked(uint64_t id, Node& node) {
  if (node.kept == 0) return;
  returns_.push_back(fuse_forget_one{id, node.kept});
  kept_ -= node.kept;
  node.kept = 0;
  returns_pending_.store(true, std::memory_order_relaxed);
}

void KeptEntries::EraseLocked(uint64_t dir, std::string_view name) {
  Key key{dir, std::string(name)};
  auto it = names_.find(key);
  if (it == names_.end()) return;
  const uint64_t node_id = it->second.node;
  names_.erase(it);
  if (auto d = by_dir_.find(dir); d != by_dir_.end()) {
    d->second.erase(key.second);
    if (d->second.empty()) by_dir_.erase(d);
  }
  auto n = nodes_.find(node_id);
  if (n == nodes_.end()) return;
  auto& keys = n->second.keys;
  keys.erase(std::remove(keys.begin(), keys.end(), key), keys.end());
  if (!keys.empty()) return;
  ReturnKeptLocked(node_id, n->second);
  linked_.erase(node_id);
  nodes_.erase(n);
}

void KeptEntries::ClearLocked() {
  for (const auto& [id, node] : nodes_) {
    if (node.kept != 0) returns_.push_back(fuse_forget_one{id, node.kept});
  }
  if (!returns_.empty()) returns_pending_.store(true, std::memory_order_relaxed);
  names_.clear();
  nodes_.clear();
  by_dir_.clear();
  touched_.clear();
  linked_.clear();
  kept_ = 0;
  earliest_expiry_ns_ = UINT64_MAX;
  floor_ = ++seq_;
}

void KeptEntries::SweepLocked(uint64_t now_ns) {
  ++sweeps_;
  std::vector<Key> expired;
  uint64_t earliest = UINT64_MAX;
  for (const auto& [key, name] : names_) {
    if (name.expires_ns <= now_ns) {
      expired.push_back(key);
    } else {
      earliest = std::min(earliest, name.expires_ns);
    }
  }
  for (const Key& key : expired) EraseLocked(key.first, key.second);
  earliest_expiry_ns_ = earliest;
  next_full_sweep_ns_ = now_ns + kSweepEveryNs;
  // Kept lookups wait for their names' expiry at most a second longer.
  next_sweep_ns_.store(kept_ != 0 ? now_ns + kSweepEveryNs : UINT64_MAX,
                       std::memory_order_relaxed);
}

}  // namespace ringfs::frontend
