#include "frontend/dir_ends.h"

#include <linux/fuse.h>

#include <cstring>
#include <optional>

namespace ringfs::frontend {
namespace {

// The longest record an answer can hold.
constexpr size_t kLongestDirent = FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + kListingNameMax);
constexpr size_t kLongestDirentPlus =
    FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET_DIRENTPLUS + kListingNameMax);

// The cookie of the last record of `reply`, or nullopt when a record is cut short or empty.
std::optional<uint64_t> LastCookie(bool plus, std::span<const char> reply) {
  const size_t head = plus ? sizeof(fuse_entry_out) : 0;
  std::optional<uint64_t> last;
  size_t pos = 0;
  while (pos < reply.size()) {
    if (reply.size() - pos < head + FUSE_NAME_OFFSET) return std::nullopt;
    fuse_dirent d;
    std::memcpy(&d, reply.data() + pos + head, FUSE_NAME_OFFSET);
    if (d.namelen == 0 || d.namelen > kListingNameMax) return std::nullopt;
    const size_t len = FUSE_DIRENT_ALIGN(head + FUSE_NAME_OFFSET + d.namelen);
    if (len > reply.size() - pos) return std::nullopt;
    last = d.off;
    pos += len;
  }
  return last;
}

// Where a listing ends by an answer of `reply` to a READDIR at `offset` for `size` bytes, when
// the answer says (nullopt when it does not).
std::optional<uint64_t> EndOf(uint64_t offset, uint32_t size, bool plus,
                              std::span<const char> reply) {
  // Room left for the longest entry: the server stopped at the end, not for room (an empty
  // answer to a tiny size would be the latter; the kernel always asks for a page).
  const size_t longest = plus ? kLongestDirentPlus : kLongestDirent;
  if (reply.size() > size || size - reply.size() < longest) return std::nullopt;
  return reply.empty() ? std::optional<uint64_t>(offset) : LastCookie(plus, reply);
}

}  // namespace

bool DirEnds::AtEnd(uint64_t fh, uint64_t offset) const {
  absl::MutexLock lock(&mu_);
  auto it = handles_.find(fh);
  return it != handles_.end() && it->second.known_end && it->second.end == offset;
}

DirEnds::Handle* DirEnds::FindOrAddLocked(uint64_t fh) {
  auto it = handles_.find(fh);
  if (it != handles_.end()) return &it->second;
  if (handles_.size() >= max_handles_) return nullptr;  // beyond the bound: nothing is learned
  return &handles_.emplace(fh, Handle{}).first->second;
}

void DirEnds::Asking(uint64_t fh, uint64_t unique, uint64_t offset, uint32_t size, bool plus) {
  absl::MutexLock lock(&mu_);
  Handle* h = FindOrAddLocked(fh);
  if (h == nullptr) return;
  h->unique = unique;
  h->offset = offset;
  h->size = size;
  h->plus = plus;
}

void DirEnds::Learn(uint64_t fh, uint64_t unique, int error, std::span<const char> reply) {
  absl::MutexLock lock(&mu_);
  auto it = handles_.find(fh);
  if (it == handles_.end()) return;
  Handle& h = it->second;
  std::optional<uint64_t> end;
  if (error == 0 && h.unique == unique && unique != 0) end = EndOf(h.offset, h.size, h.plus, reply);
  if (h.unique == unique) h.unique = 0;
  // Not (known to be) the end: a READDIR at offset 0 may also have taken a new snapshot.
  h.known_end = end.has_value();
  h.end = end.value_or(0);
}

void DirEnds::Answered(uint64_t fh, uint64_t offset, uint32_t size, bool plus,
                       std::span<const char> reply) {
  const std::optional<uint64_t> end = EndOf(offset, size, plus, reply);
  absl::MutexLock lock(&mu_);
  Handle* h = FindOrAddLocked(fh);
  if (h == nullptr) return;
  h->known_end = end.has_value();
  h->end = end.value_or(0);
  h->unique = 0;  // a killed caller's READDIR still out teaches nothing now
}

void DirEnds::Released(uint64_t fh) {
  absl::MutexLock lock(&mu_);
  handles_.erase(fh);
}

size_t DirEnds::size() const {
  absl::MutexLock lock(&mu_);
  return handles_.size();
}

}  // namespace ringfs::frontend
