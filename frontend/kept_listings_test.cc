#include "frontend/kept_listings.h"

#include <gtest/gtest.h>
#include <linux/fuse.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

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

// A READDIRPLUS answer with `names`, each with node id 100 + its index and attributes.
std::vector<char> PlusListing(const std::vector<std::string>& names) {
  std::vector<char> out;
  uint64_t cookie = 1;
  for (const std::string& name : names) {
    const size_t at = out.size();
    out.resize(at + FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET_DIRENTPLUS + name.size()), 0);
    fuse_direntplus e{};
    e.entry_out.nodeid = 99 + cookie;
    e.entry_out.generation = 1;
    e.entry_out.entry_valid = 60;
    e.entry_out.attr.mode = 0100644;
    e.entry_out.attr.ino = 99 + cookie;
    e.dirent.ino = 99 + cookie;
    e.dirent.off = cookie++;
    e.dirent.namelen = static_cast<uint32_t>(name.size());
    e.dirent.type = 8;
    std::memcpy(out.data() + at, &e, FUSE_NAME_OFFSET_DIRENTPLUS);
    std::memcpy(out.data() + at + FUSE_NAME_OFFSET_DIRENTPLUS, name.data(), name.size());
  }
  return out;
}

// The first page of `dir` read from the server at `now` (seconds): sent, answered with `reply`.
void ListPage(KeptListings& listings, uint64_t dir, uint64_t now, const std::vector<char>& reply,
              bool unsettled = false, uint64_t caller = CallerKey(0, 0)) {
  const uint64_t ticket = listings.ListingSent(dir, unsettled, now * kSec, caller);
  listings.Answered(dir, ticket, now * kSec, 4096, reply);
  listings.ListingEnded(dir, now * kSec);
}

// A replay for `dir` at `now` (seconds): its bytes, or nullopt.
std::optional<std::vector<char>> Replayed(KeptListings& listings, uint64_t dir, uint64_t now,
                                          uint32_t size = 4096, uint64_t caller = CallerKey(0, 0)) {
  std::vector<char> out(size);
  std::optional<size_t> n = listings.Replay(dir, size, caller, now * kSec, out.data());
  if (!n) return std::nullopt;
  out.resize(*n);
  return out;
}

TEST(KeptListingsTest, TheFirstPageIsReplayedWithoutNodesUntilItsDirectoryChanges) {
  KeptListings listings(60 * kSec);
  const std::vector<char> reply = PlusListing({".", "..", "a", "bb"});
  EXPECT_FALSE(Replayed(listings, 2, 0)) << "nothing listed yet";
  ListPage(listings, 2, 1, reply);
  std::optional<std::vector<char>> page = Replayed(listings, 2, 2);
  ASSERT_TRUE(page);
  ASSERT_EQ(page->size(), reply.size());
  // The same names, types and cookies; every entry without node or attributes.
  size_t at = 0;
  for (uint64_t cookie = 1; at < page->size(); ++cookie) {
    fuse_direntplus got, sent;
    std::memcpy(&got, page->data() + at, sizeof(got));
    std::memcpy(&sent, reply.data() + at, sizeof(sent));
    EXPECT_EQ(got.entry_out.nodeid, 0u);
    EXPECT_EQ(got.entry_out.attr.mode, 0u);
    EXPECT_EQ(got.entry_out.entry_valid, 0u);
    EXPECT_EQ(got.dirent.off, cookie);
    EXPECT_EQ(got.dirent.ino, sent.dirent.ino);
    EXPECT_EQ(got.dirent.type, 8u);
    const size_t len = FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET_DIRENTPLUS + got.dirent.namelen);
    EXPECT_EQ(std::memcmp(page->data() + at + FUSE_NAME_OFFSET_DIRENTPLUS,
                          reply.data() + at + FUSE_NAME_OFFSET_DIRENTPLUS, got.dirent.namelen),
              0);
    at += len;
  }
  EXPECT_EQ(at, page->size());
  EXPECT_TRUE(Replayed(listings, 2, 3)) << "again";
  EXPECT_FALSE(Replayed(listings, 2, 3, 8192)) << "a page asked for another size";
  EXPECT_FALSE(Replayed(listings, 3, 3)) << "another directory";
  EXPECT_TRUE(Keep(listings, 2, 4)) << "the kernel may keep what the replay filled";

  listings.Changed(2);
  EXPECT_FALSE(Replayed(listings, 2, 5)) << "a name changed since";
  EXPECT_EQ(listings.pages(), 0u) << "and the page went";
  ListPage(listings, 2, 6, reply);
  EXPECT_TRUE(Replayed(listings, 2, 7));

  // A change heard of while the READDIR was out: what it read may predate it.
  const uint64_t ticket = listings.ListingSent(2, false, 8 * kSec);
  listings.Changed(2);
  listings.Answered(2, ticket, 8 * kSec, 4096, reply);
  listings.ListingEnded(2, 8 * kSec);
  EXPECT_FALSE(Replayed(listings, 2, 9));
  // Sent while a change of this mount was unsettled: it may run at the server after it.
  ListPage(listings, 2, 10, reply, /*unsettled=*/true);
  EXPECT_FALSE(Replayed(listings, 2, 11));
  // An answer to an earlier READDIR than the last sent: not kept (whose it is is not known).
  const uint64_t earlier = listings.ListingSent(2, false, 14 * kSec);
  listings.ListingSent(2, false, 14 * kSec);
  listings.Answered(2, earlier, 14 * kSec, 4096, reply);
  EXPECT_FALSE(Replayed(listings, 2, 15));
  // An answer that is not the server's READDIRPLUS records: not kept.
  ListPage(listings, 2, 12, std::vector<char>(10, 'x'));
  EXPECT_FALSE(Replayed(listings, 2, 13));
}

