#include "server/request.h"

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_format.h"
#include "common/fuse_ops.h"
#include "common/status.h"
#include "common/wire.h"

namespace ringfs::server {
namespace {

// Reads the bytes that follow the opcode struct, front to back.
class Cursor {
 public:
  explicit Cursor(std::span<const char> bytes) : bytes_(bytes) {}
  size_t remaining() const { return bytes_.size(); }
  std::span<const char> Rest() const { return bytes_; }
  // True after a string or name was refused (the frames-rejected reason "bad_name").
  bool string_refused() const { return string_refused_; }

  // A NUL-terminated string inside the frame; returns it without the NUL.
  absl::StatusOr<std::string_view> TakeCString(std::string_view what) {
    string_refused_ = true;  // until it is taken
    const void* nul = std::memchr(bytes_.data(), '\0', bytes_.size());
    if (nul == nullptr) return ErrnoError(EINVAL, absl::StrFormat("%s is not NUL-terminated", what));
    size_t n = static_cast<const char*>(nul) - bytes_.data();
    std::string_view s(bytes_.data(), n);
    bytes_ = bytes_.subspan(n + 1);
    string_refused_ = false;
    return s;
  }

  // One path component: not empty, not "." or "..", no '/', at most NAME_MAX bytes.
  absl::StatusOr<std::string_view> TakeName() {
    auto name = TakeCString("name");
    if (!name.ok()) return name.status();
    string_refused_ = true;
    if (name->empty()) return ErrnoError(EINVAL, "empty name");
    if (name->size() > kMaxNameBytes) return ErrnoError(ENAMETOOLONG, "name too long");
    if (*name == "." || *name == "..") return ErrnoError(EINVAL, "name is . or ..");
    if (name->find('/') != std::string_view::npos) return ErrnoError(EINVAL, "name contains /");
    string_refused_ = false;
    return name;
  }

  absl::StatusOr<std::string_view> TakeXattrName() {
    auto name = TakeCString("xattr name");
    if (!name.ok()) return name.status();
    string_refused_ = true;
    if (name->empty()) return ErrnoError(EINVAL, "empty xattr name");
    if (name->size() > kMaxXattrNameBytes) return ErrnoError(ERANGE, "xattr name too long");
    string_refused_ = false;
    return name;
  }

