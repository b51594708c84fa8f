#include "frontend/xattr_cache.h"

namespace ringfs::frontend {

int XattrAbsenceCache::IndexOf(std::string_view name) {
  for (size_t i = 0; i < kAbsenceNames.size(); ++i) {
    if (name == kAbsenceNames[i]) return static_cast<int>(i);
  }
  return -1;
}

bool XattrAbsenceCache::KnownAbsent(uint64_t nodeid, std::string_view name,
                                    uint64_t now_ns) const {
  const int index = IndexOf(name);
  if (index < 0) return false;
  absl::MutexLock lock(&mu_);
  auto it = absent_until_.find(nodeid);
  return it != absent_until_.end() && now_ns < it->second[index];
}

uint64_t XattrAbsenceCache::Ticket() const {
  absl::MutexLock lock(&mu_);
  return seq_;
}

void XattrAbsenceCache::RecordAbsent(uint64_t nodeid, int name, uint64_t ticket, uint64_t now_ns) {
  if (name < 0 || name >= static_cast<int>(kAbsenceNames.size())) return;
  absl::MutexLock lock(&mu_);
  if (ticket < floor_) return;
  if (auto it = dropped_at_.find(nodeid); it != dropped_at_.end() && it->second > ticket) return;
  InsertLocked(nodeid, name, now_ns);
}

void XattrAbsenceCache::RecordCreated(uint64_t nodeid, uint64_t ticket, uint64_t now_ns) {
  RecordAbsent(nodeid, IndexOf(kCapabilityXattr), ticket, now_ns);
}

void XattrAbsenceCache::Drop(uint64_t nodeid) {
  absl::MutexLock lock(&mu_);
  absent_until_.erase(nodeid);
  dropped_at_[nodeid] = ++seq_;
  if (dropped_at_.size() > max_nodes_) ForgetDropsLocked();
}

void XattrAbsenceCache::Reset() {
  absl::MutexLock lock(&mu_);
  absent_until_.clear();
  ForgetDropsLocked();
}

// Forgets the drop history; every GETXATTR in flight now is refused a record instead.
void XattrAbsenceCache::ForgetDropsLocked() {
  dropped_at_.clear();
  floor_ = ++seq_;
}

void XattrAbsenceCache::InsertLocked(uint64_t nodeid, int name, uint64_t now_ns) {
  if (absent_until_.size() >= max_nodes_ && !absent_until_.contains(nodeid)) {
    absent_until_.clear();  // crude but bounded
  }
  absent_until_[nodeid][name] = now_ns + lifetime_ns_;  // a new node's others stay 0: unknown
}

size_t XattrAbsenceCache::size() const {
  absl::MutexLock lock(&mu_);
  return absent_until_.size();
}

}  // namespace ringfs::frontend
