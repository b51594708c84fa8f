// Appends post-operation directory attributes to a successful reply (see common/dir_attrs.h
// for why). Callable from any worker thread.
#pragma once

#include <cstddef>

#include "common/dir_attrs.h"
#include "server/executor.h"
#include "server/request.h"

namespace ringfs::server {

// Extra reply capacity a request with dir attrs needs.
constexpr size_t DirAttrsCapacity() {
  return wire::kMaxDirAttrTrailers * sizeof(wire::DirAttrTrailer);
}

// Extra reply capacity of a reply that ends with one record: a READDIR/READDIRPLUS with listing
// attrs (on top of read_in.size), a WRITE with write attrs.
constexpr size_t OneRecordCapacity() { return sizeof(wire::DirAttrTrailer); }

// Appends the one record a listing or write reply ends with (common/dir_attrs.h): node `nodeid`
// as it is now, after the listing or write, or a zero record when it cannot be stat'ed.
// REQUIRES: body has OneRecordCapacity() bytes spare.
void AppendOneRecord(const OpContext& ctx, uint64_t nodeid, ReplyBody& body);
// The same, stat'ing `fd` (open on node `nodeid`): for a write that completed on the worker's
// ring, after the request's context is gone.
void AppendOneRecord(const CacheTimes& times, uint64_t nodeid, int fd, ReplyBody& body);

// The one record an OPEN reply ends with (open attrs, common/dir_attrs.h): the opened file as
// the open found it (`body` holds the OPEN's fuse_open_out), or a zero record when it cannot be
// stat'ed, changed less than kOpenAttrsSettledNs before `now_realtime_ns` (the server's
// CLOCK_REALTIME), was not opened read-only (`open_flags`), or is open for writing anywhere
// (open_for_writing.h): then its change time does not tell whether its data is as it was.
// REQUIRES: body has OneRecordCapacity() bytes spare.
void AppendOpenRecord(const OpContext& ctx, uint64_t nodeid, uint32_t open_flags,
                      int64_t now_realtime_ns, ReplyBody& body);

// Stats the directories `request` changed and appends one trailer for each that can still be
// stat'ed; for MKDIR also one for the new directory when it is still empty (wire_format.md,
// "Post-operation directory attributes"). The trailer is an optimisation: a directory that cannot be stat'ed is left out and
// the client asks for it the usual way. REQUIRES: body has DirAttrsCapacity() bytes spare.
void AppendDirAttrs(const OpContext& ctx, const Request& request, ReplyBody& body);

// Whether the directory open (for reading) at `fd` has no entry but "." and "..", on a
// filesystem that compares names byte for byte (no case-folding directory, not vfat/exfat/NTFS/
// SMB), so that a client told so may treat every other name as absent.
bool EmptyWithExactNames(int fd);

}  // namespace ringfs::server
