// Attribute operations: GETATTR, SETATTR, READLINK, STATFS, ACCESS and the xattr family.
// Paths of the form /proc/self/fd/N name our own O_PATH fds; they are not client paths.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/status.h"
#include "server/executor.h"
#include "server/export_fs.h"
#include "server/ops_util.h"

namespace ringfs::server {
namespace {

absl::Status ReplyAttr(const OpContext& ctx, int fd, ReplyBody& body) {
  ASSIGN_OR_RETURN(struct stat st, StatFd(fd));
  body.Put(ToAttrOut(st, ctx.times));
  return absl::OkStatus();
}

timespec ToTimespec(uint64_t sec, uint32_t nsec, bool now) {
  timespec ts{};
  if (now) {
    ts.tv_nsec = UTIME_NOW;
  } else {
    ts.tv_sec = static_cast<time_t>(sec);
    ts.tv_nsec = nsec;
  }
  return ts;
}

// `fd` is the open file when the request named one (ftruncate, open with O_TRUNC), else the
// node's O_PATH fd, reopened for writing here.
absl::Status Truncate(int fd, bool is_open_file, mode_t type, uint64_t size) {
  UniqueFd reopened;
  if (!is_open_file) {
    if (type == S_IFDIR) return ErrnoError(EISDIR, "truncate directory");
    if (type != S_IFREG) return ErrnoError(EINVAL, "truncate special file");
    ASSIGN_OR_RETURN(reopened, Reopen(fd, O_WRONLY));
    fd = reopened.get();
  }
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) return ErrnoError(errno, "ftruncate");
  return absl::OkStatus();
}

}  // namespace

absl::Status Executor::Run(const OpContext& ctx, const GetattrArgs& a, ReplyBody& body) const {
  if (a.getattr_flags & FUSE_GETATTR_FH) {
    if (auto handle = GetHandle(ctx, a.fh); handle.ok()) {
      return ReplyAttr(ctx, (*handle)->fd.get(), body);
    }
  }
  ASSIGN_OR_RETURN(NodeRef node, GetNode(ctx, ctx.nodeid));
  return ReplyAttr(ctx, node->fd.get(), body);
}

absl::Status Executor::Run(const OpContext& ctx, const SetattrArgs& a, ReplyBody& body) const {
  const fuse_setattr_in& in = a.in;
  // With FATTR_FH (ftruncate, open with O_TRUNC) everything goes through the open file: it
  // works when the file was unlinked meanwhile, whatever its node's fd does.
  HandleRef handle;
  NodeRef node;
  int fd;
  mode_t type;
  if (in.valid & FATTR_FH) {
    ASSIGN_OR_RETURN(handle, GetHandle(ctx, in.fh));
    if (handle->nodeid != ctx.nodeid) return ErrnoError(EBADF, "file handle of another node");
    fd = handle->fd.get();
    ASSIGN_OR_RETURN(struct stat st, StatFd(fd));
    type = st.st_mode & S_IFMT;
  } else {
    ASSIGN_OR_RETURN(node, GetNode(ctx, ctx.nodeid));
    fd = node->fd.get();
    type = node->type;
  }
  if (in.valid & (FATTR_UID | FATTR_GID)) {
    uid_t uid = (in.valid & FATTR_UID) ? in.uid : static_cast<uid_t>(-1);
    gid_t gid = (in.valid & FATTR_GID) ? in.gid : static_cast<gid_t>(-1);
    if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
      return ErrnoError(errno, "chown");
    }
  }
  if (in.valid & FATTR_MODE) {
    if (type == S_IFLNK) return ErrnoError(EOPNOTSUPP, "chmod of a symlink");
    if (ChmodFd(fd, RequestedMode(ctx, in.mode & 07777)) != 0) {
      return ErrnoError(errno, "chmod");
    }
  } else if ((in.valid & FATTR_KILL_SUIDGID) && type == S_IFREG) {
    RETURN_IF_ERROR(KillSuidSgid(fd));
  }
  if (in.valid & FATTR_SIZE) RETURN_IF_ERROR(Truncate(fd, handle != nullptr, type, in.size));
  if (in.valid & (FATTR_ATIME | FATTR_MTIME)) {
    timespec times[2];
    times[0] = (in.valid & FATTR_ATIME)
                   ? ToTimespec(in.atime, in.atimensec, in.valid & FATTR_ATIME_NOW)
                   : timespec{0, UTIME_OMIT};
    times[1] = (in.valid & FATTR_MTIME)
                   ? ToTimespec(in.mtime, in.mtimensec, in.valid & FATTR_MTIME_NOW)
                   : timespec{0, UTIME_OMIT};
    // On the fd itself (an O_PATH fd of a symlink is the symlink: never followed), not its
    // /proc/self/fd link, which would cost a path walk through procfs.
    if (utimensat(fd, "", times, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
      return ErrnoError(errno, "utimensat");
    }
  }
  return ReplyAttr(ctx, fd, body);
}

