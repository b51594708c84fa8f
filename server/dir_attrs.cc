#include "server/dir_attrs.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <string_view>
#include <variant>

#include "server/attr.h"
#include "server/export_fs.h"
#include "server/open_for_writing.h"
#include "server/ops_util.h"

namespace ringfs::server {
namespace {

void PutTrailer(const CacheTimes& times, uint64_t nodeid, int fd, ReplyBody& body) {
  absl::StatusOr<struct stat> st = StatFd(fd);
  if (!st.ok()) return;
  wire::DirAttrTrailer trailer;
  trailer.nodeid = nodeid;
  trailer.attr = ToAttrOut(*st, times);
  body.Put(trailer);
}

void PutTrailer(const OpContext& ctx, uint64_t nodeid, int fd, ReplyBody& body) {
  PutTrailer(ctx.times, nodeid, fd, body);
}

void AppendOne(const OpContext& ctx, uint64_t nodeid, ReplyBody& body) {
  absl::StatusOr<NodeRef> node = GetNode(ctx, nodeid);
  if (node.ok()) PutTrailer(ctx, nodeid, (*node)->fd.get(), body);
}

// A trailer for directory `nodeid` when it is empty: see the callers for why that is enough.
void AppendIfEmpty(const OpContext& ctx, uint64_t nodeid, ReplyBody& body) {
  absl::StatusOr<NodeRef> node = GetNode(ctx, nodeid);
  if (!node.ok()) return;
  absl::StatusOr<UniqueFd> dir = OpenNode(**node, /*directory=*/true, O_RDONLY);
  if (dir.ok() && EmptyWithExactNames(dir->get())) PutTrailer(ctx, nodeid, dir->get(), body);
}

// The node id of the reply's entry; 0 for none (a negative entry, or no entry at all).
uint64_t ReplyEntryNode(const ReplyBody& body) {
  if (body.size() < sizeof(fuse_entry_out)) return 0;
  fuse_entry_out entry;
  std::memcpy(&entry, body.data(), sizeof(entry));
  return entry.nodeid;
}

}  // namespace

bool EmptyWithExactNames(int fd) {
  // Entries first: most directories a LOOKUP misses in are not empty, and one read tells.
  alignas(8) char buf[1024];
  for (;;) {
    const long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
    if (n < 0) return false;
    if (n == 0) break;
    for (long at = 0; at < n;) {
      const auto* d = reinterpret_cast<const struct dirent64*>(buf + at);
      const std::string_view name(d->d_name);
      if (name != "." && name != "..") return false;
      at += d->d_reclen;
    }
  }
  struct statfs fs;
  if (fstatfs(fd, &fs) != 0) return false;
  switch (static_cast<uint32_t>(fs.f_type)) {
    case MSDOS_SUPER_MAGIC:  // vfat, with its short-name aliases
    case 0x2011BAB0u:        // exfat
    case 0x7366746Eu:        // ntfs3
    case 0x5346544Eu:        // ntfs
    case SMB_SUPER_MAGIC:
    case 0xFF534D42u:        // cifs
    case 0xFE534D42u:        // smb2
      return false;
    default:
      break;
  }
  // ext4, f2fs and tmpfs directories may fold case (chattr +F).
  int flags = 0;
  return !(ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 && (flags & FS_CASEFOLD_FL) != 0);
}

void AppendOneRecord(const OpContext& ctx, uint64_t nodeid, ReplyBody& body) {
  const size_t before = body.size();
  AppendOne(ctx, nodeid, body);
  if (body.size() == before) body.Put(wire::DirAttrTrailer{});  // the client counts on one
}

void AppendOneRecord(const CacheTimes& times, uint64_t nodeid, int fd, ReplyBody& body) {
  const size_t before = body.size();
  PutTrailer(times, nodeid, fd, body);
  if (body.size() == before) body.Put(wire::DirAttrTrailer{});
}

void AppendOpenRecord(const OpContext& ctx, uint64_t nodeid, uint32_t open_flags,
                      int64_t now_realtime_ns, ReplyBody& body) {
  fuse_open_out out;
  std::memcpy(&out, body.data(), sizeof(out));
  absl::StatusOr<HandleRef> handle = ctx.client->handles.Get(out.fh);
  // The lease test needs a read-only descriptor; a writer's open gets no baseline anyway.
  if (!handle.ok() || (open_flags & O_ACCMODE) != O_RDONLY) {
    body.Put(wire::DirAttrTrailer{});
    return;
  }
  const size_t before = body.size();
  PutTrailer(ctx, nodeid, (*handle)->fd.get(), body);
  if (body.size() == before) {
    body.Put(wire::DirAttrTrailer{});
    return;
  }
  wire::DirAttrTrailer record;
  std::memcpy(&record, body.data() + before, sizeof(record));
  const int64_t ctime_ns =
      static_cast<int64_t>(record.attr.attr.ctime) * 1'000'000'000 + record.attr.attr.ctimensec;
  // Changed too recently for its change time to tell a later change apart, or open for writing
  // (tested last: writers wait while the lease is held): no baseline.
  if (now_realtime_ns - ctime_ns < wire::kOpenAttrsSettledNs ||
      OpenForWriting((*handle)->fd.get())) {
    record = wire::DirAttrTrailer{};
    std::memcpy(body.data() + before, &record, sizeof(record));
  }
}

void AppendDirAttrs(const OpContext& ctx, const Request& request, ReplyBody& body) {
  if (request.opcode == FUSE_LOOKUP) {
    // No entry found: its directory, when empty. The client holds that directory (it sent its
    // id), so it is in the client's table and every name made in it from now on is pushed
    // there; a name made before this check is seen by it.
    if (body.size() == sizeof(fuse_entry_out) && ReplyEntryNode(body) == 0) {
      AppendIfEmpty(ctx, request.nodeid, body);
    }
    return;
  }
  AppendOne(ctx, request.nodeid, body);
  if (request.opcode == FUSE_MKDIR) {
    // MKDIR's new directory, when it was empty after the node entered this client's table
    // (AddNode ran before this): a name made in it before is seen here, one made after is
    // pushed. Left out when the entry names a directory that is not empty (another client
    // renamed one over the new name before it was looked up again).
    if (uint64_t made = ReplyEntryNode(body); made != 0) AppendIfEmpty(ctx, made, body);
  }
  if (const auto* rename = std::get_if<RenameArgs>(&request.args);
      rename != nullptr && rename->newdir != request.nodeid) {
    AppendOne(ctx, rename->newdir, body);
  }
}

}  // namespace ringfs::server