 private:
  std::span<const char> bytes_;
  bool string_refused_ = false;
};

template <typename T>
T Load(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

// The opcode's argument struct as the table sizes it: never reads past those bytes, and fields
// beyond them read as zero.
class OpStruct {
 public:
  explicit OpStruct(std::span<const char> bytes) : bytes_(bytes) {}
  template <typename T>
  T As() const {
    T value{};
    std::memcpy(&value, bytes_.data(), std::min(sizeof(T), bytes_.size()));
    return value;
  }

 private:
  std::span<const char> bytes_;
};

absl::StatusOr<RequestArgs> DecodeArgs(uint32_t opcode, const OpStruct& op, Cursor& rest) {
  switch (opcode) {
    case FUSE_LOOKUP: {
      ASSIGN_OR_RETURN(auto name, rest.TakeName());
      return LookupArgs{name};
    }
    case FUSE_FORGET:
      return ForgetArgs{op.As<fuse_forget_in>().nlookup};
    case FUSE_BATCH_FORGET: {
      auto in = op.As<fuse_batch_forget_in>();
      if (uint64_t{in.count} * sizeof(fuse_forget_one) > rest.remaining()) {
        return ErrnoError(EINVAL, "BATCH_FORGET count exceeds the frame");
      }
      return BatchForgetArgs{rest.Rest().data(), in.count};
    }
    case FUSE_GETATTR: {
      auto in = op.As<fuse_getattr_in>();
      return GetattrArgs{in.getattr_flags, in.fh};
    }
    case FUSE_SETATTR:
      return SetattrArgs{op.As<fuse_setattr_in>()};
    case FUSE_READLINK:
      return ReadlinkArgs{};
    case FUSE_SYMLINK: {
      ASSIGN_OR_RETURN(auto name, rest.TakeName());
      ASSIGN_OR_RETURN(auto target, rest.TakeCString("symlink target"));
      if (target.empty()) return ErrnoError(ENOENT, "empty symlink target");
      if (target.size() > kMaxSymlinkTarget) return ErrnoError(ENAMETOOLONG, "target too long");
      return SymlinkArgs{name, target};
    }
    case FUSE_MKNOD: {
      auto in = op.As<fuse_mknod_in>();
      ASSIGN_OR_RETURN(auto name, rest.TakeName());
      return MknodArgs{in.mode, in.rdev, name};
    }
    case FUSE_MKDIR: {
      auto in = op.As<fuse_mkdir_in>();
      ASSIGN_OR_RETURN(auto name, rest.TakeName());
      return MkdirArgs{in.mode, name};
    }
    case FUSE_UNLINK: {
      ASSIGN_OR_RETURN(auto name, rest.TakeName());
      return UnlinkArgs{name};
    }
    case FUSE_RMDIR: {
      ASSIGN_OR_RETURN(auto name, rest.TakeName());
      return RmdirArgs{name};
    }
    case FUSE_RENAME:
    case FUSE_RENAME2: {
      RenameArgs args{};
      if (opcode == FUSE_RENAME) {
        args.newdir = op.As<fuse_rename_in>().newdir;
      } else {
        auto in = op.As<fuse_rename2_in>();
        args.newdir = in.newdir;
        args.flags = in.flags;
      }
      ASSIGN_OR_RETURN(args.oldname, rest.TakeName());
      ASSIGN_OR_RETURN(args.newname, rest.TakeName());
      return args;
    }
    case FUSE_LINK: {
      auto in = op.As<fuse_link_in>();
      ASSIGN_OR_RETURN(auto name, rest.TakeName());
      return LinkArgs{in.oldnodeid, name};
    }
    case FUSE_OPEN: {
      auto in = op.As<fuse_open_in>();
      return OpenArgs{in.flags, in.open_flags};
    }
    case FUSE_OPENDIR:
      return OpendirArgs{op.As<fuse_open_in>().flags};
    case FUSE_READ:
    case FUSE_READDIR:
    case FUSE_READDIRPLUS: {
      auto in = op.As<fuse_read_in>();
      if (in.size > wire::kMaxIoBytes) return ErrnoError(E2BIG, "read size above the wire limit");
      if (opcode == FUSE_READ) return ReadArgs{in.fh, in.offset, in.size};
      return ReaddirArgs{in.fh, in.offset, in.size, opcode == FUSE_READDIRPLUS};
    }
    case FUSE_WRITE: {
      auto in = op.As<fuse_write_in>();
      if (in.size > wire::kMaxIoBytes) return ErrnoError(E2BIG, "write size above the wire limit");
      if (rest.remaining() != in.size) return ErrnoError(EINVAL, "write payload != write_in.size");
      return WriteArgs{in.fh, in.offset, in.write_flags, in.flags, rest.Rest()};
    }
    case FUSE_STATFS:
      return StatfsArgs{};
    case FUSE_RELEASE:
    case FUSE_RELEASEDIR:
      return ReleaseArgs{op.As<fuse_release_in>().fh, opcode == FUSE_RELEASEDIR};
    case FUSE_FSYNC:
    case FUSE_FSYNCDIR: {
      auto in = op.As<fuse_fsync_in>();
      return FsyncArgs{in.fh, (in.fsync_flags & 1) != 0, opcode == FUSE_FSYNCDIR};
    }
    case FUSE_SETXATTR: {
      // Only `size` and `flags` are read: they are the whole struct without FUSE_SETXATTR_EXT
      // (8 bytes, what the kernel sends then) and the start of the extended one (16 bytes, what
      // the opcode table says); setxattr_flags only matter with SETXATTR_EXT.
      auto in = op.As<fuse_setxattr_in>();
      in.setxattr_flags = 0;
      if (in.size > kMaxXattrValue) return ErrnoError(E2BIG, "xattr value too large");
      ASSIGN_OR_RETURN(auto name, rest.TakeXattrName());
      if (rest.remaining() != in.size) return ErrnoError(EINVAL, "xattr value size mismatch");
      return SetxattrArgs{in.flags, name, rest.Rest()};
    }
    case FUSE_GETXATTR: {
      auto in = op.As<fuse_getxattr_in>();
      if (in.size > kMaxXattrValue) return ErrnoError(E2BIG, "xattr buffer too large");
      ASSIGN_OR_RETURN(auto name, rest.TakeXattrName());
      return GetxattrArgs{in.size, name};
    }
    case FUSE_LISTXATTR: {
      auto in = op.As<fuse_getxattr_in>();
      if (in.size > kMaxXattrValue) return ErrnoError(E2BIG, "xattr list buffer too large");
      return ListxattrArgs{in.size};
    }
    case FUSE_REMOVEXATTR: {
      ASSIGN_OR_RETURN(auto name, rest.TakeXattrName());
      return RemovexattrArgs{name};
    }
    case FUSE_FLUSH:
      return FlushArgs{op.As<fuse_flush_in>().fh};
    case FUSE_ACCESS:
      return AccessArgs{op.As<fuse_access_in>().mask};
    case FUSE_CREATE: {
      auto in = op.As<fuse_create_in>();
      ASSIGN_OR_RETURN(auto name, rest.TakeName());
      return CreateArgs{in.flags, in.mode, in.open_flags, name};
    }
    case FUSE_INTERRUPT:
      return InterruptArgs{};
    case FUSE_FALLOCATE: {
      auto in = op.As<fuse_fallocate_in>();
      return FallocateArgs{in.fh, in.offset, in.length, in.mode};
    }
    case FUSE_LSEEK: {
      auto in = op.As<fuse_lseek_in>();
      return LseekArgs{in.fh, in.offset, in.whence};
    }
    case FUSE_COPY_FILE_RANGE:
    case fuse::kOpCopyFileRange64: {
      auto in = op.As<fuse_copy_file_range_in>();
      return CopyFileRangeArgs{in.fh_in,  in.off_in, in.nodeid_out, in.fh_out,
                               in.off_out, in.len,   in.flags,      opcode != FUSE_COPY_FILE_RANGE};
    }
    default:
      return ErrnoError(ENOSYS, "opcode not implemented");
  }
}

// kOpReclaimNodes / kOpReopenHandles: a ReclaimBatch, then exactly `count` records of `Record`
// (at most `max`). Anything else is a malformed batch: EINVAL for the whole frame.
template <typename Args, typename Record>
absl::StatusOr<RequestArgs> DecodeBatch(std::span<const char> body, uint32_t max,
                                        uint32_t* count) {
  if (body.size() < sizeof(wire::ReclaimBatch)) return ErrnoError(EINVAL, "reclaim batch truncated");
  const auto batch = Load<wire::ReclaimBatch>(body.data());
  if (batch.count > max) return ErrnoError(EINVAL, "reclaim batch above the per-frame maximum");
  const size_t records = body.size() - sizeof(wire::ReclaimBatch);
  if (size_t{batch.count} * sizeof(Record) != records) {
    return ErrnoError(EINVAL, "reclaim batch count disagrees with the frame size");
  }
  *count = batch.count;
  return Args{body.data() + sizeof(wire::ReclaimBatch), batch.count};
}

// The private reclaim opcodes, outside the FUSE table.
absl::StatusOr<RequestArgs> DecodeReclaim(uint32_t opcode, std::span<const char> body,
                                          uint32_t* count) {
  if (opcode == wire::kOpReclaimNodes) {
    return DecodeBatch<ReclaimNodesArgs, wire::ReclaimNodeRecord>(
        body, wire::kMaxReclaimNodesPerFrame, count);
  }
  return DecodeBatch<ReopenHandlesArgs, wire::ReopenRecord>(body, wire::kMaxReopenPerFrame, count);
}

// The host takes offsets as off_t/loff_t, where a value above INT64_MAX is negative; io_uring
// even reads or writes at the fd's current position for an offset of -1 (a READ at -1 answered
// with data). Refused here as pread(2) refuses a negative offset. LSEEK is left to the host:
// the kernel sends it only for SEEK_DATA/SEEK_HOLE, where lseek(2) itself answers a negative
// offset (ENXIO), as on a local file.
absl::Status CheckOffsets(const RequestArgs& args) {
  auto negative = [](uint64_t value) {
    return value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  };
  bool bad = false;
  if (const auto* a = std::get_if<ReadArgs>(&args)) bad = negative(a->offset);
  if (const auto* a = std::get_if<WriteArgs>(&args)) bad = negative(a->offset);
  if (const auto* a = std::get_if<FallocateArgs>(&args)) {
    bad = negative(a->offset) || negative(a->length);
  }
  if (const auto* a = std::get_if<CopyFileRangeArgs>(&args)) {
    bad = negative(a->off_in) || negative(a->off_out);
  }
  if (bad) return ErrnoError(EINVAL, "negative file offset");
  return absl::OkStatus();
}

}  // namespace

std::string_view RejectReasonName(RejectReason reason) {
  switch (reason) {
    case RejectReason::kBadLength:
      return "bad_length";
    case RejectReason::kBadHeader:
      return "bad_header";
    case RejectReason::kUnknownOpcode:
      return "unknown_opcode";
    case RejectReason::kUnsupportedOpcode:
      return "unsupported_opcode";
    case RejectReason::kTruncated:
      return "truncated";
    case RejectReason::kBadName:
      return "bad_name";
    case RejectReason::kTooLarge:
      return "too_large";
    case RejectReason::kBadSize:
      return "bad_size";
    case RejectReason::kBadOffset:
      return "bad_offset";
    case RejectReason::kCount:
      break;
  }
  return "other";
}

fuse_forget_one BatchForgetArgs::Entry(uint32_t i) const {
  return Load<fuse_forget_one>(entries + size_t{i} * sizeof(fuse_forget_one));
}

wire::ReclaimNodeRecord ReclaimNodesArgs::Record(uint32_t i) const {
  return Load<wire::ReclaimNodeRecord>(records + size_t{i} * sizeof(wire::ReclaimNodeRecord));
}

wire::ReopenRecord ReopenHandlesArgs::Record(uint32_t i) const {
  return Load<wire::ReopenRecord>(records + size_t{i} * sizeof(wire::ReopenRecord));
}

FrameHeader PeekHeader(std::span<const char> frame) {
  auto in = Load<fuse_in_header>(frame.data());
  return FrameHeader{in.len, in.opcode, in.unique};
}

bool IsNoReplyOpcode(uint32_t opcode) {
  return opcode == FUSE_FORGET || opcode == FUSE_BATCH_FORGET || opcode == FUSE_INTERRUPT;
}

bool ShouldCloseConnection(const absl::Status& status) {
  return status.code() == absl::StatusCode::kDataLoss;
}

absl::StatusOr<Request> DecodeRequest(std::span<const char> frame, RejectReason* reason) {
  RejectReason ignored;
  if (reason == nullptr) reason = &ignored;
  *reason = RejectReason::kBadHeader;
  if (frame.size() < sizeof(fuse_in_header)) return absl::DataLossError("frame shorter than header");
  auto header = Load<fuse_in_header>(frame.data());
  if (header.len != frame.size()) return absl::DataLossError("header len differs from frame size");
  if (header.unique == 0) return absl::DataLossError("request with unique 0");

  Request request;
  request.opcode = header.opcode;
  request.unique = header.unique;
  request.nodeid = header.nodeid;
  request.uid = header.uid;
  request.gid = header.gid;
  request.pid = header.pid;
  request.expects_reply = !IsNoReplyOpcode(header.opcode);
  if (header.opcode == wire::kOpReclaimNodes || header.opcode == wire::kOpReopenHandles) {
    uint32_t count = 0;
    absl::StatusOr<RequestArgs> batch =
        DecodeReclaim(header.opcode, frame.subspan(sizeof(fuse_in_header)), &count);
    if (!batch.ok()) {
      *reason = RejectReason::kBadSize;
      return batch.status();
    }
    request.reply_capacity = size_t{count} * sizeof(int32_t);  // one result per record
    request.args = *std::move(batch);
    return request;
  }
  std::optional<fuse::OpInfo> op = fuse::LookupOp(header.opcode);
  if (!op || !op->forwarded) {
    *reason = op ? RejectReason::kUnsupportedOpcode : RejectReason::kUnknownOpcode;
    return ErrnoError(ENOSYS, absl::StrFormat("opcode %u not served", header.opcode));
  }
  std::span<const char> body = frame.subspan(sizeof(fuse_in_header));
  if (body.size() < op->in_struct_size) {
    *reason = RejectReason::kTruncated;
    return ErrnoError(EINVAL, absl::StrFormat("%s argument struct truncated", op->name));
  }
  Cursor rest(body.subspan(op->in_struct_size));
  OpStruct op_struct(body.first(op->in_struct_size));
  absl::StatusOr<RequestArgs> decoded = DecodeArgs(header.opcode, op_struct, rest);
  if (!decoded.ok()) {
    const int err = ToErrno(decoded.status());
    if (rest.string_refused() || err == ENAMETOOLONG || err == ENOENT) {  // ENOENT: empty target
      *reason = RejectReason::kBadName;
    } else if (err == E2BIG) {
      *reason = RejectReason::kTooLarge;
    } else if (err == ENOSYS) {
      *reason = RejectReason::kUnsupportedOpcode;
    } else {
      *reason = RejectReason::kBadSize;
    }
    return decoded.status();
  }
  RequestArgs args = *std::move(decoded);
  if (absl::Status offsets = CheckOffsets(args); !offsets.ok()) {
    *reason = RejectReason::kBadOffset;
    return offsets;
  }

  fuse::ReplyBounds bounds = fuse::SuccessReplyBounds(header.opcode, body.data(), op->in_struct_size);
  request.reply_capacity = bounds.expected ? bounds.max : 0;
  if (header.opcode == FUSE_READLINK) request.reply_capacity = fuse::kMaxReadlinkReply + 1;
  request.args = std::move(args);
  return request;
}

}  // namespace ringfs::server
