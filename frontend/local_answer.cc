#include "frontend/local_answer.h"

#include <linux/fuse.h>

#include <cerrno>
#include <cstring>
#include <string_view>

namespace ringfs::frontend {

namespace {

// The NUL-terminated name at the start of `payload`.
std::string_view FirstName(std::span<const char> payload) {
  return {payload.data(), strnlen(payload.data(), payload.size())};
}

}  // namespace

bool ReplayableListing(const fuse_read_in& in, const LocalDirHandles* local_dirs,
                       bool lists_by_node) {
  return in.offset == 0 && local_dirs != nullptr && lists_by_node && local_dirs->IsLocal(in.fh);
}

std::optional<LocalAnswer> AnswerLocally(uint32_t opcode, uint64_t nodeid, const void* op_in,
                                         size_t op_in_size, std::span<const char> payload,
                                         const LocalCaches& caches, void* body, uint64_t now_ns) {
  DirAttrCache* cache = caches.dir_attrs;
  switch (opcode) {
    case FUSE_GETXATTR: {
      if (caches.xattrs == nullptr || payload.empty()) return std::nullopt;
      if (caches.xattrs->KnownAbsent(nodeid, FirstName(payload), now_ns)) {
        return LocalAnswer{ENODATA, 0};
      }
      return std::nullopt;
    }
    case FUSE_LOOKUP: {
      if (payload.empty()) return std::nullopt;
      // Decided before `body` is written: it may overlap the name.
      fuse_entry_out kept{};
      if (caches.kept != nullptr && caches.kept->Answer(nodeid, FirstName(payload), now_ns, &kept)) {
        std::memcpy(body, &kept, sizeof(kept));
        return LocalAnswer{0, sizeof(kept)};
      }
      if (caches.dirs == nullptr) return std::nullopt;
      const uint64_t valid = caches.dirs->KnownAbsent(nodeid, FirstName(payload), now_ns);
      if (valid == 0) return std::nullopt;
      fuse_entry_out out{};  // node id 0: the kernel keeps a negative dentry for entry_valid
      out.entry_valid = valid / 1'000'000'000;
      out.entry_valid_nsec = static_cast<uint32_t>(valid % 1'000'000'000);
      std::memcpy(body, &out, sizeof(out));
      return LocalAnswer{0, sizeof(out)};
    }
    case FUSE_FLUSH:
      return LocalAnswer{ENOSYS, 0};
    case FUSE_READDIR:
    case FUSE_READDIRPLUS: {
      if (caches.dir_ends == nullptr || op_in_size < sizeof(fuse_read_in)) return std::nullopt;
      fuse_read_in in;
      std::memcpy(&in, op_in, sizeof(in));
      if (caches.dir_ends->AtEnd(in.fh, in.offset)) return LocalAnswer{0, 0};
      if (opcode != FUSE_READDIRPLUS || caches.dirs == nullptr || caches.unlinks_outstanding ||
          !ReplayableListing(in, caches.local_dirs, caches.open_dirs_locally)) {
        return std::nullopt;
      }
      char* out = static_cast<char*>(body);
      const std::optional<size_t> size =
          caches.dirs->ReplayListing(nodeid, in.size, caches.caller, now_ns, out);
      if (!size) return std::nullopt;
      caches.dir_ends->Answered(in.fh, in.offset, in.size, /*plus=*/true, {out, *size});
      return LocalAnswer{0, *size};
    }
    case FUSE_OPENDIR: {
      if (caches.local_dirs == nullptr || !caches.open_dirs_locally) return std::nullopt;
      // Nothing to open: each READDIR lists the node at the server (LocalDirHandles). The
      // kernel keeps the listing in its page cache, and keeps what it holds across this open
      // only when it is current (KeptListings); otherwise it asks each time.
      fuse_open_out out{};
      out.fh = caches.local_dirs->Open();
      if (caches.dirs != nullptr && caches.dirs->ListingsKept()) {
        out.open_flags = FOPEN_CACHE_DIR;
        if (caches.dirs->KeepListingAtOpen(nodeid, now_ns)) out.open_flags |= FOPEN_KEEP_CACHE;
      }
      std::memcpy(body, &out, sizeof(out));
      return LocalAnswer{0, sizeof(out)};
    }
    case FUSE_RELEASEDIR: {
      if (op_in_size < sizeof(fuse_release_in)) return std::nullopt;
      fuse_release_in in;
      std::memcpy(&in, op_in, sizeof(in));
      if (caches.dir_ends != nullptr) caches.dir_ends->Released(in.fh);
      // Ours whether or not the server still lists by node: it never knew the handle.
      if (caches.local_dirs != nullptr && caches.local_dirs->Release(in.fh)) return LocalAnswer{};
      return std::nullopt;
    }
    case FUSE_GETATTR: {
      if (cache == nullptr) return std::nullopt;
      // Plain or through a file's handle (fstat): a record is the node's, whichever asks.
      std::optional<fuse_attr_out> attr = cache->Take(nodeid, now_ns);
      if (!attr) return std::nullopt;
      std::memcpy(body, &*attr, sizeof(*attr));
      return LocalAnswer{0, sizeof(*attr)};
    }
    case FUSE_SETATTR:
    case FUSE_SETXATTR:
    case FUSE_REMOVEXATTR:
      if (cache != nullptr) cache->Drop(nodeid);
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

}  // namespace ringfs::frontend
