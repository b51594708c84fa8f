#include "frontend/local_dir_handles.h"

#include <linux/fuse.h>

#include <cstring>

#include "common/wire.h"

namespace ringfs::frontend {

uint64_t LocalDirHandles::Open() {
  absl::MutexLock lock(&mu_);
  const uint64_t fh = wire::kClientDirHandleBit | next_++;
  open_.insert(fh);
  return fh;
}

bool LocalDirHandles::IsLocal(uint64_t fh) const {
  if ((fh & wire::kClientDirHandleBit) == 0) return false;
  absl::MutexLock lock(&mu_);
  return open_.contains(fh);
}

bool LocalDirHandles::Release(uint64_t fh) {
  if ((fh & wire::kClientDirHandleBit) == 0) return false;
  absl::MutexLock lock(&mu_);
  return open_.erase(fh) != 0;
}

size_t LocalDirHandles::open_count() const {
  absl::MutexLock lock(&mu_);
  return open_.size();
}

bool LocalDirHandles::ZeroLocalFh(char* op_in, size_t op_in_size, size_t at) const {
  uint64_t fh;
  if (op_in_size < at + sizeof(fh)) return false;
  std::memcpy(&fh, op_in + at, sizeof(fh));
  if (!IsLocal(fh)) return false;
  fh = 0;
  std::memcpy(op_in + at, &fh, sizeof(fh));
  return true;
}

void LocalDirHandles::ForServer(uint32_t opcode, char* op_in, size_t op_in_size) const {
  switch (opcode) {
    case FUSE_READDIR:
    case FUSE_READDIRPLUS:
      ZeroLocalFh(op_in, op_in_size, offsetof(fuse_read_in, fh));
      return;
    case FUSE_FSYNCDIR:
      ZeroLocalFh(op_in, op_in_size, offsetof(fuse_fsync_in, fh));
      return;
    case FUSE_SETATTR: {
      // The kernel names the open file only for ftruncate(), which a directory never gets;
      // cleared all the same, so no local handle ever reaches the server.
      if (op_in_size < sizeof(fuse_setattr_in)) return;
      fuse_setattr_in in;
      std::memcpy(&in, op_in, sizeof(in));
      if ((in.valid & FATTR_FH) == 0 || !IsLocal(in.fh)) return;
      in.valid &= ~static_cast<uint32_t>(FATTR_FH);
      in.fh = 0;
      std::memcpy(op_in, &in, sizeof(in));
      return;
    }
    default:
      return;
  }
}

}  // namespace ringfs::frontend
