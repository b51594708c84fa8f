#include "frontend/open_reply.h"

#include <fcntl.h>
#include <linux/fuse.h>

#include <cstddef>
#include <cstring>

namespace ringfs::frontend {

void AdjustOpenReply(uint32_t opcode, const void* op_in, size_t op_in_size, char* body,
                     size_t body_size) {
  uint32_t flags = 0;
  size_t open_out_at = 0;
  if (opcode == FUSE_OPEN) {
    fuse_open_in in;
    if (op_in_size < sizeof(in)) return;
    std::memcpy(&in, op_in, sizeof(in));
    flags = in.flags;
  } else if (opcode == FUSE_CREATE) {
    fuse_create_in in;
    if (op_in_size < sizeof(in)) return;
    std::memcpy(&in, op_in, sizeof(in));
    flags = in.flags;
    open_out_at = sizeof(fuse_entry_out);
  } else {
    return;
  }
  uint32_t add = 0;
  if ((flags & O_ACCMODE) == O_WRONLY) add = FOPEN_DIRECT_IO;
  if ((flags & O_ACCMODE) == O_RDONLY) add = FOPEN_NOFLUSH;
  if (add == 0 || body_size < open_out_at + sizeof(fuse_open_out)) return;
  fuse_open_out out;
  std::memcpy(&out, body + open_out_at, sizeof(out));
  out.open_flags |= add;
  std::memcpy(body + open_out_at, &out, sizeof(out));
}

void AdjustOpenRequestForWriteback(uint32_t opcode, void* op_in, size_t op_in_size) {
  // `flags` leads both fuse_open_in and fuse_create_in.
  static_assert(offsetof(fuse_open_in, flags) == 0 && offsetof(fuse_create_in, flags) == 0);
  if (opcode != FUSE_OPEN && opcode != FUSE_CREATE) return;
  if (op_in_size < sizeof(uint32_t)) return;
  uint32_t flags;
  std::memcpy(&flags, op_in, sizeof(flags));
  if ((flags & O_ACCMODE) == O_WRONLY) flags = (flags & ~O_ACCMODE) | O_RDWR;
  flags &= ~O_APPEND;
  std::memcpy(op_in, &flags, sizeof(flags));
}

}  // namespace ringfs::frontend
