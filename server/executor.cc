// Dispatch of decoded requests to the op executors.
//
// Served: LOOKUP FORGET BATCH_FORGET GETATTR SETATTR READLINK SYMLINK MKNOD MKDIR UNLINK RMDIR
//   RENAME RENAME2 LINK OPEN CREATE READ WRITE FLUSH RELEASE FSYNC OPENDIR READDIR READDIRPLUS
//   RELEASEDIR FSYNCDIR STATFS SETXATTR GETXATTR LISTXATTR REMOVEXATTR ACCESS FALLOCATE LSEEK
//   COPY_FILE_RANGE COPY_FILE_RANGE_64 INTERRUPT (ignored, no reply).
// ENOSYS (DecodeRequest refuses them): INIT DESTROY GETLK SETLK SETLKW BMAP IOCTL POLL SYNCFS
//   TMPFILE STATX SETUPMAPPING REMOVEMAPPING NOTIFY_REPLY and every unknown opcode.
#include "server/executor.h"

#include <variant>

namespace ringfs::server {
namespace {

Outcome ToOutcome(absl::Status status) { return Outcome{std::move(status), std::nullopt}; }
Outcome ToOutcome(Outcome outcome) { return outcome; }

}  // namespace

Outcome Executor::Execute(const OpContext& ctx, const Request& request, ReplyBody& body) const {
  return std::visit([&](const auto& args) { return ToOutcome(Run(ctx, args, body)); },
                    request.args);
}

}  // namespace ringfs::server
