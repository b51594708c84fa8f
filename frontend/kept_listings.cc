#include "frontend/kept_listings.h"

#include "absl/container/flat_hash_map.h"

namespace ringfs::frontend {

KeptListings::Dir* KeptListings::FindLocked(uint64_t dir, bool create) {
  if (auto it = dirs_.find(dir); it != dirs_.end()) return &it->second;
  if (!create) return nullptr;
  if (dirs_.size() >= max_dirs_) {
    // Those with nothing in flight go: each is then dropped by the kernel at its next open.
    absl::erase_if(dirs_, [](const auto& kv) { return kv.second.in_flight == 0; });
  }
  return &dirs_[dir];
}

bool KeptListings::KeepAtOpen(uint64_t dir, uint64_t now_ns) {
  absl::MutexLock lock(&mu_);
  if (disabled_) return false;
  Dir& d = *FindLocked(dir, /*create=*/true);
  const bool keep = d.filled && !d.poisoned && d.fill_from >= floor_ && d.fill_from > d.changed &&
                    now_ns - d.fill_ns < lifetime_ns_;
  if (!keep) {
    // The kernel drops its copy at this open; a READDIR still in flight may put back what it
    // read before the change.
    d.filled = false;
    d.poisoned = d.in_flight != 0 || (d.ended_ns != 0 && now_ns - d.ended_ns < kLandingNs);
  }
  return keep;
}

void KeptListings::ListingSent(uint64_t dir, bool changes_unsettled, uint64_t now_ns) {
  absl::MutexLock lock(&mu_);
  if (disabled_) return;
  Dir& d = *FindLocked(dir, /*create=*/true);
  ++d.in_flight;
  if (!d.filled) {
    d.filled = true;
    d.fill_from = ++seq_;
    d.fill_ns = now_ns;
  }
  if (changes_unsettled) d.poisoned = true;
}

void KeptListings::ListingEnded(uint64_t dir, uint64_t now_ns) {
  absl::MutexLock lock(&mu_);
  Dir* d = FindLocked(dir, /*create=*/false);
  if (d == nullptr) return;
  if (d->in_flight != 0) --d->in_flight;
  d->ended_ns = now_ns;
}

void KeptListings::Changed(uint64_t dir) {
  absl::MutexLock lock(&mu_);
  // Without an entry nothing was filled since it was last dropped (or pruned): nothing to void.
  if (Dir* d = FindLocked(dir, /*create=*/false); d != nullptr) d->changed = ++seq_;
}

void KeptListings::Reset() {
  absl::MutexLock lock(&mu_);
  floor_ = ++seq_;
}

void KeptListings::Disable() {
  absl::MutexLock lock(&mu_);
  disabled_ = true;
  dirs_.clear();
}

bool KeptListings::enabled() const {
  absl::MutexLock lock(&mu_);
  return !disabled_ && lifetime_ns_ != 0;
}

size_t KeptListings::dirs() const {
  absl::MutexLock lock(&mu_);
  return dirs_.size();
}

}  // namespace ringfs::frontend
