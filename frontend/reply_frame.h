// The checks ringfs-mount makes on a reply frame from the server before it lets the body reach
// a request's buffer: the header's length, node-handle notifications (common/node_handle.h),
// the body against what the request allows, and dir-attr trailers (common/dir_attrs.h).
// BackendChannel calls them on every frame it receives; they are pure so that the fuzz target
// (tests/fuzz/fuzz_reply_frame.cc) checks the very code the channel runs. Any thread.
#pragma once

#include <linux/fuse.h>

#include <cstddef>
#include <cstdint>
#include <optional>

#include "frontend/dir_attr_cache.h"

namespace ringfs::frontend {

// Where a reply's body lands and which sizes are acceptable for it.
struct PendingReply {
  uint32_t slot = 0;
  uint32_t opcode = 0;
  char* body = nullptr;
  size_t capacity = 0;
  size_t min_body = 0;
  size_t max_body = 0;
  // Not sent before every early unlink up to this one was answered (AsyncRemovals::Gate); 0:
  // no wait.
  uint64_t gate = 0;
  // Never sent: answered by the channel itself once `gate` has passed (a FLUSH waiting for the
  // file's early writes, AsyncRemovals::WriteGate).
  bool local = false;
  // READDIR/READDIRPLUS (listing attrs) and WRITE (write attrs): DirAttrCache::Ticket before it
  // was sent.
  uint64_t record_ticket = 0;
  // A WRITE whose record may answer a GETATTR (not one answered early: AcceptWithWrites), and
  // DirAttrCache::Reads of its file when it was sent.
  bool write_record = false;
  uint32_t record_reads = 0;
  // The write records the request made stale when sent, made stale again when it ends.
  RecordsVoided voided;
  // A caller waits in it (a foreground request, queue/request_class.h): the kernel would
  // interrupt it on a signal.
  bool caller_waits = false;
};

// Bytes after the header that `header.len` announces; nullopt when the length is below the
// header or above the wire's frame limit (the stream can no longer be trusted).
std::optional<size_t> ReplyBodyBytes(const fuse_out_header& header);

// For a frame with unique 0 and `body` bytes after the header: how many NodeHandleRecords it
// carries, or 0 when it is no valid node-handle notification on this connection.
size_t NotificationRecords(const fuse_out_header& header, size_t body, bool node_handles_on);

// Which records the connection negotiated (common/dir_attrs.h).
struct TrailerRules {
  bool dir_attrs = false;        // changes of directories carry their records
  bool empty_dir_hints = false;  // ... and a negative LOOKUP may carry its directory's
  bool listing_attrs = false;    // one record ends every READDIR/READDIRPLUS success
  bool write_attrs = false;      // one record ends every WRITE success
  bool open_attrs = false;       // one record ends every OPEN success
};

// Bytes of dir-attr trailers at the end of a success body of `body` bytes answering `expect`:
// 0 when the body fits the request as it is, -1 when it fits neither the request nor the
// request's fixed reply followed by 1..kMaxDirAttrTrailers trailers (only where negotiated and
// the opcode changes a directory), or, with empty-dir hints also negotiated, a LOOKUP's entry
// followed by one trailer. With listing attrs negotiated, a READDIR/READDIRPLUS success body is
// a listing of at most max_body bytes followed by exactly one trailer, which is not optional;
// with write attrs, a WRITE's success body is its fuse_write_out followed by exactly one, and
// with open attrs an OPEN's is its fuse_open_out followed by exactly one.
long DirAttrTrailerBytes(const PendingReply& expect, size_t body, const TrailerRules& rules);

// Whether a reply to `expect` (unique != 0) may be delivered: an errno 1..511 without a body,
// or success with a body the request allows, trailers included, that fits its buffer.
bool ValidReply(const PendingReply& expect, const fuse_out_header& header, size_t body,
                const TrailerRules& rules);

}  // namespace ringfs::frontend
