#include "frontend/kept_listings.h"

#include <gtest/gtest.h>

namespace ringfs::frontend {
namespace {

constexpr uint64_t kSec = 1'000'000'000;

// One listing of `dir` read at `now` (seconds): its READDIR sent and answered.
void List(KeptListings& listings, uint64_t dir, uint64_t now, bool unsettled = false) {
  listings.ListingSent(dir, unsettled, now * kSec);
  listings.ListingEnded(dir, now * kSec);
}
// An open of `dir` at `now` (seconds).
bool Keep(KeptListings& listings, uint64_t dir, uint64_t now) {
  return listings.KeepAtOpen(dir, now * kSec);
}

TEST(KeptListingsTest, AListingIsKeptUntilItsDirectoryChanges) {
  KeptListings listings(60 * kSec);
  ASSERT_TRUE(listings.enabled());
  EXPECT_FALSE(Keep(listings, 2, 0)) << "nothing listed yet";
  List(listings, 2, 1);
  EXPECT_TRUE(Keep(listings, 2, 2)) << "listed after the last change";
  EXPECT_TRUE(Keep(listings, 2, 3)) << "still";
  EXPECT_FALSE(Keep(listings, 3, 3)) << "another directory, never listed";

  listings.Changed(2);
  EXPECT_FALSE(Keep(listings, 2, 4)) << "a name changed since";
  EXPECT_FALSE(Keep(listings, 2, 5)) << "dropped at the last open, not listed since";
  List(listings, 2, 6);
  EXPECT_TRUE(Keep(listings, 2, 7));
  listings.Changed(3);
  EXPECT_TRUE(Keep(listings, 2, 8)) << "another directory changed";

  // A change heard of while the listing is in flight: what it read may predate it.
  Keep(listings, 2, 9);
  listings.Changed(2);
  EXPECT_FALSE(Keep(listings, 2, 9));
  listings.ListingSent(2, false, 10 * kSec);
  listings.Changed(2);
  listings.ListingEnded(2, 10 * kSec);
  EXPECT_FALSE(Keep(listings, 2, 11));
}

TEST(KeptListingsTest, ListingsReadWhileAChangeWasUnsettledOrBeforeADropAreNeverKept) {
  KeptListings listings(60 * kSec);
  List(listings, 2, 1, /*unsettled=*/true);
  EXPECT_FALSE(Keep(listings, 2, 2)) << "a change of this mount may run after it";
  List(listings, 2, 3);
  EXPECT_TRUE(Keep(listings, 2, 4));

  // Dropped (a change, then an open) while a READDIR sent before was still out: its answer may
  // fill the kernel's new copy with what it read before the change.
  listings.ListingSent(2, false, 5 * kSec);
  listings.Changed(2);
  EXPECT_FALSE(Keep(listings, 2, 6));
  listings.ListingEnded(2, 6 * kSec);
  List(listings, 2, 7);
  EXPECT_FALSE(Keep(listings, 2, 8)) << "that copy is never kept";
  List(listings, 2, 9);
  EXPECT_TRUE(Keep(listings, 2, 10)) << "dropped with nothing in flight, listed again";

  // An answer handed to the kernel just before a drop is used when its task runs again, and
  // may land in the new copy: a drop within a second of it is treated as one in flight.
  List(listings, 2, 20);
  listings.Changed(2);
  EXPECT_FALSE(listings.KeepAtOpen(2, 20 * kSec + kSec / 2));
  List(listings, 2, 21);
  EXPECT_FALSE(Keep(listings, 2, 23)) << "that copy is never kept";
  List(listings, 2, 24);
  EXPECT_TRUE(Keep(listings, 2, 26));
}

TEST(KeptListingsTest, KeptForTheEntryLifetimeAndForgottenOnAReset) {
  KeptListings listings(60 * kSec);
  List(listings, 2, 0);
  EXPECT_TRUE(listings.KeepAtOpen(2, 59 * kSec));
  EXPECT_FALSE(listings.KeepAtOpen(2, 60 * kSec)) << "its names' lifetime has passed";

  List(listings, 2, 61);
  listings.Reset();
  EXPECT_FALSE(listings.KeepAtOpen(2, 62 * kSec)) << "invalidations may have been lost";
  List(listings, 2, 63);
  EXPECT_TRUE(listings.KeepAtOpen(2, 64 * kSec));

  listings.Disable();
  EXPECT_FALSE(listings.enabled()) << "the server pushes no invalidations";
  List(listings, 2, 65);
  EXPECT_FALSE(listings.KeepAtOpen(2, 66 * kSec));
  EXPECT_FALSE(KeptListings(0).enabled()) << "entry lifetime 0";
}

TEST(KeptListingsTest, StaysBounded) {
  KeptListings listings(60 * kSec, /*max_dirs=*/8);
  for (uint64_t dir = 10; dir < 100; ++dir) List(listings, dir, 1);
  EXPECT_LE(listings.dirs(), 8u);
  EXPECT_TRUE(Keep(listings, 99, 2)) << "the newest is still known";
  EXPECT_FALSE(Keep(listings, 10, 2)) << "a forgotten one is dropped at its open";
}

}  // namespace
}  // namespace ringfs::frontend
