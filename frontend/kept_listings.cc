#include "frontend/kept_listings.h"

#include <linux/fuse.h>

#include <algorithm>
#include <cstring>

#include "absl/container/flat_hash_map.h"

namespace ringfs::frontend {
namespace {

// `reply` (READDIRPLUS records) with every record's entry zeroed: node id 0 tells the kernel to
// take the name alone (fs/fuse/readdir.c, fuse_direntplus_link). Empty when a record is cut
// short: such an answer is not kept.
std::string WithoutNodes(std::span<const char> reply) {
  std::string page(reply.data(), reply.size());
  size_t pos = 0;
  while (pos < page.size()) {
    if (page.size() - pos < FUSE_NAME_OFFSET_DIRENTPLUS) return {};
    fuse_dirent d;
    std::memcpy(&d, page.data() + pos + sizeof(fuse_entry_out), FUSE_NAME_OFFSET);
    const size_t len = FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET_DIRENTPLUS + d.namelen);
    if (d.namelen == 0 || len > page.size() - pos) return {};
    std::memset(page.data() + pos, 0, sizeof(fuse_entry_out));
    pos += len;
  }
  return page;
}

}  // namespace

KeptListings::Dir* KeptListings::FindLocked(uint64_t dir, bool create) {
  if (auto it = dirs_.find(dir); it != dirs_.end()) return &it->second;
  if (!create) return nullptr;
  if (dirs_.size() >= max_dirs_) {
    // Those with nothing in flight go: each is then dropped by the kernel at its next open.
    absl::erase_if(dirs_, [this](auto& kv) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      if (kv.second.in_flight != 0) return false;
      DropPageLocked(kv.second);
      return true;
    });
  }
  return &dirs_[dir];
}

bool KeptListings::CurrentLocked(const Dir& d, uint64_t from, uint64_t from_ns,
                                 uint64_t now_ns) const {
  return from >= floor_ && from > d.changed && now_ns - from_ns < lifetime_ns_;
}

void KeptListings::DropPageLocked(Dir& d) {
  if (d.page.empty()) return;
  page_bytes_ -= d.page.size();
  --pages_;
  std::string().swap(d.page);
}

bool KeptListings::KeepAtOpen(uint64_t dir, uint64_t now_ns) {
  absl::MutexLock lock(&mu_);
  if (disabled_) return false;
  Dir& d = *FindLocked(dir, /*create=*/true);
  const bool keep = d.filled && !d.poisoned && CurrentLocked(d, d.fill_from, d.fill_ns, now_ns);
  if (!keep) {
    // The kernel drops its copy at this open; a READDIR still in flight may put back what it
    // read before the change.
    d.filled = false;
    d.poisoned = d.in_flight != 0 || (d.ended_ns != 0 && now_ns - d.ended_ns < kLandingNs);
  }
  return keep;
}

uint64_t KeptListings::ListingSent(uint64_t dir, bool changes_unsettled, uint64_t now_ns,
                                   uint64_t caller) {
  absl::MutexLock lock(&mu_);
  if (disabled_) return 0;
  Dir& d = *FindLocked(dir, /*create=*/true);
  ++d.in_flight;
  const uint64_t ticket = ++seq_;
  if (!d.filled) {
    d.filled = true;
    d.fill_from = ticket;
    d.fill_ns = now_ns;
  }
  if (changes_unsettled) d.poisoned = true;
  d.last_ticket = ticket;
  d.last_caller = caller;
  return changes_unsettled ? 0 : ticket;
}

void KeptListings::Answered(uint64_t dir, uint64_t ticket, uint64_t sent_ns, uint32_t size,
                            std::span<const char> reply) {
  if (ticket == 0 || reply.empty() || reply.size() > kMaxPage || size > kMaxPage) return;
  std::string page = WithoutNodes(reply);  // outside the lock
  if (page.empty()) return;
  absl::MutexLock lock(&mu_);
  if (disabled_ || lifetime_ns_ == 0) return;
  Dir* d = FindLocked(dir, /*create=*/false);
  // Its age is checked at Replay; here only whether a change was heard of since it was sent.
  if (d == nullptr || ticket < floor_ || ticket <= d->changed || ticket != d->last_ticket) return;
  DropPageLocked(*d);
  if (page_bytes_ + page.size() > max_page_bytes_) {
    // Kept answers serve a directory opened again soon (rm -rf: at once): all go.
    for (auto& [id, other] : dirs_) DropPageLocked(other);
    if (page.size() > max_page_bytes_) return;
  }
  ++pages_;
  page_bytes_ += page.size();
  d->page = std::move(page);
  d->page_ticket = ticket;
  d->page_size = size;
  d->page_ns = sent_ns;
  d->page_caller = d->last_caller;
}

std::optional<size_t> KeptListings::Replay(uint64_t dir, uint32_t size, uint64_t caller,
                                           uint64_t now_ns, char* out) {
  absl::MutexLock lock(&mu_);
  if (disabled_) return std::nullopt;
  Dir* d = FindLocked(dir, /*create=*/false);
  if (d == nullptr || d->page.empty() || size != d->page_size || caller != d->page_caller ||
      !CurrentLocked(*d, d->page_ticket, d->page_ns, now_ns)) {
    return std::nullopt;
  }
  std::memcpy(out, d->page.data(), d->page.size());
  // What the kernel may put in its copy was read when the kept answer's READDIR was sent.
  if (!d->filled) {
    d->filled = true;
    d->fill_from = d->page_ticket;
    d->fill_ns = d->page_ns;
  } else {
    d->fill_from = std::min(d->fill_from, d->page_ticket);
    d->fill_ns = std::min(d->fill_ns, d->page_ns);
  }
  d->ended_ns = now_ns;
  return d->page.size();
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
  if (Dir* d = FindLocked(dir, /*create=*/false); d != nullptr) {
    d->changed = ++seq_;
    DropPageLocked(*d);
  }
}

void KeptListings::Reset() {
  absl::MutexLock lock(&mu_);
  floor_ = ++seq_;
  for (auto& [id, d] : dirs_) DropPageLocked(d);
}

void KeptListings::Disable() {
  absl::MutexLock lock(&mu_);
  disabled_ = true;
  dirs_.clear();
  pages_ = 0;
  page_bytes_ = 0;
}

bool KeptListings::enabled() const {
  absl::MutexLock lock(&mu_);
  return !disabled_ && lifetime_ns_ != 0;
}

size_t KeptListings::pages() const {
  absl::MutexLock lock(&mu_);
  return pages_;
}

size_t KeptListings::page_bytes() const {
  absl::MutexLock lock(&mu_);
  return page_bytes_;
}

size_t KeptListings::dirs() const {
  absl::MutexLock lock(&mu_);
  return dirs_.size();
}

}  // namespace ringfs::frontend
