#include "frontend/dir_attr_cache.h"

#include <algorithm>
#include <tuple>

namespace ringfs::frontend {
namespace {

constexpr uint64_t kNsPerSec = 1'000'000'000;

auto ChangeTime(const fuse_attr& attr) {
  return std::make_tuple(attr.ctime, attr.ctimensec, attr.mtime, attr.mtimensec);
}

}  // namespace

void DirAttrCache::Offer(uint64_t nodeid, const fuse_attr_out& attr, uint64_t now_ns) {
  const uint64_t valid_ns = attr.attr_valid * kNsPerSec + attr.attr_valid_nsec;
  absl::MutexLock lock(&mu_);
  RaiseFloorLocked(nodeid);  // a change: listings sent before it saw the directory before it
  if (valid_ns == 0 || unsettled_ != 0) return;
  InsertLocked(nodeid, attr, now_ns, valid_ns, Kind::kChange);
}

uint64_t DirAttrCache::Ticket() {
  absl::MutexLock lock(&mu_);
  return clock_;
}

bool DirAttrCache::BelowFloorLocked(uint64_t nodeid, uint64_t ticket) const {
  return ticket < global_floor_ || ticket < floors_[StripeOf(nodeid)];
}

void DirAttrCache::OfferListing(uint64_t nodeid, const fuse_attr_out& attr, uint64_t ticket,
                                uint64_t now_ns) {
  const uint64_t valid_ns = attr.attr_valid * kNsPerSec + attr.attr_valid_nsec;
  if (valid_ns == 0) return;
  absl::MutexLock lock(&mu_);
  if (unsettled_ != 0 || BelowFloorLocked(nodeid, ticket)) return;
  InsertLocked(nodeid, attr, now_ns, valid_ns, Kind::kListing);
}

void DirAttrCache::OfferWrite(uint64_t nodeid, const fuse_attr_out& attr, uint64_t ticket,
                              uint32_t reads, uint64_t now_ns) {
  const uint64_t valid_ns = attr.attr_valid * kNsPerSec + attr.attr_valid_nsec;
  if (valid_ns == 0) return;
  absl::MutexLock lock(&mu_);
  if (unsettled_ != 0 || BelowFloorLocked(nodeid, ticket) || ticket < write_floor_) return;
  auto it = entries_.find(nodeid);
  // Equal change times (the kernel's coarse clock) and sizes: an overwrite that filled a hole
  // still grew the block count, which never shrinks by a write.
  auto order = [](const fuse_attr& a) { return std::make_tuple(ChangeTime(a), a.size, a.blocks); };
  if (it != entries_.end() && order(attr.attr) < order(it->second.attr.attr)) {
    return;  // an earlier write of the file, answered after a later one
  }
  InsertLocked(nodeid, attr, now_ns, valid_ns, Kind::kWrite, reads);
}

void DirAttrCache::InsertLocked(uint64_t nodeid, const fuse_attr_out& attr, uint64_t now_ns,
                                uint64_t valid_ns, Kind kind, uint32_t reads) {
  const uint64_t keep_ns =
      now_ns + (kind == Kind::kChange ? valid_ns : std::min(valid_ns, kShortKeepNs));
  auto it = entries_.find(nodeid);
  if (it != entries_.end()) {
    if (ChangeTime(attr.attr) < ChangeTime(it->second.attr.attr)) return;
    write_records_ -= it->second.kind == Kind::kWrite;
    write_records_ += kind == Kind::kWrite;
    it->second = Entry{attr, now_ns + valid_ns, keep_ns, kind, reads};
    return;
  }
  if (entries_.size() >= max_entries_) PruneLocked(now_ns);
  entries_.emplace(nodeid, Entry{attr, now_ns + valid_ns, keep_ns, kind, reads});
  write_records_ += kind == Kind::kWrite;
}

void DirAttrCache::RaiseFloorLocked(uint64_t nodeid) { floors_[StripeOf(nodeid)] = ++clock_; }

std::optional<fuse_attr_out> DirAttrCache::Take(uint64_t nodeid, uint64_t now_ns) {
  absl::MutexLock lock(&mu_);
  // The kernel gets attributes now, from here or from the server: no listing sent before may
  // answer after them.
  RaiseFloorLocked(nodeid);
  auto it = entries_.find(nodeid);
  if (it == entries_.end()) return std::nullopt;
  Entry entry = it->second;
  write_records_ -= entry.kind == Kind::kWrite;
  entries_.erase(it);
  if (now_ns >= entry.expires_ns || now_ns >= entry.keep_ns) return std::nullopt;
  if (entry.kind == Kind::kWrite && entry.reads != Reads(nodeid)) return std::nullopt;
  // The kernel may cache the answer only for what is left of the snapshot's lifetime.
  const uint64_t left_ns = entry.expires_ns - now_ns;
  entry.attr.attr_valid = left_ns / kNsPerSec;
  entry.attr.attr_valid_nsec = static_cast<uint32_t>(left_ns % kNsPerSec);
  return entry.attr;
}

void DirAttrCache::Drop(uint64_t nodeid) {
  absl::MutexLock lock(&mu_);
  if (auto it = entries_.find(nodeid); it != entries_.end()) {
    write_records_ -= it->second.kind == Kind::kWrite;
    entries_.erase(it);
  }
  RaiseFloorLocked(nodeid);
}

void DirAttrCache::NamesChanged() {
  absl::MutexLock lock(&mu_);
  write_floor_ = ++clock_;
  if (write_records_ == 0) return;  // rm -rf: many removals, nothing written
  absl::erase_if(entries_, [](const auto& kv) { return kv.second.kind == Kind::kWrite; });
  write_records_ = 0;
}

void DirAttrCache::Changed(uint64_t nodeid) {
  absl::MutexLock lock(&mu_);
  RaiseFloorLocked(nodeid);
}

void DirAttrCache::Reset() {
  absl::MutexLock lock(&mu_);
  entries_.clear();
  write_records_ = 0;
  global_floor_ = ++clock_;
}

void DirAttrCache::Apply(const RecordsVoided& voided) {
  if (voided.read != 0) Read(voided.read);
  if (voided.dropped != 0) Drop(voided.dropped);
  if (voided.names) NamesChanged();
}

void DirAttrCache::Unsettle() {
  absl::MutexLock lock(&mu_);
  ++unsettled_;
  entries_.clear();
  write_records_ = 0;
  global_floor_ = ++clock_;
}

void DirAttrCache::Settle(uint64_t count) {
  absl::MutexLock lock(&mu_);
  unsettled_ -= std::min(count, unsettled_);
  // Requests sent while it was unsettled may have run before it.
  global_floor_ = ++clock_;
}

size_t DirAttrCache::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

void DirAttrCache::PruneLocked(uint64_t now_ns) {
  absl::erase_if(entries_, [now_ns](const auto& kv) {
    return kv.second.expires_ns <= now_ns || kv.second.keep_ns <= now_ns;
  });
  // Still full of live entries (a burst over many nodes): the short-lived records first (a
  // tar's writes leave one per file that no stat takes), then everything. Forgetting them only
  // costs the GETATTRs they would have saved.
  if (entries_.size() >= max_entries_) {
    absl::erase_if(entries_, [](const auto& kv) { return kv.second.kind != Kind::kChange; });
  }
  if (entries_.size() >= max_entries_) entries_.clear();
  write_records_ = 0;
  for (const auto& kv : entries_) write_records_ += kv.second.kind == Kind::kWrite;
}

}  // namespace ringfs::frontend
