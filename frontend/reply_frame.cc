#include "frontend/reply_frame.h"

#include "common/dir_attrs.h"
#include "common/node_handle.h"
#include "common/wire.h"

namespace ringfs::frontend {

std::optional<size_t> ReplyBodyBytes(const fuse_out_header& header) {
  if (header.len < sizeof(fuse_out_header) ||
      header.len > sizeof(fuse_out_header) + wire::kMaxFrameBytes) {
    return std::nullopt;
  }
  return header.len - sizeof(fuse_out_header);
}

size_t NotificationRecords(const fuse_out_header& header, size_t body, bool node_handles_on) {
  if (!node_handles_on || header.error != wire::kNotifyNodeHandles || body == 0 ||
      body % sizeof(wire::NodeHandleRecord) != 0) {
    return 0;
  }
  return body / sizeof(wire::NodeHandleRecord);
}

long DirAttrTrailerBytes(const PendingReply& expect, size_t body, const TrailerRules& rules) {
  constexpr size_t kRecord = sizeof(wire::DirAttrTrailer);
  if ((rules.listing_attrs && wire::IsListing(expect.opcode)) ||
      (rules.write_attrs && wire::IsWrite(expect.opcode)) ||
      (rules.open_attrs && wire::IsOpen(expect.opcode))) {
    if (body < kRecord || body - kRecord > expect.max_body || body - kRecord < expect.min_body) {
      return -1;
    }
    return static_cast<long>(kRecord);
  }
  if (body >= expect.min_body && body <= expect.max_body) return 0;
  // Only fixed-size replies carry trailers, so the plain body ends at max_body.
  if (!rules.dir_attrs || !wire::CarriesDirAttrs(expect.opcode, rules.empty_dir_hints) ||
      body < expect.max_body) {
    return -1;
  }
  size_t extra = body - expect.max_body;
  const size_t most = expect.opcode == FUSE_LOOKUP ? 1 : wire::kMaxDirAttrTrailers;
  if (extra % kRecord != 0 || extra > most * kRecord) return -1;
  return static_cast<long>(extra);
}

bool ValidReply(const PendingReply& expect, const fuse_out_header& header, size_t body,
                const TrailerRules& rules) {
  if (header.error > 0 || header.error <= -512) return false;
  if (header.error != 0) return body == 0;
  return DirAttrTrailerBytes(expect, body, rules) >= 0 && body <= expect.capacity;
}

}  // namespace ringfs::frontend
