// Requests ringfs-mount answers itself, without a server round trip. Used by both transports
// (ring workers and /dev/fuse workers) so they behave the same.
//
// - FLUSH: -ENOSYS. The server buffers nothing (FLUSH there only checked the handle), and the
//   kernel writes dirty pages back and collects their errors before it sends FLUSH, so the round
//   trip bought nothing. After the first ENOSYS the kernel stops sending FLUSH on this mount.
// - GETXATTR of security.capability of a node known to have none (XattrAbsenceCache): ENODATA.
// - GETATTR of a directory whose post-operation attributes arrived with a create/remove reply
//   or a listing, or of a file whose record arrived with its last write (DirAttrCache):
//   answered from them once.
// - LOOKUP of a name known absent from a directory this mount knows complete (CompleteDirs): a
//   negative entry (node id 0), valid for as long as that knowledge holds (at most the entry
//   lifetime, as the server's own negative entries).
// - LOOKUP of a name whose node the kernel forgot and ringfs-mount kept (KeptEntries): its entry,
//   attributes expired, handing one kept lookup back to the kernel.
// - READDIR/READDIRPLUS of an open directory at its listing's known end (DirEnds): empty.
//   RELEASEDIR forgets that end.
// - READDIRPLUS at offset 0 of a handle-less listing whose first page the mount kept from an
//   earlier open (KeptListings::Replay): that page, without node ids; DirEnds learns from it.
// - OPENDIR, while the server lists directories by node: a handle of the mount's own
//   (LocalDirHandles); RELEASEDIR of such a handle: success.
// Requests that change a directory's attributes without carrying new ones (SETATTR, xattrs)
// drop its cached snapshot here before they are forwarded.
#pragma once

#include <linux/fuse.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "frontend/complete_dirs.h"
#include "frontend/dir_attr_cache.h"
#include "frontend/dir_ends.h"
#include "frontend/kept_entries.h"
#include "frontend/local_dir_handles.h"
#include "frontend/xattr_cache.h"

namespace ringfs::frontend {

struct LocalAnswer {
  int error = 0;         // 0 or a positive errno
  size_t body_size = 0;  // bytes written to `body` when error == 0
};

// What the answers come from; a null member is a feature that is off.
struct LocalCaches {
  DirAttrCache* dir_attrs = nullptr;
  const XattrAbsenceCache* xattrs = nullptr;
  CompleteDirs* dirs = nullptr;  // also decides whether the kernel keeps a listing (OPENDIR)
  KeptEntries* kept = nullptr;
  DirEnds* dir_ends = nullptr;
  LocalDirHandles* local_dirs = nullptr;
  bool open_dirs_locally = false;  // with local_dirs: the server lists directories by node
  // The last two are read for a READDIRPLUS only (the forwarder fills them for that alone).
  // An early unlink (async_unlink) has not been run by the server yet: a kept page may still
  // hold its name (one read beside it, before its change was heard of), so none is replayed.
  bool unlinks_outstanding = false;
  uint64_t caller = 0;  // the request's (CallerKey): a kept page is replayed only to its own
};

// Whether a READDIRPLUS `in` may be answered by KeptListings::Replay, and its server's answer
// kept for that: at offset 0 of a handle this mount gave out while the server lists by node.
// Then the next READDIR, at a cookie of the page, reads the export from that cookie whether the
// page was the server's answer or the mount's replay of it (a server handle's cookies are its
// own snapshot's).
bool ReplayableListing(const fuse_read_in& in, const LocalDirHandles* local_dirs,
                       bool lists_by_node);

// `op_in` is the request's argument struct (op_in_size bytes), `payload` what follows it (names);
// `body` receives a success body (at least sizeof(fuse_entry_out) bytes, and a READDIRPLUS's
// `size`: the transports' buffers take a server's answer to it there too) and may overlap the
// request's bytes. Returns nullopt when the request must go to the server.
std::optional<LocalAnswer> AnswerLocally(uint32_t opcode, uint64_t nodeid, const void* op_in,
                                         size_t op_in_size, std::span<const char> payload,
                                         const LocalCaches& caches, void* body, uint64_t now_ns);

}  // namespace ringfs::frontend
