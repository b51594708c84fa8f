// Supplementary groups of a uid as the server's user database (NSS: /etc/group, LDAP through
// SSSD, ...) knows them, cached for `ttl`: what an NFS server does with rpc.mountd
// --manage-gids, because FUSE (like AUTH_SYS beyond 16 groups) does not carry the caller's group
// list. A miss asks NSS in the calling worker thread (getpwuid_r + getgrouplist): fast for files,
// as slow as the directory service otherwise, once per uid per ttl.
// Thread-safe; entries are immutable and shared, so a hit costs one lock and a refcount.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ringfs::server {

class GroupCache {
 public:
  using Groups = std::shared_ptr<const std::vector<gid_t>>;
  struct Options {
    absl::Duration ttl = absl::Minutes(2);
    size_t max_entries = 4096;  // beyond it the cache is emptied (simple, and rare)
    // The database seam: the groups of `uid` whose primary group is `gid` (including `gid`), or
    // just {gid} when the uid has no name. Default: getpwuid_r + getgrouplist.
    std::function<std::vector<gid_t>(uid_t uid, gid_t gid)> lookup;
    std::function<absl::Time()> now = [] { return absl::Now(); };
  };

  GroupCache() : GroupCache(Options{}) {}
  explicit GroupCache(Options options);

  // Sorted, deduplicated, always containing `gid`.
  Groups Get(uid_t uid, gid_t gid);

  // Database lookups so far (misses and expiries); for tests and metrics.
  size_t lookups() const;

  // The default lookup.
  static std::vector<gid_t> SystemGroups(uid_t uid, gid_t gid);

 private:
  struct Entry {
    Groups groups;
    absl::Time expires;
  };
  const Options options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  size_t lookups_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringfs::server
