#include "frontend/complete_dirs.h"

#include <limits.h>

#include <algorithm>

#include "absl/strings/string_view.h"

namespace ringfs::frontend {
namespace {

constexpr uint64_t kPruneGapNs = 1'000'000'000;

}  // namespace

uint64_t CompleteDirs::KnownAbsent(uint64_t dir, std::string_view name, uint64_t now_ns) const {
  if (name.empty() || name.size() > NAME_MAX) return 0;
  absl::MutexLock lock(&mu_);
  auto it = dirs_.find(dir);
  if (it == dirs_.end() || now_ns >= it->second.expires_ns) return 0;
  if (it->second.names.contains(absl::string_view(name.data(), name.size()))) return 0;
  return it->second.expires_ns - now_ns;
}

uint64_t CompleteDirs::Ticket() const {
  absl::MutexLock lock(&mu_);
  return disabled_ || lifetime_ns_ == 0 ? 0 : seq_;
}

uint64_t CompleteDirs::LookupTicket() const {
  absl::MutexLock lock(&mu_);
  return disabled_ || lifetime_ns_ == 0 || unsettled_ != 0 ? 0 : seq_;
}

void CompleteDirs::RecordCreated(uint64_t dir, uint64_t ticket, uint64_t now_ns) {
  absl::MutexLock lock(&mu_);
  RecordLocked(dir, ticket, now_ns);
}

void CompleteDirs::RecordFoundEmpty(uint64_t dir, uint64_t ticket, uint64_t now_ns) {
  absl::MutexLock lock(&mu_);
  if (unsettled_ != 0 || last_change_ > ticket) return;
  RecordLocked(dir, ticket, now_ns);
}

void CompleteDirs::BeginChange() {
  absl::MutexLock lock(&mu_);
  ++unsettled_;
  ++begun_;
  last_change_ = ++seq_;
}

uint64_t CompleteDirs::ChangeTicket() const {
  absl::MutexLock lock(&mu_);
  return unsettled_ != 0 ? 0 : begun_ + 1;
}

bool CompleteDirs::Quiet(uint64_t ticket, bool self) const {
  absl::MutexLock lock(&mu_);
  return ticket != 0 && unsettled_ == 0 && begun_ == ticket - 1 + (self ? 1 : 0);
}

void CompleteDirs::EndChange(uint64_t count) {
  absl::MutexLock lock(&mu_);
  unsettled_ -= std::min(unsettled_, count);
}

void CompleteDirs::RecordLocked(uint64_t dir, uint64_t ticket, uint64_t now_ns) {
  if (disabled_ || ticket == 0 || ticket < floor_) return;
  if (auto it = touched_.find(dir); it != touched_.end() && it->second > ticket) return;
  if (dirs_.size() >= max_dirs_ && !dirs_.contains(dir)) {
    // Full: pruning walks every directory, so not before one of them can have expired, nor
    // within a second of the last (once per record, a mount that has made more directories than
    // the bound would pay it on every MKDIR and listing; recorded at a steady rate, they also
    // expire one by one). Refusing a record is always safe.
    if (now_ns < earliest_expiry_ns_ || now_ns < next_prune_ns_) return;
    ++prunes_;
    next_prune_ns_ = now_ns + kPruneGapNs;
    uint64_t earliest = UINT64_MAX;
    for (auto it = dirs_.begin(); it != dirs_.end();) {
      auto next = std::next(it);
      if (it->second.expires_ns <= now_ns) {
        EraseLocked(it);
      } else {
        earliest = std::min(earliest, it->second.expires_ns);
      }
      it = next;
    }
    earliest_expiry_ns_ = earliest;
    if (dirs_.size() >= max_dirs_) return;
  }
  // Names recorded while it was known complete stay: a request sent then may not have run yet.
  dirs_[dir].expires_ns = now_ns + lifetime_ns_;
  earliest_expiry_ns_ = std::min(earliest_expiry_ns_, now_ns + lifetime_ns_);
}

uint64_t CompleteDirs::ListingSent(uint64_t dir, uint64_t now_ns, uint64_t caller) {
  bool unsettled;
  {
    absl::MutexLock lock(&mu_);
    unsettled = unsettled_ != 0;
  }
  return listings_.ListingSent(dir, unsettled, now_ns, caller);
}

void CompleteDirs::AddName(uint64_t dir, std::string_view name) {
  listings_.Changed(dir);
  absl::MutexLock lock(&mu_);
  auto it = dirs_.find(dir);
  if (it == dirs_.end()) {
    TouchLocked(dir);  // a MKDIR of `dir` may be in flight
    return;
  }
  if (names_ >= max_names_) {
    EraseLocked(it);
    return;
  }
  if (it->second.names.contains(absl::string_view(name.data(), name.size()))) return;
  it->second.names.insert(std::string(name));
  ++names_;
}

void CompleteDirs::Drop(uint64_t dir) {
  listings_.Changed(dir);
  absl::MutexLock lock(&mu_);
  TouchLocked(dir);
  if (auto it = dirs_.find(dir); it != dirs_.end()) EraseLocked(it);
}

void CompleteDirs::Reset() {
  listings_.Reset();
  absl::MutexLock lock(&mu_);
  ResetLocked();
}

void CompleteDirs::Disable() {
  listings_.Disable();
  absl::MutexLock lock(&mu_);
  disabled_ = true;
  ResetLocked();
}

uint64_t CompleteDirs::prunes() const {
  absl::MutexLock lock(&mu_);
  return prunes_;
}

size_t CompleteDirs::dirs() const {
  absl::MutexLock lock(&mu_);
  return dirs_.size();
}

size_t CompleteDirs::names() const {
  absl::MutexLock lock(&mu_);
  return names_;
}

uint64_t CompleteDirs::unsettled() const {
  absl::MutexLock lock(&mu_);
  return unsettled_;
}

void CompleteDirs::TouchLocked(uint64_t dir) {
  touched_[dir] = ++seq_;
  if (touched_.size() > max_dirs_) {
    // Forget the history; every MKDIR in flight now is refused instead.
    touched_.clear();
    floor_ = ++seq_;
  }
}

void CompleteDirs::EraseLocked(absl::flat_hash_map<uint64_t, Dir>::iterator it) {
  // Its recorded names go with it: a ticket taken before must not make it complete again.
  TouchLocked(it->first);
  names_ -= it->second.names.size();
  dirs_.erase(it);
}

void CompleteDirs::ResetLocked() {
  dirs_.clear();
  touched_.clear();
  names_ = 0;
  earliest_expiry_ns_ = UINT64_MAX;
  floor_ = ++seq_;
}

}  // namespace ringfs::frontend
