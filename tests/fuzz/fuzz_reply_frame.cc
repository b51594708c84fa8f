// Fuzzes the checks ringfs-mount makes on reply frames from the server (frontend/reply_frame.cc,
// what BackendChannel::BeginReply/TakeTrailers run): a stream of frames read the way the
// channel reads them, each checked against one outstanding request whose bounds come from
// SuccessReplyBounds as the Forwarder computes them. Whatever is accepted must fit: a
// notification is whole records, an error has no body, a success body fits the request's buffer
// and is its plain reply plus whole dir-attr trailers, only where they were negotiated.
//
// Input: flags (bit 0 dir attrs, bit 1 node handles, bit 2 invalidations), the request's opcode (one byte), its
// buffer capacity (u32), its argument struct (the opcode's size from the table), then frames.
#include <cstdint>
#include <cstring>

#include "common/dir_attrs.h"
#include "common/fuse_ops.h"
#include "common/invalidation.h"
#include "common/node_handle.h"
#include "common/wire.h"
#include "frontend/reply_frame.h"
#include "tests/fuzz/fuzz_check.h"

namespace ringfs::frontend {
namespace {

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t left() const { return size_; }
  bool Take(void* out, size_t n) {
    if (n > size_) return false;
    if (n > 0) std::memcpy(out, data_, n);
    data_ += n;
    size_ -= n;
    return true;
  }

