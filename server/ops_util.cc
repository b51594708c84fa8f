#include "server/ops_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/status.h"
#include "server/export_fs.h"
#include "server/thread_creds.h"

namespace ringfs::server {

absl::StatusOr<NodeRef> GetNode(const OpContext& ctx, uint64_t nodeid) {
  absl::StatusOr<NodeRef> node = ctx.client->nodes->Get(nodeid);
  if (node.ok() || ToErrno(node.status()) != ESTALE) return node;
  // An id this table never handed out (an older server instance's) has no handles: no scan.
  if (!ctx.client->nodes->Contains(nodeid)) return node;
  // fchmod, fchown, futimens or fgetxattr of an unlinked file the client still has open reach
  // us with its node id only. Most filesystems reopen such a file by handle anyway; for those
  // that do not, the open handle still reaches it.
  HandleRef handle = ctx.client->handles.FindByNode(nodeid);
  if (handle == nullptr) return node;
  ASSIGN_OR_RETURN(UniqueFd path_fd, PathFdOf(handle->fd.get()));
  ASSIGN_OR_RETURN(struct stat st, StatFd(path_fd.get()));
  auto from_handle = std::make_shared<Node>();
  from_handle->id = nodeid;
  from_handle->fd = std::move(path_fd);
  from_handle->dev = st.st_dev;
  from_handle->ino = st.st_ino;
  from_handle->type = st.st_mode & S_IFMT;
  return NodeRef(std::move(from_handle));
}

std::optional<InodeKey> FileToBeReplaced(const OpContext& ctx, int dir_fd, std::string_view name) {
  if (!ctx.others_listen) return std::nullopt;
  struct stat st;
  // Nothing to record when the name is absent: the request then fails or replaces nothing.
  if (fstatat(dir_fd, NameBuffer(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
  return InodeKey{st.st_dev, st.st_ino};
}

void NoteChangedFile(const OpContext& ctx, const InodeKey& key, int64_t data_from) {
  if (!ctx.others_listen) return;
  wire::Invalidation change{wire::InvalidationKind::kInode, 0, data_from, 0, {}};
  ctx.changed_files.push_back({key, std::move(change)});
}

absl::StatusOr<HandleRef> GetHandle(const OpContext& ctx, uint64_t fh) {
  return ctx.client->handles.Get(fh);
}

absl::StatusOr<HandleRef> DirHandleFor(const OpContext& ctx) {
  ASSIGN_OR_RETURN(NodeRef node, GetNode(ctx, ctx.nodeid));
  absl::StatusOr<UniqueFd> fd;
  {
    ServerCredsScope as_server;
    fd = OpenNode(*node, /*directory=*/true, 0);
  }
  if (!fd.ok()) return fd.status();
  return std::make_shared<Handle>(*std::move(fd), node->id, /*dir=*/true);
}

absl::StatusOr<EntryIds> AddNode(const OpContext& ctx, UniqueFd fd, const struct stat& st) {
  if (ctx.node_handles == nullptr) return ctx.client->nodes->AddLookup(std::move(fd), st);
  InodeHandle handle;  // stays empty (no allocation) unless the node is new and has a handle
  ASSIGN_OR_RETURN(EntryIds ids, ctx.client->nodes->AddLookup(std::move(fd), st, &handle));
  if (ids.created) {
    ctx.node_handles->records.push_back(
        ctx.node_handles->seal->Seal(ids.nodeid, handle.bytes.empty() ? nullptr : &handle));
  }
  return ids;
}

absl::Status ReplyEntry(const OpContext& ctx, int parent_fd, std::string_view name,
                        ReplyBody& body) {
  ASSIGN_OR_RETURN(UniqueFd fd, LookupBeneath(parent_fd, name));
  ASSIGN_OR_RETURN(struct stat st, StatFd(fd.get()));
  ASSIGN_OR_RETURN(EntryIds ids, AddNode(ctx, std::move(fd), st));
  body.Put(ToEntryOut(ids.nodeid, ids.generation, st, ctx.times));
  return absl::OkStatus();
}

absl::Status CheckOpenable(const Node& node) {
  switch (node.type) {
    case S_IFREG:
      return absl::OkStatus();
    case S_IFDIR:
      return ErrnoError(EISDIR, "open of a directory");
    case S_IFLNK:
      return ErrnoError(ELOOP, "open of a symlink");
    default:
      return ErrnoError(ENXIO, "open of a special file");
  }
}

absl::StatusOr<UniqueFd> OpenNode(const Node& node, bool directory, int flags) {
  if (directory) {
    if (node.type != S_IFDIR) return ErrnoError(ENOTDIR, "opendir of a non-directory");
    return Reopen(node.fd.get(), O_RDONLY | O_DIRECTORY);
  }
  RETURN_IF_ERROR(CheckOpenable(node));
  return Reopen(node.fd.get(), flags);
}

mode_t RequestedMode(const OpContext& ctx, mode_t mode) {
  return ctx.anonymous ? (mode & ~static_cast<mode_t>(S_ISUID | S_ISGID)) : mode;
}

}  // namespace ringfs::server

namespace ringfs::server {

absl::Status KillSuidSgid(int fd) {
  ASSIGN_OR_RETURN(struct stat st, StatFd(fd));
  if (!S_ISREG(st.st_mode)) return absl::OkStatus();
  const mode_t mode = st.st_mode & 07777;
  mode_t killed = mode & ~S_ISUID;
  if ((mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP)) killed &= ~S_ISGID;
  if (killed == mode) return absl::OkStatus();
  ServerCredsScope as_server;
  if (ChmodFd(fd, killed) != 0) return ErrnoError(errno, "chmod (kill suid/sgid)");
  return absl::OkStatus();
}

}  // namespace ringfs::server
