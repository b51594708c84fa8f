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

long DirAttrTrailerBytes(const PendingReply& expect, size_t body, bool dir_attrs_on,
                         bool empty_dir_hints_on, bool listing_attrs_on) {
  if (listing_attrs_on && wire::IsListing(expect.opcode)) {
    constexpr size_t kRecord = sizeof(wire::DirAttrTrailer);
    if (body < kRecord || body - kRecord > expect.max_body) return -1;
    return static_cast<long>(kRecord);
  }
  if (body >= expect.min_body && body <= expect.max_body) return 0;
  // Only fixed-size replies carry trailers, so the plain body ends at max_body.
  if (!dir_attrs_on || !wire::CarriesDirAttrs(expect.opcode, empty_dir_hints_on) ||
      body < expect.max_body) {
    return -1;
  }
  size_t extra = body - expect.max_body;
  const size_t most = expect.opcode == FUSE_LOOKUP ? 1 : wire::kMaxDirAttrTrailers;
  if (extra % sizeof(wire::DirAttrTrailer) != 0 || extra > most * sizeof(wire::DirAttrTrailer)) {
    return -1;
  }
  return static_cast<long>(extra);
}

bool ValidReply(const PendingReply& expect, const fuse_out_header& header, size_t body,
                bool dir_attrs_on, bool empty_dir_hints_on, bool listing_attrs_on) {
  if (header.error > 0 || header.error <= -512) return false;
  if (header.error != 0) return body == 0;
  return DirAttrTrailerBytes(expect, body, dir_attrs_on, empty_dir_hints_on, listing_attrs_on) >=
             0 &&
         body <= expect.capacity;
}

}  // namespace ringfs::frontend
