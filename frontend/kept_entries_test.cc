// KeptEntries: which FORGETs ringfs-mount withholds, which LOOKUPs it then answers itself, and
// every way a kept entry ends (its lookups then go back to the server).
#include "frontend/kept_entries.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

namespace ringfs::frontend {
namespace {

constexpr uint64_t kSec = 1'000'000'000;

fuse_entry_out Entry(uint64_t node, uint64_t valid_s = 60) {
  fuse_entry_out e{};
  e.nodeid = node;
  e.generation = 3;
  e.entry_valid = valid_s;
  e.attr_valid = valid_s;
  e.attr.ino = node;
  e.attr.mode = 0100644;
  e.attr.size = 42;
  return e;
}

uint64_t Returned(std::vector<fuse_forget_one> returns, uint64_t node) {
  uint64_t total = 0;
  for (const fuse_forget_one& one : returns) total += one.nodeid == node ? one.nlookup : 0;
  return total;
}

TEST(KeptEntriesTest, AForgottenNodeIsKeptAndHandedBackByLookup) {
  KeptEntries kept;
  fuse_entry_out out{};
  EXPECT_FALSE(kept.Keep(10, 1, 0));  // never recorded: the FORGET goes to the server
  kept.Record(1, "f", Entry(10), kept.Ticket(), /*quiet=*/true, 0);
  EXPECT_FALSE(kept.Answer(1, "f", 1, &out));  // the kernel holds it: nothing kept to hand out
  EXPECT_TRUE(kept.Keep(10, 2, 5 * kSec));
  EXPECT_EQ(kept.kept(), 2u);
  ASSERT_TRUE(kept.Answer(1, "f", 10 * kSec, &out));
  EXPECT_EQ(out.nodeid, 10u);
  EXPECT_EQ(out.generation, 3u);
  // What is left of the server's lifetimes (nothing changed the node), for both: a push that
  // reaches the kernel before it has built the inode is written again (KernelNotifier).
  EXPECT_EQ(out.entry_valid, 50u);
  EXPECT_EQ(out.attr_valid, 50u);
  EXPECT_EQ(out.attr.mode, 0100644u);
  EXPECT_EQ(out.attr.size, 42u);
  EXPECT_TRUE(kept.Answer(1, "f", 10 * kSec, &out));
  EXPECT_FALSE(kept.Answer(1, "f", 10 * kSec, &out));  // both lookups handed back
  EXPECT_FALSE(kept.Answer(1, "g", 10 * kSec, &out));
  EXPECT_EQ(kept.kept(), 0u);
}

// A node is kept only while its attributes are known: once anything may have changed it, its
// lookups go back and the next LOOKUP goes to the server (which answers with fresh attributes).
TEST(KeptEntriesTest, OnlyNodesWhoseAttributesAreKnownAreKept) {
  KeptEntries kept;
  fuse_entry_out out{};
  auto record_and_forget = [&](uint64_t dir, const std::string& name, fuse_entry_out entry) {
    kept.Record(dir, name, entry, kept.Ticket(), true, 0);
    ASSERT_TRUE(kept.Keep(entry.nodeid, 1, 1));
  };
  record_and_forget(1, "w", Entry(10));
  kept.Changed(10);  // this mount writes it, sets its attributes or xattrs...
  EXPECT_FALSE(kept.Answer(1, "w", 2, &out));
  EXPECT_EQ(Returned(kept.TakeReturns(2), 10), 1u);

  record_and_forget(1, "p", Entry(11));
  kept.DropNode(11);  // a push: another client changed it
  EXPECT_FALSE(kept.Answer(1, "p", 2, &out));
  EXPECT_EQ(Returned(kept.TakeReturns(2), 11), 1u);

  // Changed while its LOOKUP travelled: not kept at all.
  uint64_t ticket = kept.Ticket();
  kept.Changed(12);
  kept.Record(1, "t", Entry(12), ticket, true, 0);
  EXPECT_FALSE(kept.Keep(12, 1, 1));
  // Attributes the server wants no caching of: not kept either.
  fuse_entry_out uncached = Entry(16);
  uncached.attr_valid = 0;
  kept.Record(1, "u", uncached, kept.Ticket(), true, 0);
  EXPECT_FALSE(kept.Keep(16, 1, 1));

  // A file with two links: a change to a name not recorded here may be its other link.
  fuse_entry_out linked = Entry(13);
  linked.attr.nlink = 2;
  record_and_forget(1, "l", linked);
  record_and_forget(1, "single", Entry(14));
  kept.DropName(2, "unknown");
  EXPECT_FALSE(kept.Answer(1, "l", 2, &out));
  ASSERT_TRUE(kept.Answer(1, "single", 2, &out));
  EXPECT_GT(out.attr_valid, 1u);  // known: what is left of their lifetime

  EXPECT_EQ(Returned(kept.TakeReturns(3), 13), 1u);

  // A name made in a directory changes the directory; it is kept all the same (its id keeps
  // the names recorded in it usable), handed back with its attributes expired.
  fuse_entry_out dir = Entry(15);
  dir.attr.mode = S_IFDIR | 0755;
  record_and_forget(1, "d", dir);
  kept.DropName(15, "new");
  ASSERT_TRUE(kept.Answer(1, "d", 2, &out));
  EXPECT_EQ(out.nodeid, 15u);
  EXPECT_EQ(out.attr_valid, 0u);
  EXPECT_EQ(out.attr.mode, static_cast<uint32_t>(S_IFDIR | 0755));
  ASSERT_TRUE(kept.Keep(15, 1, 3));  // forgotten again without known attributes: still kept
  EXPECT_TRUE(kept.TakeReturns(3).empty());
  EXPECT_EQ(kept.kept(), 1u);
}

TEST(KeptEntriesTest, ARecordThatMayHaveRacedAChangeIsRefused) {
  KeptEntries kept;
  kept.Record(1, "a", Entry(10), kept.Ticket(), /*quiet=*/false, 0);  // a change was unsettled
  EXPECT_FALSE(kept.Keep(10, 1, 1));
  uint64_t ticket = kept.Ticket();
  kept.DropName(1, "other");  // anything heard of the directory since the ticket
  kept.Record(1, "a", Entry(10), ticket, true, 0);
  EXPECT_FALSE(kept.Keep(10, 1, 1));
  ticket = kept.Ticket();
  kept.DropNode(2);  // another directory does not matter
  kept.Record(1, "a", Entry(10), ticket, true, 0);
  EXPECT_TRUE(kept.Keep(10, 1, 1));
  ticket = kept.Ticket();
  kept.Reset();
  kept.Record(1, "b", Entry(11), ticket, true, 0);
  EXPECT_FALSE(kept.Keep(11, 1, 1));
  kept.Record(1, "c", Entry(12, 0), kept.Ticket(), true, 0);  // the server wants no caching
  EXPECT_FALSE(kept.Keep(12, 1, 1));
}

TEST(KeptEntriesTest, DroppedEntriesReturnTheirLookups) {
  KeptEntries kept;
  for (uint64_t n = 10; n < 14; ++n) {
    kept.Record(1, "f" + std::to_string(n), Entry(n), kept.Ticket(), true, 0);
    ASSERT_TRUE(kept.Keep(n, n, 1));
  }
  EXPECT_FALSE(kept.HasReturns(2));
  kept.DropName(1, "f10");  // this mount unlinks it, or a push says it changed
  EXPECT_TRUE(kept.HasReturns(2));
  std::vector<fuse_forget_one> returns = kept.TakeReturns(2);
  EXPECT_EQ(Returned(returns, 10), 10u);
  fuse_entry_out out{};
  EXPECT_FALSE(kept.Answer(1, "f10", 2, &out));
  kept.DropNode(1);  // a push of the directory's attributes: every name in it
  returns = kept.TakeReturns(3);
  EXPECT_EQ(Returned(returns, 11) + Returned(returns, 12) + Returned(returns, 13), 36u);
  EXPECT_EQ(kept.kept(), 0u);
  EXPECT_EQ(kept.entries(), 0u);

  // A hard link: removing one name changes the node (its link count), so what is kept of it
  // goes back; its other name stays recorded.
  kept.Record(1, "x", Entry(20), kept.Ticket(), true, 0);
  kept.Record(2, "y", Entry(20), kept.Ticket(), true, 0);
  ASSERT_TRUE(kept.Keep(20, 1, 1));
  kept.DropName(1, "x");
  EXPECT_EQ(Returned(kept.TakeReturns(2), 20), 1u);
  EXPECT_FALSE(kept.Answer(2, "y", 2, &out));
  EXPECT_EQ(kept.entries(), 1u);
  // A name that now leads elsewhere.
  kept.Record(2, "y", Entry(20), kept.Ticket(), true, 2);  // looked up again: attributes known
  ASSERT_TRUE(kept.Keep(20, 1, 3));
  kept.Record(2, "y", Entry(21), kept.Ticket(), true, 4);
  EXPECT_EQ(Returned(kept.TakeReturns(5), 20), 1u);

  // Reset returns everything.
  kept.Record(1, "r", Entry(30), kept.Ticket(), true, 0);
  ASSERT_TRUE(kept.Keep(30, 4, 1));
  kept.Reset();
  EXPECT_EQ(Returned(kept.TakeReturns(2), 30), 4u);
  kept.Disable();
  kept.Record(1, "r", Entry(30), kept.Ticket(), true, 0);
  EXPECT_FALSE(kept.Keep(30, 1, 1));
}

// The server says a node is gone (ESTALE), or a name leads nowhere (a negative LOOKUP): the
// export changed behind its back. Nothing recorded may hand them out again.
TEST(KeptEntriesTest, WhatTheServerNoLongerKnowsIsDropped) {
  KeptEntries kept;
  fuse_entry_out out{};
  kept.Record(1, "a", Entry(10), kept.Ticket(), true, 0);
  kept.Record(2, "b", Entry(10), kept.Ticket(), true, 0);
  ASSERT_TRUE(kept.Keep(10, 2, 1));
  kept.Gone(10);
  EXPECT_FALSE(kept.Answer(1, "a", 2, &out));
  EXPECT_FALSE(kept.Answer(2, "b", 2, &out));
  EXPECT_EQ(Returned(kept.TakeReturns(2), 10), 2u);
  kept.Record(1, "c", Entry(11), kept.Ticket(), true, 0);
  ASSERT_TRUE(kept.Keep(11, 1, 1));
  kept.NoEntry(1, "c");
  EXPECT_FALSE(kept.Answer(1, "c", 2, &out));
  EXPECT_EQ(Returned(kept.TakeReturns(2), 11), 1u);
}

TEST(KeptEntriesTest, ExpiredEntriesAreNotUsedAndTheirLookupsGoBack) {
  KeptEntries kept;
  kept.Record(1, "f", Entry(10, 60), kept.Ticket(), true, 0);
  ASSERT_TRUE(kept.Keep(10, 3, 1 * kSec));
  fuse_entry_out out{};
  EXPECT_FALSE(kept.Answer(1, "f", 60 * kSec, &out));
  EXPECT_FALSE(kept.Keep(10, 1, 61 * kSec));  // forgotten after expiry: sent at once
  EXPECT_TRUE(kept.HasReturns(61 * kSec));    // the sweep is due
  EXPECT_EQ(Returned(kept.TakeReturns(61 * kSec), 10), 3u);
  EXPECT_EQ(kept.entries(), 0u);
  EXPECT_FALSE(kept.HasReturns(62 * kSec));
}

TEST(KeptEntriesTest, StaysBounded) {
  KeptEntries kept(/*max_entries=*/4);
  for (uint64_t n = 0; n < 8; ++n) {
    kept.Record(1, "f" + std::to_string(n), Entry(100 + n), kept.Ticket(), true, 0);
  }
  EXPECT_EQ(kept.entries(), 4u);
  // Expired ones make room.
  kept.Record(1, "late", Entry(200), kept.Ticket(), true, 61 * kSec);
  EXPECT_EQ(kept.entries(), 1u);
}

// A full table is walked for expired names only once one of them can have expired: a mount that
// has seen more names than the bound paid a walk over all of them on every LOOKUP and CREATE.
TEST(KeptEntriesTest, AFullTableIsNotWalkedBeforeANameCanHaveExpired) {
  KeptEntries kept(/*max_entries=*/4);
  for (uint64_t n = 0; n < 4; ++n) {
    kept.Record(1, "f" + std::to_string(n), Entry(100 + n, /*valid_s=*/60 + n), kept.Ticket(), true,
                0);
  }
  ASSERT_EQ(kept.entries(), 4u);
  const uint64_t before = kept.sweeps();
  for (uint64_t n = 0; n < 1000; ++n) {
    kept.Record(2, "g" + std::to_string(n), Entry(1000 + n), kept.Ticket(), true, 59 * kSec);
  }
  EXPECT_EQ(kept.entries(), 4u);     // no room: nothing new recorded
  EXPECT_EQ(kept.sweeps(), before);  // and no walk found that out a thousand times
  // A name already recorded is refreshed without a walk.
  kept.Record(1, "f0", Entry(100, 60), kept.Ticket(), true, 59 * kSec);
  EXPECT_EQ(kept.sweeps(), before);
  // "f1" expires at 61 s ("f0" now at 119 s): the first record after that walks once and fits.
  kept.Record(2, "late", Entry(200), kept.Ticket(), true, 61 * kSec);
  EXPECT_EQ(kept.sweeps(), before + 1);
  fuse_entry_out out{};
  EXPECT_TRUE(kept.Keep(200, 1, 62 * kSec));
  EXPECT_TRUE(kept.Answer(2, "late", 62 * kSec, &out));
  // Full again with "f2" due at 62 s and "f3" at 63 s: one walk each time one is due, no more.
  kept.Record(2, "late2", Entry(201), kept.Ticket(), true, 61 * kSec);
  EXPECT_EQ(kept.sweeps(), before + 1);
  kept.Record(2, "late2", Entry(201), kept.Ticket(), true, 62 * kSec);
  EXPECT_EQ(kept.sweeps(), before + 2);
  EXPECT_TRUE(kept.Keep(201, 1, 62 * kSec));
  // A name with a shorter life than all the others opens the table as soon as it expires.
  kept.Reset();
  for (uint64_t n = 0; n < 3; ++n) {
    kept.Record(1, "h" + std::to_string(n), Entry(300 + n, 60), kept.Ticket(), true, 100 * kSec);
  }
  kept.Record(1, "short", Entry(400, /*valid_s=*/1), kept.Ticket(), true, 100 * kSec);
  const uint64_t after_reset = kept.sweeps();
  kept.Record(1, "next", Entry(401), kept.Ticket(), true, 100 * kSec + kSec / 2);
  EXPECT_EQ(kept.sweeps(), after_reset);
  kept.Record(1, "next", Entry(401), kept.Ticket(), true, 101 * kSec);
  EXPECT_EQ(kept.sweeps(), after_reset + 1);
  EXPECT_TRUE(kept.Keep(401, 1, 101 * kSec));
}

// Names recorded at a steady rate expire one by one: each walk would free one name, and the next
// record walk again. A full table is walked at most once a second.
TEST(KeptEntriesTest, AFullTableRefilledAtASteadyRateIsWalkedOnceASecond) {
  constexpr uint64_t kMs = 1'000'000;
  KeptEntries kept(/*max_entries=*/100);
  uint64_t n = 0;
  for (; n < 100; ++n) {  // one name a millisecond, each for 60 s
    kept.Record(1, "f" + std::to_string(n), Entry(100 + n), kept.Ticket(), true, n * kMs);
  }
  const uint64_t before = kept.sweeps();
  // From 60 s on, one name expires every millisecond while one is recorded every millisecond.
  for (uint64_t t = 60'000; t < 60'050; ++t, ++n) {
    kept.Record(1, "f" + std::to_string(n), Entry(100 + n), kept.Ticket(), true, t * kMs);
  }
  EXPECT_EQ(kept.sweeps(), before + 1);
  EXPECT_EQ(kept.entries(), 100u);  // the first walk freed one; the others were refused
  kept.Record(1, "f" + std::to_string(n), Entry(100 + n), kept.Ticket(), true, 61'000 * kMs);
  EXPECT_EQ(kept.sweeps(), before + 2);  // a second later: walked again, and ~1,000 freed
  EXPECT_LT(kept.entries(), 100u);
}

}  // namespace
}  // namespace ringfs::frontend
