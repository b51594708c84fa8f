#include "server/group_cache.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace ringfs::server {

GroupCache::GroupCache(Options options) : options_(std::move(options)) {}

std::vector<gid_t> GroupCache::SystemGroups(uid_t uid, gid_t gid) {
  std::vector<gid_t> groups{gid};
  long size = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buffer(size > 0 ? static_cast<size_t>(size) : 16384);
  passwd pw{};
  passwd* found = nullptr;
  while (getpwuid_r(uid, &pw, buffer.data(), buffer.size(), &found) == ERANGE &&
         buffer.size() < (1u << 20)) {
    buffer.resize(buffer.size() * 2);
  }
  if (found == nullptr) return groups;  // a uid unknown here has only the gid it came with
  int count = 64;
  std::vector<gid_t> list(count);
  while (getgrouplist(found->pw_name, gid, list.data(), &count) < 0) {
    if (count <= static_cast<int>(list.size())) count = static_cast<int>(list.size()) * 2;
    if (count > 65536) return groups;
    list.resize(count);
  }
  list.resize(count);
  return list;
}

GroupCache::Groups GroupCache::Get(uid_t uid, gid_t gid) {
  const uint64_t key = (uint64_t{uid} << 32) | gid;
  const absl::Time now = options_.now();
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it != entries_.end() && it->second.expires > now) return it->second.groups;
    ++lookups_;
  }
  // NSS runs unlocked: another worker may ask for the same uid meanwhile; both get an answer.
  std::vector<gid_t> list = options_.lookup ? options_.lookup(uid, gid) : SystemGroups(uid, gid);
  list.push_back(gid);
  std::sort(list.begin(), list.end());
  list.erase(std::unique(list.begin(), list.end()), list.end());
  auto groups = std::make_shared<const std::vector<gid_t>>(std::move(list));
  absl::MutexLock lock(&mu_);
  if (entries_.size() >= options_.max_entries) entries_.clear();
  entries_[key] = Entry{groups, now + options_.ttl};
  return groups;
}

size_t GroupCache::lookups() const {
  absl::MutexLock lock(&mu_);
  return lookups_;
}

}  // namespace ringfs::server
