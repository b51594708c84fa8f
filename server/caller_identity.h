// Who a request acts as on the export: the caller's uid/gid from the FUSE header, squashed by the
// session's ExportOptions (exports(5) semantics), with the supplementary groups the server's own
// user database gives that uid (NFS's --manage-gids: FUSE carries no group list). Pure apart
// from the GroupCache it is given; any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "server/export_options.h"

namespace ringfs::server {

class GroupCache;

using GroupList = std::vector<gid_t>;

struct CallerIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
  // Supplementary groups, sorted, without duplicates; shared with the cache (never null).
  std::shared_ptr<const GroupList> groups;
  // Squashed to the anonymous identity: it never creates set-id files or sets set-id bits.
  bool anonymous = false;
};

// The wire's "no identity" (FUSE_INVALID_UIDGID in newer kernels) is squashed like root.
inline constexpr uint32_t kInvalidId = UINT32_MAX;

// REQUIRES: `groups` null (only the caller's gid counts) or outlives the call.
CallerIdentity MapCaller(uint32_t uid, uint32_t gid, const ExportOptions& options,
                         GroupCache* groups);

}  // namespace ringfs::server
