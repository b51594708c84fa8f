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
#include "server/ops_util.h"

namespace ringfs::server {
namespace {

void AppendOne(const OpContext& ctx, uint64_t nodeid, ReplyBody& body) {
  absl::StatusOr<NodeRef> node = GetNode(ctx, nodeid);
  if (!node.ok()) return;
  absl::StatusOr<struct stat> st = StatFd((*node)->fd.get());
  if (!st.ok()) return;
  wire::DirAttrTrailer trailer;
  trailer.nodeid = nodeid;
  trailer.attr = ToAttrOut(*st, ctx.times);
  body.Put(trailer);
}

// MKDIR's new directory, when it was empty after the node entered this client's table: any
// name made in it since then is pushed to the client (server/coherence.h), so the client may
// answer lookups of other names itself (frontend/complete_dirs.h). Checked after AddNode, so a
// name made before is seen here and one made after is pushed; left out otherwise, or when the
// reply names a directory that is not empty (another client renamed one over the new name
// before it was looked up again).
void AppendNewDirIfEmpty(const OpContext& ctx, ReplyBody& body) {
  if (body.size() < sizeof(fuse_entry_out)) return;
  fuse_entry_out entry;
  std::memcpy(&entry, body.data(), sizeof(entry));
  absl::StatusOr<NodeRef> node = GetNode(ctx, entry.nodeid);
  if (!node.ok()) return;
  absl::StatusOr<UniqueFd> dir = OpenNode(**node, /*directory=*/true, O_RDONLY);
  if (!dir.ok() || !EmptyWithExactNames(dir->get())) return;
  absl::StatusOr<struct stat> st = StatFd(dir->get());
  if (!st.ok()) return;
  wire::DirAttrTrailer trailer;
  trailer.nodeid = entry.nodeid;
  trailer.attr = ToAttrOut(*st, ctx.times);
  body.Put(trailer);
}

}  // namespace

bool EmptyWithExactNames(int fd) {
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
  if (ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 && (flags & FS_CASEFOLD_FL) != 0) return false;
  alignas(8) char buf[1024];
  for (;;) {
    const long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
    if (n < 0) return false;
    if (n == 0) return true;
    for (long at = 0; at < n;) {
      const auto* d = reinterpret_cast<const struct dirent64*>(buf + at);
      const std::string_view name(d->d_name);
      if (name != "." && name != "..") return false;
      at += d->d_reclen;
    }
  }
}

void AppendDirAttrs(const OpContext& ctx, const Request& request, ReplyBody& body) {
  AppendOne(ctx, request.nodeid, body);
  if (request.opcode == FUSE_MKDIR) AppendNewDirIfEmpty(ctx, body);
  if (const auto* rename = std::get_if<RenameArgs>(&request.args);
      rename != nullptr && rename->newdir != request.nodeid) {
    AppendOne(ctx, rename->newdir, body);
  }
}

}  // namespace ringfs::server
