// Name-space operations: LOOKUP, FORGET, BATCH_FORGET, MKNOD, MKDIR, SYMLINK, LINK, UNLINK,
// RMDIR, RENAME, RENAME2. Every name is one validated component resolved under the parent's
// O_PATH fd (see export_fs.h); nothing here follows a symlink.
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/status.h"
#include "server/executor.h"
#include "server/export_fs.h"
#include "server/ops_util.h"

namespace ringfs::server {
namespace {

// After creating `name` in `parent_fd` (as the caller, so it is the caller's already): reply
// with its entry.
absl::Status FinishCreate(const OpContext& ctx, int parent_fd, std::string_view name,
                          ReplyBody& body) {
  ASSIGN_OR_RETURN(UniqueFd fd, LookupBeneath(parent_fd, name));
  ASSIGN_OR_RETURN(struct stat st, StatFd(fd.get()));
  ASSIGN_OR_RETURN(EntryIds ids, AddNode(ctx, std::move(fd), st));
  body.Put(ToEntryOut(ids.nodeid, ids.generation, st, ctx.times));
  return absl::OkStatus();
}

}  // namespace

absl::Status Executor::Run(const OpContext& ctx, const LookupArgs& a, ReplyBody& body) const {
  ASSIGN_OR_RETURN(NodeRef parent, GetNode(ctx, ctx.nodeid));
  absl::Status status = ReplyEntry(ctx, parent->fd.get(), a.name, body);
  if (!status.ok() && ToErrno(status) == ENOENT && ctx.times.negative_entry_ns > 0) {
    // A negative entry: the kernel remembers the name's absence (FUSE: node id 0).
    fuse_entry_out out{};
    out.entry_valid = ctx.times.negative_entry_ns / 1'000'000'000;
    out.entry_valid_nsec = static_cast<uint32_t>(ctx.times.negative_entry_ns % 1'000'000'000);
    body.set_size(0);
    body.Put(out);
    return absl::OkStatus();
  }
  return status;
}

absl::Status Executor::Run(const OpContext& ctx, const ForgetArgs& a, ReplyBody&) const {
  ctx.client->nodes->Forget(ctx.nodeid, a.nlookup);
  return absl::OkStatus();
}

absl::Status Executor::Run(const OpContext& ctx, const BatchForgetArgs& a, ReplyBody&) const {
  for (uint32_t i = 0; i < a.count; ++i) {
    fuse_forget_one one = a.Entry(i);
    ctx.client->nodes->Forget(one.nodeid, one.nlookup);
  }
  return absl::OkStatus();
}

absl::Status Executor::Run(const OpContext& ctx, const SymlinkArgs& a, ReplyBody& body) const {
  ASSIGN_OR_RETURN(NodeRef parent, GetNode(ctx, ctx.nodeid));
  std::string target(a.target);
  if (symlinkat(target.c_str(), parent->fd.get(), NameBuffer(a.name).c_str()) != 0) {
    return ErrnoError(errno, "symlinkat");
  }
  return FinishCreate(ctx, parent->fd.get(), a.name, body);
}

absl::Status Executor::Run(const OpContext& ctx, const MknodArgs& a, ReplyBody& body) const {
  ASSIGN_OR_RETURN(NodeRef parent, GetNode(ctx, ctx.nodeid));
  const mode_t type = a.mode & S_IFMT;
  if (type != S_IFREG && type != S_IFIFO && type != S_IFSOCK && type != S_IFCHR &&
      type != S_IFBLK && type != 0) {
    return ErrnoError(EINVAL, "bad mknod type");
  }
  // Device nodes as NFS has them: created for a caller the export's kernel lets do it (a root
  // that is not squashed; anyone else gets EPERM there). The client mount is nodev, so they
  // are never opened as devices through it.
  const bool device = type == S_IFCHR || type == S_IFBLK;
  const mode_t mode = type | RequestedMode(ctx, a.mode & 07777);
  if (mknodat(parent->fd.get(), NameBuffer(a.name).c_str(), mode, device ? a.rdev : 0) != 0) {
    return ErrnoError(errno, "mknodat");
  }
  return FinishCreate(ctx, parent->fd.get(), a.name, body);
}

absl::Status Executor::Run(const OpContext& ctx, const MkdirArgs& a, ReplyBody& body) const {
  ASSIGN_OR_RETURN(NodeRef parent, GetNode(ctx, ctx.nodeid));
  if (mkdirat(parent->fd.get(), NameBuffer(a.name).c_str(), RequestedMode(ctx, a.mode & 07777)) != 0) {
    return ErrnoError(errno, "mkdirat");
  }
  return FinishCreate(ctx, parent->fd.get(), a.name, body);
}

absl::Status Executor::Run(const OpContext& ctx, const UnlinkArgs& a, ReplyBody&) const {
  ASSIGN_OR_RETURN(NodeRef parent, GetNode(ctx, ctx.nodeid));
  const std::optional<InodeKey> removed = FileToBeReplaced(ctx, parent->fd.get(), a.name);
  if (unlinkat(parent->fd.get(), NameBuffer(a.name).c_str(), 0) != 0) {
    return ErrnoError(errno, "unlinkat");
  }
  if (removed) NoteChangedFile(ctx, *removed);  // its other names show one link fewer
  return absl::OkStatus();
}

absl::Status Executor::Run(const OpContext& ctx, const RmdirArgs& a, ReplyBody&) const {
  ASSIGN_OR_RETURN(NodeRef parent, GetNode(ctx, ctx.nodeid));
  const std::optional<InodeKey> removed = FileToBeReplaced(ctx, parent->fd.get(), a.name);
  if (unlinkat(parent->fd.get(), NameBuffer(a.name).c_str(), AT_REMOVEDIR) != 0) {
    return ErrnoError(errno, "rmdir");
  }
  if (removed) NoteChangedFile(ctx, *removed);  // a working directory elsewhere: no links left
  return absl::OkStatus();
}

absl::Status Executor::Run(const OpContext& ctx, const RenameArgs& a, ReplyBody&) const {
  constexpr uint32_t kAllowed = RENAME_NOREPLACE | RENAME_EXCHANGE;
  if (a.flags & ~kAllowed) return ErrnoError(EINVAL, "unsupported rename flags");
  ASSIGN_OR_RETURN(NodeRef olddir, GetNode(ctx, ctx.nodeid));
  ASSIGN_OR_RETURN(NodeRef newdir, GetNode(ctx, a.newdir));
  // The file a rename replaces loses a link (an exchange replaces nothing).
  const std::optional<InodeKey> replaced = (a.flags & RENAME_EXCHANGE)
                                               ? std::nullopt
                                               : FileToBeReplaced(ctx, newdir->fd.get(), a.newname);
  if (renameat2(olddir->fd.get(), NameBuffer(a.oldname).c_str(), newdir->fd.get(),
                NameBuffer(a.newname).c_str(), a.flags) != 0) {
    return ErrnoError(errno, "renameat2");
  }
  if (replaced) NoteChangedFile(ctx, *replaced);
  return absl::OkStatus();
}

absl::Status Executor::Run(const OpContext& ctx, const LinkArgs& a, ReplyBody& body) const {
  ASSIGN_OR_RETURN(NodeRef node, GetNode(ctx, a.oldnodeid));
  ASSIGN_OR_RETURN(NodeRef newdir, GetNode(ctx, ctx.nodeid));
  if (node->type == S_IFDIR) return ErrnoError(EPERM, "hard link to a directory");
  NameBuffer name(a.name);
  if (linkat(node->fd.get(), "", newdir->fd.get(), name.c_str(), AT_EMPTY_PATH) != 0) {
    return ErrnoError(errno, "linkat");
  }
  return ReplyEntry(ctx, newdir->fd.get(), a.name, body);
}

}  // namespace ringfs::server
