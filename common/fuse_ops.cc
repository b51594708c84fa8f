#include "common/fuse_ops.h"

#include <fcntl.h>

#include <array>
#include <cstring>

#include "proto/fuse_abi.h"

namespace ringfs::fuse {
namespace {

constexpr uint32_t kEntry = sizeof(fuse_entry_out);
constexpr uint32_t kAttr = sizeof(fuse_attr_out);
constexpr uint32_t kOpen = sizeof(fuse_open_out);

struct Row {
  uint32_t opcode;
  OpInfo info;
};

// Sizes follow protocol 7.45 with the optional features ringfs negotiates (no SETXATTR_EXT, no
// security context), which keep every argument struct at its base (compat) size.
constexpr Row kRows[] = {
    {FUSE_LOOKUP, {"LOOKUP", 0, ReplyShape::kFixed, kEntry, true}},
    {FUSE_FORGET, {"FORGET", sizeof(fuse_forget_in), ReplyShape::kNone, 0, true}},
    {FUSE_GETATTR, {"GETATTR", sizeof(fuse_getattr_in), ReplyShape::kFixed, kAttr, true}},
    {FUSE_SETATTR, {"SETATTR", sizeof(fuse_setattr_in), ReplyShape::kFixed, kAttr, true}},
    {FUSE_READLINK, {"READLINK", 0, ReplyShape::kVariable, 0, true}},
    {FUSE_SYMLINK, {"SYMLINK", 0, ReplyShape::kFixed, kEntry, true}},
    {FUSE_MKNOD, {"MKNOD", sizeof(fuse_mknod_in), ReplyShape::kFixed, kEntry, true}},
    {FUSE_MKDIR, {"MKDIR", sizeof(fuse_mkdir_in), ReplyShape::kFixed, kEntry, true}},
    {FUSE_UNLINK, {"UNLINK", 0, ReplyShape::kEmpty, 0, true}},
    {FUSE_RMDIR, {"RMDIR", 0, ReplyShape::kEmpty, 0, true}},
    {FUSE_RENAME, {"RENAME", sizeof(fuse_rename_in), ReplyShape::kEmpty, 0, true}},
    {FUSE_LINK, {"LINK", sizeof(fuse_link_in), ReplyShape::kFixed, kEntry, true}},
    {FUSE_OPEN, {"OPEN", sizeof(fuse_open_in), ReplyShape::kFixed, kOpen, true}},
    {FUSE_READ, {"READ", sizeof(fuse_read_in), ReplyShape::kVariable, 0, true}},
    {FUSE_WRITE, {"WRITE", sizeof(fuse_write_in), ReplyShape::kFixed, sizeof(fuse_write_out), true}},
    {FUSE_STATFS, {"STATFS", 0, ReplyShape::kFixed, sizeof(fuse_statfs_out), true}},
    {FUSE_RELEASE, {"RELEASE", sizeof(fuse_release_in), ReplyShape::kEmpty, 0, true}},
    {FUSE_FSYNC, {"FSYNC", sizeof(fuse_fsync_in), ReplyShape::kEmpty, 0, true}},
    // Without FUSE_SETXATTR_EXT (not negotiated) the kernel sends the 8-byte compat struct.
    {FUSE_SETXATTR, {"SETXATTR", FUSE_COMPAT_SETXATTR_IN_SIZE, ReplyShape::kEmpty, 0, true}},
    {FUSE_GETXATTR, {"GETXATTR", sizeof(fuse_getxattr_in), ReplyShape::kVariable, 0, true}},
    {FUSE_LISTXATTR, {"LISTXATTR", sizeof(fuse_getxattr_in), ReplyShape::kVariable, 0, true}},
    {FUSE_REMOVEXATTR, {"REMOVEXATTR", 0, ReplyShape::kEmpty, 0, true}},
    {FUSE_FLUSH, {"FLUSH", sizeof(fuse_flush_in), ReplyShape::kEmpty, 0, true}},
    {FUSE_INIT, {"INIT", sizeof(fuse_init_in), ReplyShape::kFixed, sizeof(InitOut), false}},
    {FUSE_OPENDIR, {"OPENDIR", sizeof(fuse_open_in), ReplyShape::kFixed, kOpen, true}},
    {FUSE_READDIR, {"READDIR", sizeof(fuse_read_in), ReplyShape::kVariable, 0, true}},
    {FUSE_RELEASEDIR, {"RELEASEDIR", sizeof(fuse_release_in), ReplyShape::kEmpty, 0, true}},
    {FUSE_FSYNCDIR, {"FSYNCDIR", sizeof(fuse_fsync_in), ReplyShape::kEmpty, 0, true}},
    {FUSE_GETLK, {"GETLK", sizeof(fuse_lk_in), ReplyShape::kFixed, sizeof(fuse_lk_out), false}},
    {FUSE_SETLK, {"SETLK", sizeof(fuse_lk_in), ReplyShape::kEmpty, 0, false}},
    {FUSE_SETLKW, {"SETLKW", sizeof(fuse_lk_in), ReplyShape::kEmpty, 0, false}},
    {FUSE_ACCESS, {"ACCESS", sizeof(fuse_access_in), ReplyShape::kEmpty, 0, true}},
    {FUSE_CREATE, {"CREATE", sizeof(fuse_create_in), ReplyShape::kFixed, kEntry + kOpen, true}},
    {FUSE_INTERRUPT, {"INTERRUPT", sizeof(fuse_interrupt_in), ReplyShape::kNone, 0, true}},
    {FUSE_BMAP, {"BMAP", sizeof(fuse_bmap_in), ReplyShape::kFixed, sizeof(fuse_bmap_out), false}},
    {FUSE_DESTROY, {"DESTROY", 0, ReplyShape::kEmpty, 0, false}},
    {FUSE_IOCTL, {"IOCTL", sizeof(fuse_ioctl_in), ReplyShape::kVariable, 0, false}},
    {FUSE_POLL, {"POLL", sizeof(fuse_poll_in), ReplyShape::kFixed, sizeof(fuse_poll_out), false}},
    {FUSE_BATCH_FORGET, {"BATCH_FORGET", sizeof(fuse_batch_forget_in), ReplyShape::kNone, 0, true}},
    {FUSE_FALLOCATE, {"FALLOCATE", sizeof(fuse_fallocate_in), ReplyShape::kEmpty, 0, true}},
    {FUSE_READDIRPLUS, {"READDIRPLUS", sizeof(fuse_read_in), ReplyShape::kVariable, 0, true}},
    {FUSE_RENAME2, {"RENAME2", sizeof(fuse_rename2_in), ReplyShape::kEmpty, 0, true}},
    {FUSE_LSEEK, {"LSEEK", sizeof(fuse_lseek_in), ReplyShape::kFixed, sizeof(fuse_lseek_out), true}},
    {FUSE_COPY_FILE_RANGE,
     {"COPY_FILE_RANGE", sizeof(fuse_copy_file_range_in), ReplyShape::kFixed,
      sizeof(fuse_write_out), true}},
    {FUSE_SYNCFS, {"SYNCFS", sizeof(fuse_syncfs_in), ReplyShape::kEmpty, 0, false}},
    {FUSE_TMPFILE, {"TMPFILE", sizeof(fuse_create_in), ReplyShape::kFixed, kEntry + kOpen, false}},
    {kOpStatx, {"STATX", 24, ReplyShape::kFixed, 0, false}},
    {kOpCopyFileRange64,
     {"COPY_FILE_RANGE_64", sizeof(fuse_copy_file_range_in), ReplyShape::kFixed,
      sizeof(CopyFileRangeOut), true}},
};

constexpr uint32_t kTableSize = 64;

constexpr std::array<std::optional<OpInfo>, kTableSize> BuildTable() {
  std::array<std::optional<OpInfo>, kTableSize> table{};
  for (const Row& row : kRows) table[row.opcode] = row.info;
  return table;
}

constexpr auto kTable = BuildTable();

template <typename T>
T LoadStruct(const void* op_in, size_t op_in_size) {
  T value{};
  if (op_in_size >= sizeof(T)) std::memcpy(&value, op_in, sizeof(T));
  return value;
}

}  // namespace

std::optional<OpInfo> LookupOp(uint32_t opcode) {
  if (opcode >= kTableSize) return std::nullopt;
  return kTable[opcode];
}

std::string_view OpName(uint32_t opcode) {
  if (auto op = LookupOp(opcode)) return op->name;
  return "OP_UNKNOWN";
}

ReplyBounds SuccessReplyBounds(uint32_t opcode, const void* op_in, size_t op_in_size) {
  std::optional<OpInfo> op = LookupOp(opcode);
  if (!op) return {0, 0, false};
  switch (op->reply) {
    case ReplyShape::kNone:
      return {0, 0, false};
    case ReplyShape::kEmpty:
      return {0, 0, true};
    case ReplyShape::kFixed:
      return {op->reply_size, op->reply_size, true};
    case ReplyShape::kVariable:
      break;
  }
  switch (opcode) {
    case FUSE_READ:
    case FUSE_READDIR:
    case FUSE_READDIRPLUS:
      return {0, LoadStruct<fuse_read_in>(op_in, op_in_size).size, true};
    case FUSE_READLINK:
      return {1, kMaxReadlinkReply, true};
    case FUSE_GETXATTR:
    case FUSE_LISTXATTR: {
      uint32_t size = LoadStruct<fuse_getxattr_in>(op_in, op_in_size).size;
      // A zero-size probe is answered with the needed size in fuse_getxattr_out.
      if (size == 0) return {sizeof(fuse_getxattr_out), sizeof(fuse_getxattr_out), true};
      return {0, size, true};
    }
    default:
      return {0, 0, true};
  }
}

bool ChangesSomething(uint32_t opcode, const void* op_in, size_t op_in_size) {
  if (opcode == FUSE_OPEN) {
    fuse_open_in open{};
    if (op_in == nullptr || op_in_size < sizeof(open)) return false;
    std::memcpy(&open, op_in, sizeof(open));
    return (open.flags & O_TRUNC) != 0;
  }
  return !ChangesNothing(opcode);
}

}  // namespace ringfs::fuse
