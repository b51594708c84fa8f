#include "server/caller_identity.h"

#include <gtest/gtest.h>

#include "server/group_cache.h"

namespace ringfs::server {
namespace {

using Squash = ExportOptions::Squash;

GroupCache FakeDatabase() {
  GroupCache::Options options;
  // uid 1000 is also in 0 (wheel-like) and 4242; nobody else has supplementary groups.
  options.lookup = [](uid_t uid, gid_t gid) {
    return uid == 1000 ? std::vector<gid_t>{gid, 0, 4242} : std::vector<gid_t>{gid};
  };
  return GroupCache(options);
}

TEST(CallerIdentityTest, RootSquashMapsRootAndGroupZeroOnly) {
  GroupCache db = FakeDatabase();
  ExportOptions options;  // root_squash
  CallerIdentity root = MapCaller(0, 0, options, &db);
  EXPECT_EQ(root.uid, 65534u);
  EXPECT_EQ(root.gid, 65534u);
  EXPECT_TRUE(root.anonymous);
  EXPECT_EQ(*root.groups, GroupList{65534});

  CallerIdentity user = MapCaller(1000, 1000, options, &db);
  EXPECT_EQ(user.uid, 1000u);
  EXPECT_EQ(user.gid, 1000u);
  EXPECT_FALSE(user.anonymous);
  // Group 0 among the supplementary groups is squashed too.
  EXPECT_EQ(*user.groups, (GroupList{1000, 4242, 65534}));

  CallerIdentity group_zero = MapCaller(1000, 0, options, &db);
  EXPECT_EQ(group_zero.uid, 1000u);
  EXPECT_EQ(group_zero.gid, 65534u);
}

TEST(CallerIdentityTest, NoRootSquashKeepsRootAllSquashMapsEveryone) {
  GroupCache db = FakeDatabase();
  CallerIdentity root = MapCaller(0, 0, {.squash = Squash::kNone}, &db);
  EXPECT_EQ(root.uid, 0u);
  EXPECT_EQ(root.gid, 0u);
  EXPECT_FALSE(root.anonymous);
  EXPECT_EQ(*MapCaller(1000, 1000, {.squash = Squash::kNone}, &db).groups,
            (GroupList{0, 1000, 4242}));

  ExportOptions all{.squash = Squash::kAll, .anonuid = 7, .anongid = 8};
  CallerIdentity user = MapCaller(1000, 1000, all, &db);
  EXPECT_EQ(user.uid, 7u);
  EXPECT_EQ(user.gid, 8u);
  EXPECT_TRUE(user.anonymous);
  EXPECT_EQ(*user.groups, GroupList{8});
}

TEST(CallerIdentityTest, InvalidIdsAreAnonymousWhateverTheSquash) {
  CallerIdentity who = MapCaller(kInvalidId, 5, {.squash = Squash::kNone}, nullptr);
  EXPECT_TRUE(who.anonymous);
  EXPECT_EQ(who.uid, 65534u);
  CallerIdentity group = MapCaller(5, kInvalidId, {.squash = Squash::kNone}, nullptr);
  EXPECT_EQ(group.uid, 5u);
  EXPECT_EQ(group.gid, 65534u);
}

TEST(CallerIdentityTest, WithoutManageGidsOnlyTheRequestGidCounts) {
  CallerIdentity user = MapCaller(1000, 1000, {}, nullptr);
  EXPECT_EQ(*user.groups, GroupList{1000});
}

TEST(GroupCacheTest, CachesPerUidAndGidUntilTheTtl) {
  absl::Time now = absl::UnixEpoch();
  int calls = 0;
  GroupCache::Options options;
  options.ttl = absl::Seconds(10);
  options.now = [&] { return now; };
  options.lookup = [&](uid_t, gid_t gid) {
    ++calls;
    return std::vector<gid_t>{300, gid, 200, 300};
  };
  GroupCache cache(options);
  EXPECT_EQ(*cache.Get(1, 100), (std::vector<gid_t>{100, 200, 300}));  // sorted, unique
  cache.Get(1, 100);
  EXPECT_EQ(calls, 1);
  cache.Get(1, 101);  // another primary gid is another entry
  EXPECT_EQ(calls, 2);
  now += absl::Seconds(11);
  cache.Get(1, 100);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(cache.lookups(), 3u);
}

TEST(GroupCacheTest, SystemDatabaseKnowsRootAndNotAnUnknownUid) {
  std::vector<gid_t> root = GroupCache::SystemGroups(0, 0);
  EXPECT_NE(std::find(root.begin(), root.end(), 0u), root.end());
  // A uid with no name keeps just the gid it came with.
  EXPECT_EQ(GroupCache::SystemGroups(3999999, 77), std::vector<gid_t>{77});
}

}  // namespace
}  // namespace ringfs::server
