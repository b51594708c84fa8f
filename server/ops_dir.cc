// Directory operations: OPENDIR, READDIR, READDIRPLUS (RELEASEDIR and FSYNCDIR share the file
// code). A directory handle reads a snapshot of the directory when a READDIR starts at offset 0;
// entry i has cookie i + 1 ("off" of a dirent = where the next READDIR continues).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/status.h"
#include "server/executor.h"
#include "server/export_fs.h"
#include "server/ops_util.h"

namespace ringfs::server {
namespace {

struct LinuxDirent64 {
  uint64_t d_ino;
  int64_t d_off;
  uint16_t d_reclen;
  uint8_t d_type;
  char d_name[];
};

absl::Status LoadSnapshot(int dir_fd, DirSnapshot& snapshot) {
  snapshot.entries.clear();
  snapshot.loaded = false;
  if (lseek(dir_fd, 0, SEEK_SET) < 0) return ErrnoError(errno, "rewind directory");
  alignas(8) char buffer[32 * 1024];
  for (;;) {
    long n = syscall(SYS_getdents64, dir_fd, buffer, sizeof(buffer));
    if (n < 0) return ErrnoError(errno, "getdents64");
    if (n == 0) break;
    for (long pos = 0; pos < n;) {
      auto* d = reinterpret_cast<LinuxDirent64*>(buffer + pos);
      snapshot.entries.push_back(DirEntry{d->d_name, d->d_ino, d->d_type});
      pos += d->d_reclen;
    }
  }
  snapshot.loaded = true;
  return absl::OkStatus();
}

bool IsDotOrDotDot(const std::string& name) { return name == "." || name == ".."; }

// Writes the dirent part (header + name + zero padding) at `out`.
void PutDirent(char* out, const DirEntry& e, uint64_t cookie) {
  fuse_dirent d{};
  d.ino = e.ino;
  d.off = cookie;
  d.namelen = static_cast<uint32_t>(e.name.size());
  d.type = e.type;
  std::memcpy(out, &d, FUSE_NAME_OFFSET);
  std::memcpy(out + FUSE_NAME_OFFSET, e.name.data(), e.name.size());
  size_t padded = FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + e.name.size());
  std::memset(out + FUSE_NAME_OFFSET + e.name.size(), 0,
              padded - FUSE_NAME_OFFSET - e.name.size());
}

// The entry_out of one READDIRPLUS entry: looked up like LOOKUP (one more lookup on the node).
// "." and "..", and entries that vanished since the snapshot, get nodeid 0, which the kernel
// takes as "no attributes for this one".
fuse_entry_out PlusEntry(const OpContext& ctx, int dir_fd, const DirEntry& e) {
  fuse_entry_out out{};
  if (IsDotOrDotDot(e.name)) return out;
  auto fd = LookupBeneath(dir_fd, e.name);
  if (!fd.ok()) return out;
  auto st = StatFd(fd->get());
  if (!st.ok()) return out;
  auto ids = AddNode(ctx, *std::move(fd), *st);
  if (!ids.ok()) return out;
  return ToEntryOut(ids->nodeid, ids->generation, *st, ctx.times);
}

}  // namespace

absl::Status Executor::Run(const OpContext& ctx, const OpendirArgs&, ReplyBody& body) const {
  ASSIGN_OR_RETURN(NodeRef node, GetNode(ctx, ctx.nodeid));
  RETURN_IF_ERROR(ctx.client->handles.CheckRoom());
  ASSIGN_OR_RETURN(UniqueFd fd, OpenNode(*node, /*directory=*/true, 0));
  fuse_open_out out{};
  out.fh = ctx.client->handles.Add(std::make_shared<Handle>(std::move(fd), node->id, true));
  body.Put(out);
  return absl::OkStatus();
}

absl::Status Executor::Run(const OpContext& ctx, const ReaddirArgs& a, ReplyBody& body) const {
  ASSIGN_OR_RETURN(HandleRef handle, GetHandle(ctx, a.fh));
  if (!handle->is_dir) return ErrnoError(ENOTDIR, "readdir on a file handle");
  absl::MutexLock lock(&handle->mu);
  DirSnapshot& snapshot = handle->dir;
  if (a.offset == 0 || !snapshot.loaded) RETURN_IF_ERROR(LoadSnapshot(handle->fd.get(), snapshot));

  const size_t limit = std::min<size_t>(a.size, body.capacity());
  size_t used = 0;
  for (uint64_t i = a.offset; i < snapshot.entries.size(); ++i) {
    const DirEntry& e = snapshot.entries[i];
    const uint64_t cookie = i + 1;
    if (!a.plus) {
      size_t len = FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + e.name.size());
      if (used + len > limit) break;
      PutDirent(body.data() + used, e, cookie);
      used += len;
      continue;
    }
    size_t len = FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET_DIRENTPLUS + e.name.size());
    if (used + len > limit) break;  // checked before the lookup, so no lookup is ever lost
    fuse_entry_out entry = PlusEntry(ctx, handle->fd.get(), e);
    std::memcpy(body.data() + used, &entry, sizeof(entry));
    PutDirent(body.data() + used + sizeof(entry), e, cookie);
    used += len;
  }
  body.set_size(used);
  return absl::OkStatus();
}

}  // namespace ringfs::server