absl::Status Executor::Run(const OpContext& ctx, const ReadlinkArgs&, ReplyBody& body) const {
  ASSIGN_OR_RETURN(NodeRef node, GetNode(ctx, ctx.nodeid));
  if (node->type != S_IFLNK) return ErrnoError(EINVAL, "not a symlink");
  ssize_t n = readlinkat(node->fd.get(), "", body.data(), body.capacity());
  if (n < 0) return ErrnoError(errno, "readlinkat");
  if (static_cast<size_t>(n) >= body.capacity()) return ErrnoError(ENAMETOOLONG, "long symlink");
  body.set_size(static_cast<size_t>(n));
  return absl::OkStatus();
}

absl::Status Executor::Run(const OpContext& ctx, const StatfsArgs&, ReplyBody& body) const {
  ASSIGN_OR_RETURN(NodeRef root, GetNode(ctx, fuse::kRootNodeId));
  struct statvfs st {};
  if (fstatvfs(root->fd.get(), &st) != 0) return ErrnoError(errno, "fstatvfs");
  fuse_statfs_out out{};
  out.st = ToKstatfs(st);
  body.Put(out);
  return absl::OkStatus();
}

// The mount uses default_permissions, so the kernel normally checks access itself; a caller that
// asks anyway gets the export's own answer: the thread runs as the caller (thread_creds.h), and
// AT_EACCESS makes the check use those credentials, supplementary groups and ACLs included.
absl::Status Executor::Run(const OpContext& ctx, const AccessArgs& a, ReplyBody&) const {
  ASSIGN_OR_RETURN(NodeRef node, GetNode(ctx, ctx.nodeid));
  const int want = static_cast<int>(a.mask & (R_OK | W_OK | X_OK));
  if (want == 0) return absl::OkStatus();
  if (syscall(SYS_faccessat2, node->fd.get(), "", want, AT_EACCESS | AT_EMPTY_PATH) != 0) {
    return ErrnoError(errno, "access");
  }
  return absl::OkStatus();
}

absl::Status Executor::Run(const OpContext& ctx, const SetxattrArgs& a, ReplyBody&) const {
  ASSIGN_OR_RETURN(NodeRef node, GetNode(ctx, ctx.nodeid));
  std::string path = ProcFdPath(node->fd.get());
  if (setxattr(path.c_str(), NameBuffer(a.name).c_str(), a.value.data(), a.value.size(),
               static_cast<int>(a.flags)) != 0) {
    return ErrnoError(errno, "setxattr");
  }
  return absl::OkStatus();
}

absl::Status Executor::Run(const OpContext& ctx, const GetxattrArgs& a, ReplyBody& body) const {
  ASSIGN_OR_RETURN(NodeRef node, GetNode(ctx, ctx.nodeid));
  std::string path = ProcFdPath(node->fd.get());
  NameBuffer name(a.name);
  if (a.size == 0) {
    ssize_t n = getxattr(path.c_str(), name.c_str(), nullptr, 0);
    if (n < 0) return ErrnoError(errno, "getxattr");
    fuse_getxattr_out out{};
    out.size = static_cast<uint32_t>(n);
    body.Put(out);
    return absl::OkStatus();
  }
  size_t size = std::min<size_t>(a.size, body.capacity());
  ssize_t n = getxattr(path.c_str(), name.c_str(), body.data(), size);
  if (n < 0) return ErrnoError(errno, "getxattr");
  body.set_size(static_cast<size_t>(n));
  return absl::OkStatus();
}

absl::Status Executor::Run(const OpContext& ctx, const ListxattrArgs& a, ReplyBody& body) const {
  ASSIGN_OR_RETURN(NodeRef node, GetNode(ctx, ctx.nodeid));
  std::string path = ProcFdPath(node->fd.get());
  if (a.size == 0) {
    ssize_t n = listxattr(path.c_str(), nullptr, 0);
    if (n < 0) return ErrnoError(errno, "listxattr");
    fuse_getxattr_out out{};
    out.size = static_cast<uint32_t>(n);
    body.Put(out);
    return absl::OkStatus();
  }
  size_t size = std::min<size_t>(a.size, body.capacity());
  ssize_t n = listxattr(path.c_str(), body.data(), size);
  if (n < 0) return ErrnoError(errno, "listxattr");
  body.set_size(static_cast<size_t>(n));
  return absl::OkStatus();
}

absl::Status Executor::Run(const OpContext& ctx, const RemovexattrArgs& a, ReplyBody&) const {
  ASSIGN_OR_RETURN(NodeRef node, GetNode(ctx, ctx.nodeid));
  std::string path = ProcFdPath(node->fd.get());
  if (removexattr(path.c_str(), NameBuffer(a.name).c_str()) != 0) {
    return ErrnoError(errno, "removexattr");
  }
  return absl::OkStatus();
}

}  // namespace ringfs::server
