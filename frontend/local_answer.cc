#include "frontend/local_answer.h"

#include <linux/fuse.h>

#include <cerrno>
#include <cstring>

namespace ringfs::frontend {

std::optional<LocalAnswer> AnswerLocally(uint32_t opcode, uint64_t nodeid, const void* op_in,
                                         size_t op_in_size, DirAttrCache* cache, void* body,
                                         uint64_t now_ns, std::span<const char> payload,
                                         const XattrAbsenceCache* xattrs) {
  switch (opcode) {
    case FUSE_GETXATTR: {
      if (xattrs == nullptr || payload.empty()) return std::nullopt;
      // The name is NUL-terminated inside the payload.
      std::string_view name(payload.data(), strnlen(payload.data(), payload.size()));
      if (xattrs->KnownAbsent(nodeid, name, now_ns)) return LocalAnswer{ENODATA, 0};
      return std::nullopt;
    }
    case FUSE_FLUSH:
      return LocalAnswer{ENOSYS, 0};
    case FUSE_GETATTR: {
      if (cache == nullptr) return std::nullopt;
      fuse_getattr_in in{};
      if (op_in_size >= sizeof(in)) std::memcpy(&in, op_in, sizeof(in));
      // fstat() of an open file asks about that handle; only the plain form is for a directory.
      if (in.getattr_flags & FUSE_GETATTR_FH) return std::nullopt;
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
