#include "frontend/xattr_cache.h"

#include <gtest/gtest.h>

namespace ringfs::frontend {
namespace {

constexpr uint64_t kLife = 1000;

TEST(XattrAbsenceCacheTest, LearnsAbsenceAndForgetsOnDropAndExpiry) {
  XattrAbsenceCache cache(kLife);
  EXPECT_FALSE(cache.KnownAbsent(5, kCapabilityXattr, 0));
  cache.RecordAbsent(5, cache.Ticket(), 100);
  EXPECT_TRUE(cache.KnownAbsent(5, kCapabilityXattr, 200));
  EXPECT_FALSE(cache.KnownAbsent(5, "user.other", 200));  // only the capability is cached
  EXPECT_FALSE(cache.KnownAbsent(6, kCapabilityXattr, 200));
  EXPECT_FALSE(cache.KnownAbsent(5, kCapabilityXattr, 100 + kLife));  // expired
  cache.RecordCreated(7, 0);
  EXPECT_TRUE(cache.KnownAbsent(7, kCapabilityXattr, 1));
  cache.Drop(7);
  EXPECT_FALSE(cache.KnownAbsent(7, kCapabilityXattr, 1));
}

TEST(XattrAbsenceCacheTest, AnAnswerOlderThanADropIsNotRemembered) {
  XattrAbsenceCache cache(kLife);
  const uint64_t before = cache.Ticket();  // GETXATTR sent
  cache.Drop(5);                           // setcap through this mount meanwhile
  cache.RecordAbsent(5, before, 1);        // the GETXATTR's ENODATA arrives late
  EXPECT_FALSE(cache.KnownAbsent(5, kCapabilityXattr, 2));
  cache.RecordAbsent(5, cache.Ticket(), 3);  // asked after the drop: fine
  EXPECT_TRUE(cache.KnownAbsent(5, kCapabilityXattr, 4));
  // A drop of another node does not refuse it.
  const uint64_t t = cache.Ticket();
  cache.Drop(9);
  cache.RecordAbsent(6, t, 5);
  EXPECT_TRUE(cache.KnownAbsent(6, kCapabilityXattr, 6));
}

TEST(XattrAbsenceCacheTest, BoundedAndSafeWhenTheDropHistoryIsReset) {
  XattrAbsenceCache cache(kLife, /*max_nodes=*/4);
  const uint64_t old = cache.Ticket();
  for (uint64_t n = 100; n < 110; ++n) cache.Drop(n);  // history overflows and is reset
  cache.RecordAbsent(100, old, 1);  // could predate a forgotten drop: refused
  EXPECT_FALSE(cache.KnownAbsent(100, kCapabilityXattr, 2));
  for (uint64_t n = 0; n < 10; ++n) cache.RecordCreated(n, 0);
  EXPECT_LE(cache.size(), 4u);
}

}  // namespace
}  // namespace ringfs::frontend