 private:
  const uint8_t* data_;
  size_t size_;
};

void Run(const uint8_t* data, size_t size) {
  Reader in(data, size);
  uint8_t flags = 0, opcode = 0;
  uint32_t capacity = 0;
  if (!in.Take(&flags, 1) || !in.Take(&opcode, 1) || !in.Take(&capacity, 4)) return;
  const bool dir_attrs_on = (flags & 1) != 0;
  const bool node_handles_on = (flags & 2) != 0;
  const bool invalidations_on = (flags & 4) != 0;
  const bool empty_dir_hints_on = (flags & 8) != 0;
  const bool listing_attrs_on = (flags & 16) != 0;
  const bool write_attrs_on = (flags & 32) != 0;
  const bool open_attrs_on = (flags & 64) != 0;
  const TrailerRules rules{.dir_attrs = dir_attrs_on,
                           .empty_dir_hints = empty_dir_hints_on,
                           .listing_attrs = listing_attrs_on,
                           .write_attrs = write_attrs_on,
                           .open_attrs = open_attrs_on};
  std::optional<fuse::OpInfo> op = fuse::LookupOp(opcode);
  if (!op || !op->forwarded || op->reply == fuse::ReplyShape::kNone) return;
  fuzz::ExactCopy op_in(nullptr, 0);
  {
    std::vector<uint8_t> bytes(op->in_struct_size);
    if (!in.Take(bytes.data(), bytes.size())) return;
    op_in = fuzz::ExactCopy(bytes.data(), bytes.size());
  }
  fuse::ReplyBounds bounds = fuse::SuccessReplyBounds(opcode, op_in.data(), op_in.size());
  FUZZ_CHECK(bounds.expected && bounds.min <= bounds.max);
  // The worker's buffer holds at least the largest success reply (Forwarder's ReplyBuffer); the
  // fuzzer may only make it larger.
  PendingReply expect{0, opcode, nullptr, std::max<size_t>(bounds.max, capacity % (1u << 21)),
                      bounds.min, bounds.max};

  while (in.left() >= sizeof(fuse_out_header)) {
    fuse_out_header header;
    in.Take(&header, sizeof(header));
    std::optional<size_t> body = ReplyBodyBytes(header);
    if (!body) {
      FUZZ_CHECK(header.len < sizeof(header) || header.len - sizeof(header) > wire::kMaxFrameBytes);
      return;  // the channel drops the connection
    }
    FUZZ_CHECK(*body + sizeof(header) == header.len && *body <= wire::kMaxFrameBytes);
    if (*body > in.left()) return;  // the rest of the frame never came
    fuzz::ExactCopy bytes(nullptr, 0);
    {
      std::vector<uint8_t> raw(*body);
      in.Take(raw.data(), raw.size());
      bytes = fuzz::ExactCopy(raw.data(), raw.size());
    }
    if (header.unique == 0 && header.error == wire::kNotifyInvalidate) {
      // As BackendChannel::BeginReply/FinishReply: only where negotiated, parsed whole.
      if (!invalidations_on || *body == 0) return;
      std::vector<wire::Invalidation> records;
      if (!wire::ParseInvalidations({reinterpret_cast<const char*>(bytes.data()), *body},
                                    &records)) {
        return;  // the channel drops the connection
      }
      std::string again;
      for (const wire::Invalidation& inv : records) {
        if (inv.kind == wire::InvalidationKind::kReset) {
          FUZZ_CHECK(inv.nodeid == 0 && inv.offset == -1 && inv.length == 0 && inv.name.empty());
          wire::AppendInvalidation(inv, again);
          continue;
        }
        FUZZ_CHECK(inv.nodeid != 0);
        if (inv.kind == wire::InvalidationKind::kEntry) {
          FUZZ_CHECK(!inv.name.empty() && inv.name.size() <= wire::kMaxInvalidationName);
          FUZZ_CHECK(inv.name.find('/') == std::string::npos);
          FUZZ_CHECK(inv.name.find('\0') == std::string::npos);
        } else {
          FUZZ_CHECK(inv.kind == wire::InvalidationKind::kInode && inv.name.empty());
          FUZZ_CHECK(inv.offset >= -1 && inv.length >= 0);
        }
        wire::AppendInvalidation(inv, again);
      }
      // Accepted frames are exactly what the encoder writes: nothing is ignored.
      FUZZ_CHECK(again.size() == *body && std::memcmp(again.data(), bytes.data(), *body) == 0);
      continue;
    }
    if (header.unique == 0) {
      size_t records = NotificationRecords(header, *body, node_handles_on);
      if (records == 0) return;
      FUZZ_CHECK(node_handles_on && header.error == wire::kNotifyNodeHandles);
      FUZZ_CHECK(records * sizeof(wire::NodeHandleRecord) == *body);
      std::vector<wire::NodeHandleRecord> notify(records);
      std::memcpy(notify.data(), bytes.data(), *body);
      continue;
    }
    if (!ValidReply(expect, header, *body, rules)) {
      return;
    }
    if (header.error != 0) {
      FUZZ_CHECK(header.error < 0 && header.error > -512 && *body == 0);
      continue;
    }
    FUZZ_CHECK(*body <= expect.capacity);
    long extra = DirAttrTrailerBytes(expect, *body, rules);
    FUZZ_CHECK(extra >= 0 && static_cast<size_t>(extra) <= *body);
    const size_t plain = *body - static_cast<size_t>(extra);
    FUZZ_CHECK(plain >= expect.min_body && plain <= expect.max_body);
    if ((listing_attrs_on && wire::IsListing(opcode)) ||
        (write_attrs_on && wire::IsWrite(opcode)) || (open_attrs_on && wire::IsOpen(opcode))) {
      // Never optional: a listing without its record would pass bytes of names as one.
      FUZZ_CHECK(extra == sizeof(wire::DirAttrTrailer));
    } else if (extra > 0) {
      FUZZ_CHECK(dir_attrs_on && wire::CarriesDirAttrs(opcode, empty_dir_hints_on));
      FUZZ_CHECK(opcode != FUSE_LOOKUP || extra == sizeof(wire::DirAttrTrailer));
      FUZZ_CHECK(plain == expect.max_body);
      FUZZ_CHECK(extra % sizeof(wire::DirAttrTrailer) == 0);
      FUZZ_CHECK(static_cast<size_t>(extra) <=
                 wire::kMaxDirAttrTrailers * sizeof(wire::DirAttrTrailer));
    }
    for (size_t at = plain; at < *body; at += sizeof(wire::DirAttrTrailer)) {
      wire::DirAttrTrailer trailer;  // as TakeTrailers reads it
      std::memcpy(&trailer, bytes.data() + at, sizeof(trailer));
    }
  }
}

}  // namespace
}  // namespace ringfs::frontend

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ringfs::frontend::Run(data, size);
  return 0;
}
