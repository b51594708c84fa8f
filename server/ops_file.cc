// File operations: OPEN, CREATE, READ, WRITE, FSYNC(DIR), RELEASE(DIR), FLUSH, INTERRUPT,
// FALLOCATE, LSEEK, COPY_FILE_RANGE(_64). READ, large WRITEs and FSYNC only prepare an AsyncIo
// (in floor mode READ and WRITE are answered at once, see Executor::Options).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/status.h"
#include "server/executor.h"
#include "server/export_fs.h"
#include "server/ops_util.h"
#include "server/thread_creds.h"

namespace ringfs::server {
namespace {

// One COPY_FILE_RANGE copies at most this much; the caller loops on a short count, and the worker
// is not held up by one huge copy.
constexpr uint64_t kMaxCopyChunk = 64ull << 20;

absl::StatusOr<HandleRef> FileHandle(const OpContext& ctx, uint64_t fh) {
  ASSIGN_OR_RETURN(HandleRef handle, GetHandle(ctx, fh));
  if (handle->is_dir) return ErrnoError(EISDIR, "file operation on a directory handle");
  return handle;
}

// Opens `name`, creating it unless it exists; with `exclusive` an existing name is EEXIST.
// `created` tells whether this call made the file (only then is it given to the caller).
absl::StatusOr<UniqueFd> OpenOrCreate(int parent_fd, std::string_view name, int flags,
                                      mode_t mode, bool exclusive, bool* created) {
  flags &= ~(O_CREAT | O_EXCL | O_NOFOLLOW | O_DIRECT | O_NONBLOCK);  // see Reopen()
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto fd = OpenBeneath(parent_fd, name, flags | O_CREAT | O_EXCL, mode & 07777);
    if (fd.ok()) {
      *created = true;
      return fd;
    }
    if (exclusive || ToErrno(fd.status()) != EEXIST) return fd.status();
    // It exists: open it, but only if it is a regular file (never a FIFO, never a symlink).
    auto path_fd = LookupBeneath(parent_fd, name);
    if (!path_fd.ok()) {
      if (ToErrno(path_fd.status()) == ENOENT) continue;  // removed meanwhile: create again
      return path_fd.status();
    }
    ASSIGN_OR_RETURN(struct stat st, StatFd(path_fd->get()));
    Node probe;
    probe.type = st.st_mode & S_IFMT;
    RETURN_IF_ERROR(CheckOpenable(probe));
    *created = false;
    return Reopen(path_fd->get(), flags);
  }
  return ErrnoError(EAGAIN, "create raced with concurrent changes");
}

// Writes up to this size run as a plain pwrite in the worker. ext4 (like most local
// filesystems) cannot do a buffered write without blocking, so io_uring hands every buffered
// write to an io-wq thread; for a small write that thread hop costs more than the copy into the
// page cache. Measured through a mount, fio 4 KiB randwrite direct=1: psync QD1 9,700 -> 13,700
// IOPS, io_uring QD16 33,600 -> 53,000. Large writes still go through io_uring so one request
// cannot hold the worker for long.
constexpr size_t kInlineWriteBytes = 128 * 1024;

// Floor mode: the reply a READ would get if the file held only zeros.
Outcome FloorRead(const Handle& handle, const ReadArgs& a, ReplyBody& body) {
  auto st = StatFd(handle.fd.get());
  if (!st.ok()) return Outcome{st.status(), std::nullopt};
  const uint64_t file_size = static_cast<uint64_t>(st->st_size);
  uint64_t n = a.offset >= file_size ? 0 : std::min<uint64_t>(a.size, file_size - a.offset);
  n = std::min<uint64_t>(n, body.capacity());
  std::memset(body.data(), 0, n);
  body.set_size(n);
  return Outcome{absl::OkStatus(), std::nullopt};
}

}  // namespace

absl::Status Executor::Run(const OpContext& ctx, const OpenArgs& a, ReplyBody& body) const {
  ASSIGN_OR_RETURN(NodeRef node, GetNode(ctx, ctx.nodeid));
  RETURN_IF_ERROR(ctx.client->handles.CheckRoom());
  ASSIGN_OR_RETURN(UniqueFd fd, OpenNode(*node, /*directory=*/false, static_cast<int>(a.flags)));
  if (a.open_flags & FUSE_OPEN_KILL_SUIDGID) RETURN_IF_ERROR(KillSuidSgid(fd.get()));
  fuse_open_out out{};
  out.fh = ctx.client->handles.Add(std::make_shared<Handle>(std::move(fd), node->id, false));
  out.open_flags = 0;  // no FOPEN_KEEP_CACHE: other clients may change the file
  body.Put(out);
  return absl::OkStatus();
}