TEST(KeptListingsTest, APageIsReplayedOnlyToTheCallerItWasReadFor) {
  KeptListings listings(60 * kSec);
  const std::vector<char> reply = PlusListing({".", "..", "a"});
  ListPage(listings, 2, 1, reply, false, CallerKey(1000, 1000));
  EXPECT_TRUE(Replayed(listings, 2, 2, 4096, CallerKey(1000, 1000)));
  EXPECT_FALSE(Replayed(listings, 2, 2, 4096, CallerKey(0, 0))) << "root (maybe squashed)";
  EXPECT_FALSE(Replayed(listings, 2, 2, 4096, CallerKey(1000, 1001))) << "another group";
  EXPECT_FALSE(Replayed(listings, 2, 2, 4096, CallerKey(1001, 1000))) << "another user";
}

TEST(KeptListingsTest, AReplayedPageLivesTheEntryLifetimeFromItsReadAndGoesOnAReset) {
  KeptListings listings(60 * kSec);
  const std::vector<char> reply = PlusListing({".", "..", "a"});
  ListPage(listings, 2, 0, reply);
  EXPECT_TRUE(Replayed(listings, 2, 59));
  EXPECT_FALSE(Replayed(listings, 2, 60)) << "its names' lifetime has passed";
  ListPage(listings, 2, 61, reply);
  listings.Reset();
  EXPECT_FALSE(Replayed(listings, 2, 62)) << "invalidations may have been lost";
  EXPECT_EQ(listings.pages(), 0u);
  ListPage(listings, 2, 63, reply);
  EXPECT_TRUE(Replayed(listings, 2, 64));
  listings.Disable();
  EXPECT_FALSE(Replayed(listings, 2, 65));
  ListPage(listings, 2, 66, reply);
  EXPECT_FALSE(Replayed(listings, 2, 67)) << "the server pushes no invalidations";

  // The kernel's copy filled by a replay dates from the page's READDIR, not from the replay.
  KeptListings fresh(60 * kSec);
  ListPage(fresh, 2, 0, reply);
  List(fresh, 2, 1, /*unsettled=*/true);  // poisons the kernel's copy: dropped at the next open
  EXPECT_FALSE(Keep(fresh, 2, 5));
  ASSERT_TRUE(Replayed(fresh, 2, 30)) << "the page itself is still current";
  EXPECT_TRUE(Keep(fresh, 2, 45));
  EXPECT_FALSE(Keep(fresh, 2, 61)) << "filled from a read 61 s old";
}

TEST(KeptListingsTest, KeptPagesStayBounded) {
  const std::vector<char> reply = PlusListing({".", "..", "a", "b", "c"});
  KeptListings listings(60 * kSec, /*max_dirs=*/1 << 16, /*max_page_bytes=*/3 * reply.size());
  for (uint64_t dir = 10; dir < 100; ++dir) {
    ListPage(listings, dir, 1, reply);
    EXPECT_LE(listings.page_bytes(), 3 * reply.size());
    EXPECT_TRUE(Replayed(listings, dir, 2)) << "the newest is kept: " << dir;
  }
  EXPECT_FALSE(Replayed(listings, 10, 2)) << "an old one went";
  std::vector<char> huge = PlusListing(std::vector<std::string>(40, std::string(200, 'n')));
  ListPage(listings, 5, 1, huge);
  EXPECT_FALSE(Replayed(listings, 5, 2)) << "larger than the bound";
  EXPECT_LE(listings.page_bytes(), 3 * reply.size());
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
