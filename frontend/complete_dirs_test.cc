// CompleteDirs: which LOOKUPs ringfs-mount may answer "no such entry" itself, and every way that
// knowledge ends.
#include "frontend/complete_dirs.h"

#include <gtest/gtest.h>

#include <string>

namespace ringfs::frontend {
namespace {

constexpr uint64_t kSec = 1'000'000'000;

TEST(CompleteDirsTest, ADirectoryThisMountMadeKnowsEveryName) {
  CompleteDirs dirs(60 * kSec);
  EXPECT_FALSE(dirs.KnownAbsent(7, "a", 0));  // never made here
  dirs.RecordCreated(7, dirs.Ticket(), 0);
  EXPECT_TRUE(dirs.KnownAbsent(7, "a", 1));
  dirs.AddName(7, "a");  // this mount sends a CREATE of it
  EXPECT_FALSE(dirs.KnownAbsent(7, "a", 1));
  EXPECT_TRUE(dirs.KnownAbsent(7, "b", 1));
  EXPECT_EQ(dirs.KnownAbsent(7, "b", 59 * kSec), kSec);  // what is left of the lifetime
  EXPECT_FALSE(dirs.KnownAbsent(7, "b", 60 * kSec));  // the lifetime is over
  EXPECT_FALSE(dirs.KnownAbsent(7, std::string(256, 'n'), 1));  // the server's ENAMETOOLONG
  EXPECT_EQ(dirs.names(), 1u);
}

TEST(CompleteDirsTest, AnythingHeardOfTheDirectoryWhileItsMkdirWasInFlightWins) {
  CompleteDirs dirs(60 * kSec);
  uint64_t ticket = dirs.Ticket();
  dirs.AddName(7, "pushed");  // another client created a name before our MKDIR's answer came
  dirs.RecordCreated(7, ticket, 0);
  EXPECT_FALSE(dirs.KnownAbsent(7, "other", 1));
  // Something heard of another node does not matter.
  ticket = dirs.Ticket();
  dirs.Drop(8);
  dirs.RecordCreated(9, ticket, 0);
  EXPECT_TRUE(dirs.KnownAbsent(9, "other", 1));
}

TEST(CompleteDirsTest, ALookupsWordCountsOnlyWhenNoNameSpaceChangeWasUnsettled) {
  CompleteDirs dirs(60 * kSec);
  uint64_t ticket = dirs.LookupTicket();
  dirs.RecordFoundEmpty(7, ticket, 0);
  EXPECT_TRUE(dirs.KnownAbsent(7, "a", 1));

  // A CREATE unsettled when the LOOKUP is sent: no ticket at all.
  dirs.BeginChange();
  EXPECT_EQ(dirs.LookupTicket(), 0u);
  dirs.RecordFoundEmpty(8, dirs.LookupTicket(), 0);
  EXPECT_FALSE(dirs.KnownAbsent(8, "a", 1));
  dirs.EndChange();

  // One sent after the LOOKUP, settled or not by its answer: refused.
  ticket = dirs.LookupTicket();
  dirs.BeginChange();
  dirs.EndChange();
  dirs.RecordFoundEmpty(9, ticket, 0);
  EXPECT_FALSE(dirs.KnownAbsent(9, "a", 1));
  // One settled before the LOOKUP was sent is on the server already.
  ticket = dirs.LookupTicket();
  dirs.RecordFoundEmpty(9, ticket, 0);
  EXPECT_TRUE(dirs.KnownAbsent(9, "a", 1));

  // Settling more than is unsettled (a channel settling a lost instance's) stays at zero.
  dirs.EndChange(5);
  EXPECT_EQ(dirs.unsettled(), 0u);
  // A MKDIR's word does not depend on other requests: its directory is new.
  dirs.BeginChange();
  ticket = dirs.Ticket();
  dirs.RecordCreated(10, ticket, 0);
  EXPECT_TRUE(dirs.KnownAbsent(10, "a", 1));
}

TEST(CompleteDirsTest, KnownAgainKeepsTheNamesRecorded) {
  CompleteDirs dirs(60 * kSec);
  dirs.RecordFoundEmpty(7, dirs.LookupTicket(), 0);
  dirs.AddName(7, "sent");  // a CREATE of this mount, perhaps not run yet
  dirs.RecordFoundEmpty(7, dirs.LookupTicket(), 10 * kSec);  // found empty once more
  EXPECT_FALSE(dirs.KnownAbsent(7, "sent", 11 * kSec));
  EXPECT_TRUE(dirs.KnownAbsent(7, "other", 65 * kSec));  // the lifetime starts again
  EXPECT_EQ(dirs.names(), 1u);
}

TEST(CompleteDirsTest, ADirectoryForgottenAtTheBoundIsNotMadeCompleteByAnOlderTicket) {
  CompleteDirs dirs(60 * kSec, /*max_dirs=*/8, /*max_names=*/2);
  dirs.RecordFoundEmpty(7, dirs.LookupTicket(), 0);
  const uint64_t ticket = dirs.LookupTicket();  // a LOOKUP in 7 is sent
  dirs.AddName(7, "a");                         // pushes of names made elsewhere
  dirs.AddName(7, "b");
  dirs.AddName(7, "c");  // past the bound: 7 is forgotten with its names
  dirs.RecordFoundEmpty(7, ticket, 1);  // the LOOKUP's answer, from before the pushes
  EXPECT_FALSE(dirs.KnownAbsent(7, "a", 2));
}

TEST(CompleteDirsTest, DropResetAndDisableForget) {
  CompleteDirs dirs(60 * kSec);
  dirs.RecordCreated(7, dirs.Ticket(), 0);
  dirs.RecordCreated(8, dirs.Ticket(), 0);
  dirs.Drop(7);  // the kernel forgot it, or its attributes changed elsewhere
  EXPECT_FALSE(dirs.KnownAbsent(7, "a", 1));
  EXPECT_TRUE(dirs.KnownAbsent(8, "a", 1));
  const uint64_t in_flight = dirs.Ticket();
  dirs.Reset();  // a connection was lost
  EXPECT_FALSE(dirs.KnownAbsent(8, "a", 1));
  dirs.RecordCreated(9, in_flight, 0);  // a MKDIR sent before the reset
  EXPECT_FALSE(dirs.KnownAbsent(9, "a", 1));
  dirs.RecordCreated(9, dirs.Ticket(), 0);
  EXPECT_TRUE(dirs.KnownAbsent(9, "a", 1));
  dirs.Disable();  // the server does not push invalidations
  EXPECT_EQ(dirs.Ticket(), 0u);
  dirs.RecordCreated(10, 0, 0);
  EXPECT_EQ(dirs.dirs(), 0u);
}

TEST(CompleteDirsTest, ALifetimeOfZeroKnowsNothing) {
  CompleteDirs dirs(0);
  EXPECT_EQ(dirs.Ticket(), 0u);
  dirs.RecordCreated(7, dirs.Ticket(), 0);
  EXPECT_FALSE(dirs.KnownAbsent(7, "a", 0));
}

TEST(CompleteDirsTest, StaysBounded) {
  CompleteDirs dirs(60 * kSec, /*max_dirs=*/4, /*max_names=*/10);
  for (uint64_t d = 1; d <= 8; ++d) dirs.RecordCreated(d, dirs.Ticket(), 0);
  EXPECT_EQ(dirs.dirs(), 4u);
  // Expired directories make room.
  dirs.RecordCreated(100, dirs.Ticket(), 61 * kSec);
  EXPECT_TRUE(dirs.KnownAbsent(100, "a", 62 * kSec));
  // A directory whose names pass the bound is forgotten, never answered from a partial set.
  for (int i = 0; i < 20; ++i) dirs.AddName(100, "n" + std::to_string(i));
  EXPECT_LE(dirs.names(), 10u);
  EXPECT_FALSE(dirs.KnownAbsent(100, "a", 62 * kSec));
  // Many touched directories: the history is forgotten and MKDIRs in flight are refused.
  const uint64_t in_flight = dirs.Ticket();
  for (uint64_t d = 1000; d < 1010; ++d) dirs.Drop(d);
  dirs.RecordCreated(200, in_flight, 62 * kSec);
  EXPECT_FALSE(dirs.KnownAbsent(200, "a", 62 * kSec));
}

// A full table is walked for expired directories only once one of them can have expired: a
// mount that had made more directories than the bound paid a walk over all of them on every
// MKDIR and listing.
TEST(CompleteDirsTest, AFullTableIsNotWalkedBeforeADirectoryCanHaveExpired) {
  CompleteDirs dirs(60 * kSec, /*max_dirs=*/4, /*max_names=*/100);
  for (uint64_t d = 1; d <= 4; ++d) dirs.RecordCreated(d, dirs.Ticket(), d * kSec);
  ASSERT_EQ(dirs.dirs(), 4u);
  for (uint64_t d = 100; d < 1100; ++d) dirs.RecordCreated(d, dirs.Ticket(), 30 * kSec);
  EXPECT_EQ(dirs.dirs(), 4u);
  EXPECT_EQ(dirs.prunes(), 0u);  // none can have expired before 61 s: no walk
  const uint64_t before = dirs.prunes();
  // A directory already known is renewed while the table is full (it needs no room).
  dirs.RecordCreated(1, dirs.Ticket(), 31 * kSec);
  EXPECT_TRUE(dirs.KnownAbsent(1, "a", 90 * kSec));
  EXPECT_EQ(dirs.prunes(), before);
  // Directory 2 expires at 62 s: the first record after that walks once and fits.
  dirs.RecordCreated(500, dirs.Ticket(), 62 * kSec);
  EXPECT_EQ(dirs.prunes(), before + 1);
  EXPECT_TRUE(dirs.KnownAbsent(500, "a", 62 * kSec));
  dirs.RecordCreated(501, dirs.Ticket(), 62 * kSec + kSec / 2);  // 3 is due at 63 s
  EXPECT_EQ(dirs.prunes(), before + 1);
  EXPECT_FALSE(dirs.KnownAbsent(501, "a", 62 * kSec + kSec / 2));
}

// A LOOKUP's answer for a directory still in a full table renews it with the names pushed into
// it meanwhile. Before, the record first pruned the full table, which erased the expired
// directory with those names, and then recorded it complete without them (found by a review).
TEST(CompleteDirsTest, ARecordInAFullTableKeepsTheNamesPushedIntoItsDirectory) {
  CompleteDirs dirs(60 * kSec, /*max_dirs=*/2, /*max_names=*/10);
  dirs.RecordCreated(1, dirs.Ticket(), 0);
  dirs.RecordCreated(2, dirs.Ticket(), 0);
  const uint64_t ticket = dirs.LookupTicket();  // a LOOKUP in 1 is sent at 61 s, 1 expired
  dirs.AddName(1, "x");                         // "x" is made elsewhere and pushed
  dirs.RecordFoundEmpty(1, ticket, 61 * kSec);  // the server had looked before "x" was made
  EXPECT_FALSE(dirs.KnownAbsent(1, "x", 62 * kSec));
  EXPECT_TRUE(dirs.KnownAbsent(1, "y", 62 * kSec));
}

TEST(CompleteDirsTest, AFullTableRefilledAtASteadyRateIsPrunedOnceASecond) {
  constexpr uint64_t kMs = 1'000'000;
  CompleteDirs dirs(60 * kSec, /*max_dirs=*/100, /*max_names=*/100);
  uint64_t d = 1;
  for (; d <= 100; ++d) dirs.RecordCreated(d, dirs.Ticket(), d * kMs);  // one a millisecond
  // From 60 s on, one expires every millisecond while one is made every millisecond.
  for (uint64_t t = 60'001; t < 60'050; ++t, ++d) dirs.RecordCreated(d, dirs.Ticket(), t * kMs);
  EXPECT_EQ(dirs.prunes(), 1u);
  dirs.RecordCreated(d, dirs.Ticket(), 61'001 * kMs);
  EXPECT_EQ(dirs.prunes(), 2u);
  EXPECT_LT(dirs.dirs(), 100u);  // all made before 1.001 s are gone
  // A reset forgets the earliest expiry with the directories: refilled at once after it, the
  // table is not walked before the new ones can expire.
  dirs.Reset();
  for (uint64_t e = 1000; e < 1100; ++e) dirs.RecordCreated(e, dirs.Ticket(), 130 * kSec);
  dirs.RecordCreated(2000, dirs.Ticket(), 131 * kSec);
  EXPECT_EQ(dirs.prunes(), 2u);
}

}  // namespace
}  // namespace ringfs::frontend
