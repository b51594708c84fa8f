#include "frontend/xattr_cache.h"

#include <gtest/gtest.h>

namespace ringfs::frontend {
namespace {

constexpr uint64_t kLife = 1000;
const int kCap = XattrAbsenceCache::IndexOf(kCapabilityXattr);

TEST(XattrAbsenceCacheTest, LearnsAbsenceAndForgetsOnDropAndExpiry) {
  XattrAbsenceCache cache(kLife);
  EXPECT_FALSE(cache.KnownAbsent(5, kCapabilityXattr, 0));
  cache.RecordAbsent(5, kCap, cache.Ticket(), 100);
  EXPECT_TRUE(cache.KnownAbsent(5, kCapabilityXattr, 200));
  EXPECT_FALSE(cache.KnownAbsent(5, "user.other", 200));               // not one of kAbsenceNames
  EXPECT_FALSE(cache.KnownAbsent(5, "system.posix_acl_access", 200));  // not learned
  EXPECT_FALSE(cache.KnownAbsent(6, kCapabilityXattr, 200));
  EXPECT_FALSE(cache.KnownAbsent(5, kCapabilityXattr, 100 + kLife));  // expired
  cache.RecordCreated(7, cache.Ticket(), 0);
  EXPECT_TRUE(cache.KnownAbsent(7, kCapabilityXattr, 1));
  cache.Drop(7);
  EXPECT_FALSE(cache.KnownAbsent(7, kCapabilityXattr, 1));
}

TEST(XattrAbsenceCacheTest, AnAnswerOlderThanADropIsNotRemembered) {
  XattrAbsenceCache cache(kLife);
  const uint64_t before = cache.Ticket();  // GETXATTR sent
  cache.Drop(5);                           // setcap through this mount meanwhile
  cache.RecordAbsent(5, kCap, before, 1);  // the GETXATTR's ENODATA arrives late
  EXPECT_FALSE(cache.KnownAbsent(5, kCapabilityXattr, 2));
  cache.RecordAbsent(5, kCap, cache.Ticket(), 3);  // asked after the drop: fine
  EXPECT_TRUE(cache.KnownAbsent(5, kCapabilityXattr, 4));
  // A drop of another node does not refuse it.
  const uint64_t t = cache.Ticket();
  cache.Drop(9);
  cache.RecordAbsent(6, kCap, t, 5);
  EXPECT_TRUE(cache.KnownAbsent(6, kCapabilityXattr, 6));
}

TEST(XattrAbsenceCacheTest, BoundedAndSafeWhenTheDropHistoryIsReset) {
  XattrAbsenceCache cache(kLife, /*max_nodes=*/4);
  const uint64_t old = cache.Ticket();
  for (uint64_t n = 100; n < 110; ++n) cache.Drop(n);  // history overflows and is reset
  cache.RecordAbsent(100, kCap, old, 1);               // could predate a forgotten drop: refused
  EXPECT_FALSE(cache.KnownAbsent(100, kCapabilityXattr, 2));
  for (uint64_t n = 0; n < 10; ++n) cache.RecordCreated(n, cache.Ticket(), 0);
  EXPECT_LE(cache.size(), 4u);
}

// ls -l asks every listed file for security.selinux and system.posix_acl_access.
TEST(XattrAbsenceCacheTest, EachNameIsLearnedAndExpiresOnItsOwnAndADropForgetsThemAll) {
  XattrAbsenceCache cache(kLife);
  const int selinux = XattrAbsenceCache::IndexOf("security.selinux");
  const int acl = XattrAbsenceCache::IndexOf("system.posix_acl_access");
  const int default_acl = XattrAbsenceCache::IndexOf("system.posix_acl_default");
  ASSERT_GE(selinux, 0);
  ASSERT_GE(acl, 0);
  ASSERT_GE(default_acl, 0);
  EXPECT_EQ(XattrAbsenceCache::IndexOf("user.x"), -1);
  cache.RecordAbsent(5, selinux, cache.Ticket(), 100);
  cache.RecordAbsent(5, acl, cache.Ticket(), 500);
  EXPECT_TRUE(cache.KnownAbsent(5, "security.selinux", 200));
  EXPECT_TRUE(cache.KnownAbsent(5, "system.posix_acl_access", 600));
  EXPECT_FALSE(cache.KnownAbsent(5, kCapabilityXattr, 600));
  EXPECT_FALSE(cache.KnownAbsent(5, "system.posix_acl_default", 600));
  // Learned at 100, so over at 100 + kLife although the ACL's was learned later.
  EXPECT_FALSE(cache.KnownAbsent(5, "security.selinux", 100 + kLife));
  EXPECT_TRUE(cache.KnownAbsent(5, "system.posix_acl_access", 100 + kLife));
  cache.Drop(5);  // a setfacl through this mount, or another mount's change pushed
  EXPECT_FALSE(cache.KnownAbsent(5, "system.posix_acl_access", 700));
  // A create teaches the capability alone: the file may inherit a default ACL, or get a label.
  cache.RecordCreated(8, cache.Ticket(), 0);
  EXPECT_TRUE(cache.KnownAbsent(8, kCapabilityXattr, 1));
  EXPECT_FALSE(cache.KnownAbsent(8, "system.posix_acl_access", 1));
  EXPECT_FALSE(cache.KnownAbsent(8, "security.selinux", 1));
  // A create whose node was dropped after it was sent (another mount's setcap pushed before its
  // answer came) teaches nothing either.
  const uint64_t sent = cache.Ticket();
  cache.Drop(10);
  cache.RecordCreated(10, sent, 2);
  EXPECT_FALSE(cache.KnownAbsent(10, kCapabilityXattr, 3));
  // An answer older than the drop teaches nothing, whichever the name.
  const uint64_t before = cache.Ticket();
  cache.Drop(9);
  cache.RecordAbsent(9, default_acl, before, 800);
  EXPECT_FALSE(cache.KnownAbsent(9, "system.posix_acl_default", 801));
}

}  // namespace
}  // namespace ringfs::frontend
