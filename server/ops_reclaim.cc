// Reclaim after a reconnect (common/node_handle.h, proto/wire_format.md "Reclaim"):
// kOpReclaimNodes gives the node ids of an older instance back to the files their sealed handles
// name, kOpReopenHandles opens those nodes again under the old fh. Each record is answered on
// its own (0 or -errno, in request order); only a connection without node handles gets an error
// for the whole frame (ENOSYS). One batch costs a few syscalls per record, like READDIRPLUS.
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "common/status.h"
#include "proto/fuse_abi.h"
#include "server/executor.h"
#include "server/export_fs.h"
#include "server/handle_node_table.h"
#include "server/ops_util.h"

namespace ringfs::server {
namespace {

using InodeKey = std::pair<uint64_t, uint64_t>;  // (st_dev, st_ino)
using ExportRoot = HandleNodeTable::ExportRoot;

// Deeper directories are refused rather than walked (a directory tree this deep is already
// beyond what PATH_MAX lets a client reach).
constexpr int kMaxWalkUp = 4096;

// Whether directory `fd` lies under the export root: walks ".." until the root (inside), a
// directory already proven inside by an earlier record of the batch (inside), or a directory
// that is its own parent, another st_dev, or kMaxWalkUp steps (outside). Every directory on a
// path proven inside is added to `inside`, so a batch walks each directory once.
absl::Status CheckDirInExport(int fd, const struct stat& st, const ExportRoot& root,
                              absl::flat_hash_set<InodeKey>& inside) {
  std::vector<InodeKey> walked;
  UniqueFd parent;
  int cur = fd;
  struct stat cur_st = st;
  for (int step = 0; step < kMaxWalkUp; ++step) {
    const InodeKey key{cur_st.st_dev, cur_st.st_ino};
    if ((cur_st.st_dev == root.dev && cur_st.st_ino == root.ino) || inside.contains(key)) {
      inside.insert(walked.begin(), walked.end());
      return absl::OkStatus();
    }
    if (cur_st.st_dev != root.dev) return ErrnoError(ESTALE, "directory outside the export");
    walked.push_back(key);
    UniqueFd up(openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!up.valid()) return ErrnoError(ESTALE, "directory's parent is gone");
    ASSIGN_OR_RETURN(struct stat up_st, StatFd(up.get()));
    if (up_st.st_dev == cur_st.st_dev && up_st.st_ino == cur_st.st_ino) {
      return ErrnoError(ESTALE, "directory outside the export");  // reached a root
    }
    parent = std::move(up);
    cur = parent.get();
    cur_st = up_st;
  }
  return ErrnoError(ESTALE, "directory too deep to prove it lies inside the export");
}

// Opens the file a verified record names and checks it lies inside the export: on the export's
// filesystem and mount, and for directories below its root. A non-directory has no way up (it
// may have several names, or none), so it is accepted on the export's filesystem and mount: as
// NFS with no_subtree_check, a file moved out of the export after its handle was sealed stays
// reachable through that handle.
absl::StatusOr<UniqueFd> OpenInExport(const ExportRoot& root, const InodeHandle& handle,
                                      struct stat* st, absl::flat_hash_set<InodeKey>& inside) {
  absl::StatusOr<UniqueFd> fd = OpenByHandle(root.mount_fd, handle);
  if (!fd.ok()) {
    const int err = ToErrno(fd.status());
    // Gone, or a handle the filesystem cannot decode: stale either way.
    if (err == ENOENT || err == EINVAL || err == ESTALE) return ErrnoError(ESTALE, "file is gone");
    return fd.status();
  }
  ASSIGN_OR_RETURN(*st, StatFd(fd->get()));
  ASSIGN_OR_RETURN(InodeHandle opened, HandleOf(fd->get()));
  if (st->st_dev != root.dev || opened.mount_id != root.mount_id || !opened.SameFile(handle)) {
    return ErrnoError(ESTALE, "file is not on the export's filesystem and mount");
  }
  if (S_ISDIR(st->st_mode)) RETURN_IF_ERROR(CheckDirInExport(fd->get(), *st, root, inside));
  return fd;
}

absl::Status ReclaimNode(const OpContext& ctx, HandleNodeTable& table,
                         const wire::ReclaimNodeRecord& record,
                         absl::flat_hash_set<InodeKey>& inside) {
  const wire::NodeHandleRecord& sealed = record.handle;
  // Node 1 is the export root on every instance: always valid, never counted.
  if (sealed.nodeid == fuse::kRootNodeId) return absl::OkStatus();
  if (!ctx.node_handles->seal->Verify(sealed)) return ErrnoError(ESTALE, "handle seal is wrong");
  if (sealed.handle_bytes == 0) return ErrnoError(ESTALE, "node without a handle");
  InodeHandle handle = HandleSeal::HandleOf(sealed);
  struct stat st {};
  ASSIGN_OR_RETURN(UniqueFd fd, OpenInExport(table.export_root(), handle, &st, inside));
  return table.Adopt(sealed.nodeid, record.nlookup, std::move(handle), std::move(fd), st);
}

absl::Status ReopenHandle(const OpContext& ctx, const wire::ReopenRecord& record) {
  ASSIGN_OR_RETURN(NodeRef node, GetNode(ctx, record.nodeid));
  const bool directory = record.directory != 0;
  const int flags = static_cast<int>(record.flags) & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOCTTY);
  ASSIGN_OR_RETURN(UniqueFd fd, OpenNode(*node, directory, flags));
  return ctx.client->handles.Adopt(record.fh,
                                   std::make_shared<Handle>(std::move(fd), node->id, directory));
}

// The table to reclaim into, or ENOSYS when the connection did not negotiate node handles.
absl::StatusOr<HandleNodeTable*> ReclaimTable(const OpContext& ctx) {
  HandleNodeTable* table = ctx.client->nodes->AsHandleNodeTable();
  if (ctx.node_handles == nullptr || table == nullptr) {
    return ErrnoError(ENOSYS, "node handles were not negotiated on this connection");
  }
  return table;
}

void PutResult(ReplyBody& body, const absl::Status& status) {
  body.Put(static_cast<int32_t>(status.ok() ? 0 : -ToErrno(status)));
}

}  // namespace

absl::Status Executor::Run(const OpContext& ctx, const ReclaimNodesArgs& a,
                           ReplyBody& body) const {
  ASSIGN_OR_RETURN(HandleNodeTable * table, ReclaimTable(ctx));
  absl::flat_hash_set<InodeKey> inside;
  for (uint32_t i = 0; i < a.count; ++i) PutResult(body, ReclaimNode(ctx, *table, a.Record(i), inside));
  return absl::OkStatus();
}

absl::Status Executor::Run(const OpContext& ctx, const ReopenHandlesArgs& a,
                           ReplyBody& body) const {
  RETURN_IF_ERROR(ReclaimTable(ctx).status());
  for (uint32_t i = 0; i < a.count; ++i) PutResult(body, ReopenHandle(ctx, a.Record(i)));
  return absl::OkStatus();
}

}  // namespace ringfs::server