absl::Status Executor::Run(const OpContext& ctx, const CreateArgs& a, ReplyBody& body) const {
  ASSIGN_OR_RETURN(NodeRef parent, GetNode(ctx, ctx.nodeid));
  RETURN_IF_ERROR(ctx.client->handles.CheckRoom());  // before the file exists: nothing to undo
  const int parent_fd = parent->fd.get();
  bool created = false;
  ASSIGN_OR_RETURN(UniqueFd fd,
                   OpenOrCreate(parent_fd, a.name, static_cast<int>(a.flags),
                                RequestedMode(ctx, a.mode), (a.flags & O_EXCL) != 0, &created));
  auto finish = [&]() -> absl::StatusOr<fuse_entry_out> {
    // An existing file truncated by O_TRUNC.
    if (!created && (a.open_flags & FUSE_OPEN_KILL_SUIDGID)) RETURN_IF_ERROR(KillSuidSgid(fd.get()));
    ASSIGN_OR_RETURN(UniqueFd path_fd, PathFdOf(fd.get()));
    ASSIGN_OR_RETURN(struct stat st, StatFd(fd.get()));
    // An existing file opened, not made (the caller's kernel thought the name absent): a
    // truncation or a cleared set-id bit is a change the other clients holding it must see, as
    // after an OPEN with O_TRUNC (ChangesOf only knows the request's name).
    if (!created && (a.flags & O_TRUNC)) {
      NoteChangedFile(ctx, InodeKey{st.st_dev, st.st_ino}, /*data_from=*/0);
    } else if (!created && (a.open_flags & FUSE_OPEN_KILL_SUIDGID)) {
      NoteChangedFile(ctx, InodeKey{st.st_dev, st.st_ino});
    }
    ASSIGN_OR_RETURN(EntryIds ids, AddNode(ctx, std::move(path_fd), st));
    return ToEntryOut(ids.nodeid, ids.generation, st, ctx.times);
  };
  absl::StatusOr<fuse_entry_out> entry = finish();
  if (!entry.ok()) {
    if (created) unlinkat(parent_fd, NameBuffer(a.name).c_str(), 0);
    return entry.status();
  }
  fuse_open_out open{};
  open.fh = ctx.client->handles.Add(std::make_shared<Handle>(std::move(fd), entry->nodeid, false));
  body.Put(*entry);
  body.Put(open);
  return absl::OkStatus();
}

Outcome Executor::Run(const OpContext& ctx, const ReadArgs& a, ReplyBody& body) const {
  auto handle = FileHandle(ctx, a.fh);
  if (!handle.ok()) return Outcome{handle.status(), std::nullopt};
  if (options_.floor) return FloorRead(**handle, a, body);
  AsyncIo io;
  io.kind = AsyncIo::Kind::kRead;
  io.handle = *std::move(handle);
  io.offset = a.offset;
  io.length = a.size;
  return Outcome{absl::OkStatus(), std::move(io)};
}

Outcome Executor::Run(const OpContext& ctx, const WriteArgs& a, ReplyBody& body) const {
  auto handle = FileHandle(ctx, a.fh);
  if (!handle.ok()) return Outcome{handle.status(), std::nullopt};
  if (options_.floor) {
    fuse_write_out out{};
    out.size = static_cast<uint32_t>(a.data.size());
    body.Put(out);
    return Outcome{absl::OkStatus(), std::nullopt};
  }
  if (a.write_flags & FUSE_WRITE_KILL_SUIDGID) {
    if (absl::Status killed = KillSuidSgid((*handle)->fd.get()); !killed.ok()) {
      return Outcome{killed, std::nullopt};
    }
  }
  // A write the caller made synchronous (RWF_DSYNC/RWF_SYNC, or a file opened O_DSYNC/O_SYNC)
  // arrives with those bits in `flags`. Through the page cache the client kernel follows such a
  // write with an FSYNC; with FOPEN_DIRECT_IO (ringfs-mount's write-only opens) it does not, and
  // relies on the server to make the write durable itself.
  const int rw_flags = (a.flags & (O_SYNC & ~O_DSYNC)) != 0 ? RWF_SYNC
                       : (a.flags & O_DSYNC) != 0          ? RWF_DSYNC
                                                           : 0;
  if (a.data.size() <= kInlineWriteBytes) {
    // With the server's credentials, as the ring's writes: which set-id bits a write clears is
    // the client kernel's decision (FUSE_WRITE_KILL_SUIDGID above), not whichever caller this
    // thread last acted as. Free when it acts as root (a caller or itself); two capsets and
    // setfsuids otherwise.
    ServerCredsScope as_server;
    const iovec part{const_cast<char*>(a.data.data()), a.data.size()};
    ssize_t n = pwritev2((*handle)->fd.get(), &part, 1, static_cast<off_t>(a.offset), rw_flags);
    if (n < 0) return Outcome{ErrnoError(errno, "pwrite"), std::nullopt};
    fuse_write_out out{};
    out.size = static_cast<uint32_t>(n);
    body.Put(out);
    return Outcome{absl::OkStatus(), std::nullopt};
  }
  AsyncIo io;
  io.kind = AsyncIo::Kind::kWrite;
  io.handle = *std::move(handle);
  io.offset = a.offset;
  io.length = static_cast<uint32_t>(a.data.size());
  io.write_data = a.data.data();
  io.write_rw_flags = rw_flags;
  return Outcome{absl::OkStatus(), std::move(io)};
}

