// Static facts about FUSE opcodes that both processes need: names, the size of the fixed argument
// struct that follows fuse_in_header, and the shape of a successful reply.
// Pure functions over constant tables; callable from any thread.
#pragma once

#include <cstddef>
#include <linux/fuse.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace ringfs::fuse {

enum class ReplyShape : uint8_t {
  kNone,      // no reply at all (FORGET, BATCH_FORGET, INTERRUPT)
  kEmpty,     // success carries no body
  kFixed,     // success carries exactly `reply_size` bytes
  kVariable,  // success carries 0..limit bytes; the limit comes from the request
};

struct OpInfo {
  std::string_view name;
  // Bytes of the opcode's argument struct right after fuse_in_header (in_args[0]); in the ring
  // layout these bytes sit in op_in, everything after them in the payload.
  uint32_t in_struct_size = 0;
  ReplyShape reply = ReplyShape::kEmpty;
  uint32_t reply_size = 0;
  // Forwarded to the server; false for opcodes the frontend answers itself or refuses.
  bool forwarded = false;
};

// Returns nullopt for opcodes ringfs does not know at all.
std::optional<OpInfo> LookupOp(uint32_t opcode);

// Name for logs; "OP_UNKNOWN" for opcodes missing from the table.
std::string_view OpName(uint32_t opcode);

// Inclusive bounds on the body of a successful reply to this request. `op_in` holds the request's
// argument struct (in_struct_size bytes). REQUIRES: LookupOp(opcode) has a value.
struct ReplyBounds {
  size_t min = 0;
  size_t max = 0;
  bool expected = true;  // false: the request must not be answered
};
ReplyBounds SuccessReplyBounds(uint32_t opcode, const void* op_in, size_t op_in_size);

// Largest body any success reply may carry; sizes receive buffers.
inline constexpr size_t kMaxReadlinkReply = 4095;

// Requests that add, remove or rename a name in a directory: they change the directory (so a
// reply may carry its new attributes, common/dir_attrs.h) and are not idempotent (so the server
// answers a resent one from its reply cache, server/reply_cache.h).
constexpr bool ChangesNamespace(uint32_t opcode) {
  switch (opcode) {
    case FUSE_CREATE:
    case FUSE_MKNOD:
    case FUSE_MKDIR:
    case FUSE_SYMLINK:
    case FUSE_LINK:
    case FUSE_UNLINK:
    case FUSE_RMDIR:
    case FUSE_RENAME:
    case FUSE_RENAME2:
      return true;
    default:
      return false;
  }
}

// Requests that change nothing on the server a client caches: no attribute (atime aside), no
// name, no data (what ringfs-mount may keep about a node does not go stale when one is sent).
// OPEN with O_TRUNC changes its file: see ChangesSomething.
constexpr bool ChangesNothing(uint32_t opcode) {
  switch (opcode) {
    case FUSE_LOOKUP:
    case FUSE_FORGET:
    case FUSE_BATCH_FORGET:
    case FUSE_GETATTR:
    case FUSE_READLINK:
    case FUSE_OPEN:
    case FUSE_READ:
    case FUSE_STATFS:
    case FUSE_RELEASE:
    case FUSE_FSYNC:
    case FUSE_GETXATTR:
    case FUSE_LISTXATTR:
    case FUSE_FLUSH:
    case FUSE_OPENDIR:
    case FUSE_READDIR:
    case FUSE_READDIRPLUS:
    case FUSE_RELEASEDIR:
    case FUSE_FSYNCDIR:
    case FUSE_GETLK:
    case FUSE_SETLK:
    case FUSE_SETLKW:
    case FUSE_ACCESS:
    case FUSE_INTERRUPT:
    case FUSE_BMAP:
    case FUSE_POLL:
    case FUSE_LSEEK:
    case FUSE_SYNCFS:
      return true;
    default:
      return false;
  }
}

// Whether a request may change what a client caches: not ChangesNothing, or an OPEN with
// O_TRUNC. `op_in` is its argument struct (op_in_size bytes).
bool ChangesSomething(uint32_t opcode, const void* op_in, size_t op_in_size);

}  // namespace ringfs::fuse
