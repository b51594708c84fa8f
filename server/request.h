// The typed form of one FUSE request frame, and DecodeRequest(), the single place where the
// server reads raw request bytes. Everything behind it (executors, worker) uses typed fields.
// A Request holds string_views into the frame: it is valid only while the frame bytes are.
// Stateless functions; callable from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <variant>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/node_handle.h"
#include "proto/fuse_abi.h"

namespace ringfs::server {

// Limits the decoder enforces besides the wire limits in common/wire.h.
inline constexpr size_t kMaxNameBytes = 255;        // one path component (NAME_MAX)
inline constexpr size_t kMaxSymlinkTarget = 4095;   // PATH_MAX - 1
inline constexpr size_t kMaxXattrNameBytes = 255;   // XATTR_NAME_MAX
inline constexpr uint32_t kMaxXattrValue = 65536;   // XATTR_SIZE_MAX

// ---- argument types, one per request shape ----
struct LookupArgs { std::string_view name; };
struct ForgetArgs { uint64_t nlookup; };
struct BatchForgetArgs {
  const char* entries;  // `count` unaligned fuse_forget_one records; read with Entry()
  uint32_t count;
  fuse_forget_one Entry(uint32_t i) const;
};
struct GetattrArgs { uint32_t getattr_flags; uint64_t fh; };
struct SetattrArgs { fuse_setattr_in in; };
struct ReadlinkArgs {};
struct SymlinkArgs { std::string_view name; std::string_view target; };
struct MknodArgs { uint32_t mode; uint32_t rdev; std::string_view name; };
struct MkdirArgs { uint32_t mode; std::string_view name; };
struct UnlinkArgs { std::string_view name; };
struct RmdirArgs { std::string_view name; };
struct RenameArgs {  // RENAME (flags 0) and RENAME2
  uint64_t newdir;
  uint32_t flags;
  std::string_view oldname;
  std::string_view newname;
};
struct LinkArgs { uint64_t oldnodeid; std::string_view name; };
struct OpenArgs { uint32_t flags; uint32_t open_flags; };  // open_flags: FUSE_OPEN_*
struct OpendirArgs { uint32_t flags; };
struct ReadArgs { uint64_t fh; uint64_t offset; uint32_t size; };
struct ReaddirArgs { uint64_t fh; uint64_t offset; uint32_t size; bool plus; };
struct WriteArgs {
  uint64_t fh;
  uint64_t offset;
  uint32_t write_flags;
  uint32_t flags;  // fuse_write_in.flags: the file's flags, plus O_DSYNC/O_SYNC for a sync write
  std::span<const char> data;
};
struct StatfsArgs {};
struct ReleaseArgs { uint64_t fh; bool dir; };
struct FsyncArgs { uint64_t fh; bool datasync; bool dir; };
struct SetxattrArgs {
  uint32_t flags;
  std::string_view name;
  std::span<const char> value;
};
struct GetxattrArgs { uint32_t size; std::string_view name; };
struct ListxattrArgs { uint32_t size; };
struct RemovexattrArgs { std::string_view name; };
struct FlushArgs { uint64_t fh; };
struct AccessArgs { uint32_t mask; };
struct CreateArgs {
  uint32_t flags;
  uint32_t mode;
  uint32_t open_flags;  // FUSE_OPEN_*
  std::string_view name;
};
struct InterruptArgs {};
struct FallocateArgs { uint64_t fh; uint64_t offset; uint64_t length; uint32_t mode; };
struct LseekArgs { uint64_t fh; uint64_t offset; uint32_t whence; };
struct CopyFileRangeArgs {
  uint64_t fh_in;
  uint64_t off_in;
  uint64_t nodeid_out;
  uint64_t fh_out;
  uint64_t off_out;
  uint64_t len;
  uint64_t flags;
  bool wide;  // COPY_FILE_RANGE_64: reply CopyFileRangeOut instead of fuse_write_out
};
// The private reclaim opcodes (common/node_handle.h): `count` unaligned records; read with
// Record(). The decoder checked that they fit the frame and the per-frame maximum.
struct ReclaimNodesArgs {
  const char* records;
  uint32_t count;
  wire::ReclaimNodeRecord Record(uint32_t i) const;
};
struct ReopenHandlesArgs {
  const char* records;
  uint32_t count;
  wire::ReopenRecord Record(uint32_t i) const;
};

using RequestArgs =
    std::variant<LookupArgs, ForgetArgs, BatchForgetArgs, GetattrArgs, SetattrArgs, ReadlinkArgs,
                 SymlinkArgs, MknodArgs, MkdirArgs, UnlinkArgs, RmdirArgs, RenameArgs, LinkArgs,
                 OpenArgs, OpendirArgs, ReadArgs, ReaddirArgs, WriteArgs, StatfsArgs, ReleaseArgs,
                 FsyncArgs, SetxattrArgs, GetxattrArgs, ListxattrArgs, RemovexattrArgs, FlushArgs,
                 AccessArgs, CreateArgs, InterruptArgs, FallocateArgs, LseekArgs,
                 CopyFileRangeArgs, ReclaimNodesArgs, ReopenHandlesArgs>;

struct Request {
  uint32_t opcode = 0;
  uint64_t unique = 0;
  uint64_t nodeid = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t pid = 0;
  bool expects_reply = true;  // false for FORGET, BATCH_FORGET, INTERRUPT
  size_t reply_capacity = 0;  // largest success body this request may get
  RequestArgs args;
};

// Why a frame was refused before reaching an executor. Names are the metric's `reason` label.
enum class RejectReason : uint8_t {
  kBadLength,          // length prefix outside [header, negotiated frame limit]: connection closed
  kBadHeader,          // len != frame size or unique 0: connection closed
  kUnknownOpcode,      // an opcode FUSE does not define (as far as we know)
  kUnsupportedOpcode,  // a FUSE opcode this server does not serve
  kTruncated,          // shorter than the opcode's argument struct
  kBadName,            // a name or string: no NUL, empty, ".", "..", '/', too long
  kTooLarge,           // a size above the wire or xattr limits
  kBadSize,            // sizes inside the frame disagree with each other
  kBadOffset,          // a file offset or length above INT64_MAX (negative as off_t)
  kCount,
};
std::string_view RejectReasonName(RejectReason reason);

// What the worker can learn from a frame before decoding it: enough to answer with an error.
struct FrameHeader {
  uint32_t len = 0;
  uint32_t opcode = 0;
  uint64_t unique = 0;
};
// REQUIRES: frame.size() >= sizeof(fuse_in_header).
FrameHeader PeekHeader(std::span<const char> frame);

// True for opcodes whose requests are never answered.
bool IsNoReplyOpcode(uint32_t opcode);

// Decodes one complete frame. Errors:
//  - DataLoss: the frame cannot be trusted (short header, len != frame size, unique 0):
//    the caller closes the connection (ShouldCloseConnection()).
//  - otherwise an ErrnoError with the errno to answer (ENOSYS, EINVAL, ENAMETOOLONG, E2BIG, ERANGE).
//    READ, WRITE, FALLOCATE and COPY_FILE_RANGE(_64) with an offset (or FALLOCATE length) above
//    INT64_MAX are EINVAL.
// On error, `*reason` (when given) says why, for the frames-rejected metric.
absl::StatusOr<Request> DecodeRequest(std::span<const char> frame, RejectReason* reason = nullptr);

bool ShouldCloseConnection(const absl::Status& status);

}  // namespace ringfs::server
