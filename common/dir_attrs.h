// Post-operation directory attributes ("dir attrs"): an optional trailer the server appends to
// successful replies of requests that change a directory, when the connection negotiated it in
// the handshake (ClientHello.want_dir_attrs / ServerHello.dir_attrs).
//
// Why: every create or remove in a directory makes the kernel drop that directory's cached
// attributes, and with default_permissions the next path walk through it must GETATTR it again
// before the permission check. That is one extra round trip per create/unlink. The server
// already touches the directory, so it stats it right after the operation and sends the
// result along; the client answers the kernel's GETATTR from it (NFS's "wcc" post-op attributes
// do the same job). The kernel never sees the trailer.
//
// Layout: the normal reply body, then 1..kMaxDirAttrTrailers DirAttrTrailer records.
// MKDIR's reply may carry a second record, for the directory it made: present only when the
// server found that directory empty after the node entered the client's table (so every name
// made in it afterwards is pushed to the client) and the export compares names byte for byte.
// The client may then answer lookups of names it has not heard of itself
// (frontend/complete_dirs.h); an older client takes it as one more attribute snapshot.
// With empty-dir hints also negotiated (ClientHello.want_empty_dir_hints), a LOOKUP answered
// "no such entry" (node id 0) may carry one record, for its directory: present only when the
// server found that directory empty and names compared byte for byte. The client holds the
// directory, so every name made in it elsewhere from then on is pushed to it.
// With listing attrs negotiated (ClientHello.want_listing_attrs, granted with dir attrs), every
// successful READDIR and READDIRPLUS reply ends with exactly one record: the listed directory,
// stat'ed after the listing was read (nodeid 0 and zeroes when it could not be stat'ed). The
// kernel voids a directory's atime after every listing, so the next stat of it (find and rm
// fstat each directory they open) would otherwise be a GETATTR round trip.
// With write attrs negotiated (ClientHello.want_write_attrs, granted with dir attrs), every
// successful WRITE reply ends with exactly one record: the written file, stat'ed after the
// write (nodeid 0 and zeroes when it could not be). The kernel voids a file's size and times
// after each write, so the stat that follows a written file's close (git records every file it
// checks out in its index, rsync compares what it wrote) would otherwise be a GETATTR.
// With open attrs negotiated (ClientHello.want_open_attrs, granted with dir attrs), every
// successful OPEN reply ends with exactly one record: the opened file, stat'ed at the open, or
// nodeid 0 and zeroes when it could not be stat'ed or its change time is less than
// kOpenAttrsSettledNs before the server's clock (a change in the same clock tick as the stat
// could then leave the change time as it was). The kernel drops a file's cached pages at every
// open; the record's change time tells the client whether the pages kept from an earlier open
// still hold the file's data, so it may let the kernel keep them (frontend/kept_pages.h), as
// NFS compares a file's change attribute at open.
// The name "dir attrs" is historical: the record is a node's post-operation attributes.
#pragma once

#include <linux/fuse.h>

#include <cstddef>
#include <cstdint>

#include "common/fuse_ops.h"

namespace ringfs::wire {

struct DirAttrTrailer {
  uint64_t nodeid = 0;  // the directory
  fuse_attr_out attr{};  // attr_valid: how long the client may use it
};
static_assert(sizeof(DirAttrTrailer) == 112, "wire layout");

// RENAME/RENAME2 report both directories.
inline constexpr size_t kMaxDirAttrTrailers = 2;

// Opcodes whose success reply may carry dir-attr trailers.
constexpr bool CarriesDirAttrs(uint32_t opcode, bool empty_dir_hints) {
  return fuse::ChangesNamespace(opcode) || (empty_dir_hints && opcode == FUSE_LOOKUP);
}

// Opcodes whose success reply ends with one record when listing attrs are negotiated.
constexpr bool IsListing(uint32_t opcode) {
  return opcode == FUSE_READDIR || opcode == FUSE_READDIRPLUS;
}

// Opcodes whose success reply ends with one record when write attrs are negotiated.
constexpr bool IsWrite(uint32_t opcode) { return opcode == FUSE_WRITE; }

// Opcodes whose success reply ends with one record when open attrs are negotiated.
constexpr bool IsOpen(uint32_t opcode) { return opcode == FUSE_OPEN; }

// An OPEN's record is sent only for a file whose change time is at least this much older than
// the server's clock: coarse timestamps (a clock tick, whole seconds on some filesystems, two
// on FAT) could give a change made right after the stat the same change time.
inline constexpr int64_t kOpenAttrsSettledNs = 2'000'000'000;

}  // namespace ringfs::wire