Outcome Executor::Run(const OpContext& ctx, const FsyncArgs& a, ReplyBody&) const {
  // FSYNCDIR of a handle-less listing's directory (fh 0, ops_dir.cc): a handle just for it.
  auto handle = a.dir && a.fh == 0 ? DirHandleFor(ctx) : GetHandle(ctx, a.fh);
  if (!handle.ok()) return Outcome{handle.status(), std::nullopt};
  if ((*handle)->is_dir != a.dir) {
    return Outcome{ErrnoError(a.dir ? ENOTDIR : EISDIR, "fsync handle kind"), std::nullopt};
  }
  AsyncIo io;
  io.kind = AsyncIo::Kind::kFsync;
  io.handle = *std::move(handle);
  io.datasync = a.datasync;
  return Outcome{absl::OkStatus(), std::move(io)};
}

absl::Status Executor::CompleteIo(const AsyncIo& io, int result, ReplyBody& body) {
  if (result < 0) return ErrnoError(-result, "file I/O");
  switch (io.kind) {
    case AsyncIo::Kind::kRead:
      body.set_size(static_cast<size_t>(result));
      break;
    case AsyncIo::Kind::kWrite: {
      fuse_write_out out{};
      out.size = static_cast<uint32_t>(result);
      body.Put(out);
      break;
    }
    case AsyncIo::Kind::kFsync:
      break;
  }
  return absl::OkStatus();
}

absl::Status Executor::Run(const OpContext& ctx, const ReleaseArgs& a, ReplyBody&) const {
  return ctx.client->handles.Remove(a.fh);
}

// Nothing is buffered at the server, so FLUSH only checks the handle; close-time errors of
// network filesystems below the export are not reported here.
absl::Status Executor::Run(const OpContext& ctx, const FlushArgs& a, ReplyBody&) const {
  return GetHandle(ctx, a.fh).status();
}

// Every request runs to completion quickly or is file I/O already queued in the kernel; there is
// nothing to interrupt, and INTERRUPT has no reply.
absl::Status Executor::Run(const OpContext&, const InterruptArgs&, ReplyBody&) const {
  return absl::OkStatus();
}

absl::Status Executor::Run(const OpContext& ctx, const FallocateArgs& a, ReplyBody&) const {
  ASSIGN_OR_RETURN(HandleRef handle, FileHandle(ctx, a.fh));
  if (fallocate(handle->fd.get(), static_cast<int>(a.mode), static_cast<off_t>(a.offset),
                static_cast<off_t>(a.length)) != 0) {
    return ErrnoError(errno, "fallocate");
  }
  return absl::OkStatus();
}

absl::Status Executor::Run(const OpContext& ctx, const LseekArgs& a, ReplyBody& body) const {
  ASSIGN_OR_RETURN(HandleRef handle, FileHandle(ctx, a.fh));
  off_t pos = lseek(handle->fd.get(), static_cast<off_t>(a.offset), static_cast<int>(a.whence));
  if (pos < 0) return ErrnoError(errno, "lseek");
  fuse_lseek_out out{};
  out.offset = static_cast<uint64_t>(pos);
  body.Put(out);
  return absl::OkStatus();
}

absl::Status Executor::Run(const OpContext& ctx, const CopyFileRangeArgs& a,
                           ReplyBody& body) const {
  ASSIGN_OR_RETURN(HandleRef in, FileHandle(ctx, a.fh_in));
  ASSIGN_OR_RETURN(HandleRef out, FileHandle(ctx, a.fh_out));
  if (a.flags != 0) return ErrnoError(EINVAL, "copy_file_range flags");
  uint64_t len = std::min(a.len, kMaxCopyChunk);
  loff_t off_in = static_cast<loff_t>(a.off_in);
  loff_t off_out = static_cast<loff_t>(a.off_out);
  ssize_t n = copy_file_range(in->fd.get(), &off_in, out->fd.get(), &off_out, len, 0);
  if (n < 0) return ErrnoError(errno, "copy_file_range");
  if (a.wide) {
    fuse::CopyFileRangeOut reply{static_cast<uint64_t>(n)};
    body.Put(reply);
  } else {
    fuse_write_out reply{};
    reply.size = static_cast<uint32_t>(n);
    body.Put(reply);
  }
  return absl::OkStatus();
}

}  // namespace ringfs::server
