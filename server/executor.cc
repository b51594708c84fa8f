// Dispatch of decoded requests to the op executors, after the export's options and the caller's
// identity are applied (Admit).
//
// Served: LOOKUP FORGET BATCH_FORGET GETATTR SETATTR READLINK SYMLINK MKNOD MKDIR UNLINK RMDIR
//   RENAME RENAME2 LINK OPEN CREATE READ WRITE FLUSH RELEASE FSYNC OPENDIR READDIR READDIRPLUS
//   RELEASEDIR FSYNCDIR STATFS SETXATTR GETXATTR LISTXATTR REMOVEXATTR ACCESS FALLOCATE LSEEK
//   COPY_FILE_RANGE COPY_FILE_RANGE_64 INTERRUPT (ignored, no reply).
// ENOSYS (DecodeRequest refuses them): INIT DESTROY GETLK SETLK SETLKW BMAP IOCTL POLL SYNCFS
//   TMPFILE STATX SETUPMAPPING REMOVEMAPPING NOTIFY_REPLY and every unknown opcode.
#include "server/executor.h"

#include <fcntl.h>
#include <unistd.h>

#include <variant>

#include "common/fuse_ops.h"
#include "common/node_handle.h"
#include "common/status.h"
#include "server/caller_identity.h"
#include "server/thread_creds.h"

namespace ringfs::server {
namespace {

Outcome ToOutcome(absl::Status status) { return Outcome{std::move(status), std::nullopt}; }
Outcome ToOutcome(Outcome outcome) { return outcome; }

// Whether `request` would change the export (answered EROFS on a read-only one).
bool Changes(const Request& request) {
  switch (request.opcode) {
    case FUSE_SETATTR: case FUSE_SYMLINK: case FUSE_MKNOD: case FUSE_MKDIR: case FUSE_UNLINK:
    case FUSE_RMDIR: case FUSE_RENAME: case FUSE_RENAME2: case FUSE_LINK: case FUSE_CREATE:
    case FUSE_WRITE: case FUSE_SETXATTR: case FUSE_REMOVEXATTR: case FUSE_FALLOCATE:
    case FUSE_COPY_FILE_RANGE: case fuse::kOpCopyFileRange64:
      return true;
    case FUSE_OPEN: {
      const auto& open = std::get<OpenArgs>(request.args);
      return (open.flags & O_ACCMODE) != O_RDONLY || (open.flags & O_TRUNC) != 0;
    }
    case FUSE_ACCESS:
      return (std::get<AccessArgs>(request.args).mask & W_OK) != 0;
    default:
      return false;
  }
}

// Requests that check no permission on the export: bookkeeping of what the client holds, and
// I/O on files already opened (permission was checked at OPEN). They run as whatever the thread
// acts as, so a stream of READs between one user's LOOKUPs costs no identity switch.
bool ChecksNoPermission(uint32_t opcode) {
  switch (opcode) {
    case FUSE_FORGET: case FUSE_BATCH_FORGET: case FUSE_RELEASE: case FUSE_RELEASEDIR:
    case FUSE_FLUSH: case FUSE_INTERRUPT: case FUSE_READ: case FUSE_WRITE: case FUSE_FSYNC:
    case FUSE_FSYNCDIR: case FUSE_GETATTR: case FUSE_STATFS: case FUSE_LSEEK:
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::Status Executor::Admit(const OpContext& ctx, const Request& request) const {
  if (ctx.export_options == nullptr) return absl::OkStatus();
  if (ctx.export_options->read_only && Changes(request)) {
    return ErrnoError(EROFS, "the export is read-only for this client");
  }
  if (request.opcode == wire::kOpReclaimNodes || request.opcode == wire::kOpReopenHandles) {
    // Re-establishing what the client held before a restart is the server's own business.
    if (options_.act_as_callers) ActAsServer();
    return absl::OkStatus();
  }
  if (ChecksNoPermission(request.opcode)) return absl::OkStatus();
  CallerIdentity who = MapCaller(ctx.uid, ctx.gid, *ctx.export_options, options_.groups);
  ctx.anonymous = who.anonymous;
  if (!options_.act_as_callers) return absl::OkStatus();
  return ActAs(who);
}

Outcome Executor::Execute(const OpContext& ctx, const Request& request, ReplyBody& body) const {
  if (absl::Status admitted = Admit(ctx, request); !admitted.ok()) return ToOutcome(admitted);
  return std::visit([&](const auto& args) { return ToOutcome(Run(ctx, args, body)); },
                    request.args);
}

}  // namespace ringfs::server
