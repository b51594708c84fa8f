#include "server/caller_identity.h"

#include <algorithm>

#include "server/group_cache.h"

namespace ringfs::server {
namespace {

// {gid}, without an allocation per request when the same gid comes again on this thread.
std::shared_ptr<const GroupList> SingleGroup(gid_t gid) {
  thread_local std::shared_ptr<const GroupList> last;
  if (last == nullptr || last->front() != gid) last = std::make_shared<const GroupList>(GroupList{gid});
  return last;
}

}  // namespace

CallerIdentity MapCaller(uint32_t uid, uint32_t gid, const ExportOptions& options,
                         GroupCache* groups) {
  using Squash = ExportOptions::Squash;
  CallerIdentity who;
  const bool squash_user = options.squash == Squash::kAll || uid == kInvalidId ||
                           (options.squash == Squash::kRoot && uid == 0);
  if (squash_user) {
    // An anonymous caller keeps no group of its own: its only group is anongid.
    who.uid = options.anonuid;
    who.gid = options.anongid;
    who.anonymous = true;
    who.groups = SingleGroup(options.anongid);
    return who;
  }
  who.uid = uid;
  who.gid = gid;
  const bool squash_group = gid == kInvalidId || (options.squash == Squash::kRoot && gid == 0);
  if (squash_group) who.gid = options.anongid;
  if (groups == nullptr) {
    who.groups = SingleGroup(who.gid);
    return who;
  }
  who.groups = groups->Get(who.uid, who.gid);
  // root_squash squashes group 0 among the supplementary groups too (as nfsd does).
  if (options.squash == Squash::kRoot && !who.groups->empty() && who.groups->front() == 0) {
    GroupList list(who.groups->begin() + 1, who.groups->end());
    list.push_back(options.anongid);
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
    who.groups = std::make_shared<const GroupList>(std::move(list));
  }
  return who;
}

}  // namespace ringfs::server
