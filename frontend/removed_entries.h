// The directory entries an UNLINK, RMDIR or RENAME removes or moves, read back from the frame
// the mount sent. Used when such a request ended for its caller without the server's answer
// (its deadline) and the answer comes late saying it ran: the caller's kernel kept the names,
// and they are written into it as entry invalidations (BackendChannel::BeginReply).
#pragma once

#include <linux/fuse.h>
#include <sys/uio.h>

#include <vector>

#include "common/invalidation.h"

namespace ringfs::frontend {

// `iov[1..iovcnt)`: the request's bytes after its header (argument struct, then names).
// Empty for other opcodes and for arguments cut short.
std::vector<wire::Invalidation> EntriesItRemoves(const fuse_in_header& header, const iovec* iov,
                                                 int iovcnt);

}  // namespace ringfs::frontend
