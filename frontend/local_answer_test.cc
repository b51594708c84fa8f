// What ringfs-mount answers without the server: FLUSH, a directory's GETATTR right after a
// create/remove reply or a listing brought its attributes, a file's after its write (DirAttrCache).
#include "frontend/local_answer.h"

#include <gtest/gtest.h>
#include <linux/fuse.h>

#include <cerrno>
#include <cstring>
#include <functional>

#include "frontend/complete_dirs.h"
#include "frontend/dir_attr_cache.h"

namespace ringfs::frontend {
namespace {

constexpr uint64_t kSec = 1'000'000'000;

fuse_attr_out Attr(uint64_t ino, uint64_t ctime, uint64_t valid_s = 1) {
  fuse_attr_out out{};
  out.attr_valid = valid_s;
  out.attr.ino = ino;
  out.attr.ctime = ctime;
  return out;
}

TEST(DirAttrCacheTest, AnswersOnceThenForgets) {
  DirAttrCache cache;
  cache.Offer(5, Attr(5, 10), 0);
  auto first = cache.Take(5, kSec / 4);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->attr.ctime, 10u);
  // The kernel may keep it only for the snapshot's remaining lifetime.
  EXPECT_EQ(first->attr_valid, 0u);
  EXPECT_EQ(first->attr_valid_nsec, 3 * kSec / 4);
  EXPECT_FALSE(cache.Take(5, kSec / 4).has_value());
}

TEST(DirAttrCacheTest, ExpiredSnapshotIsNotUsed) {
  DirAttrCache cache;
  cache.Offer(5, Attr(5, 10), 0);
  EXPECT_FALSE(cache.Take(5, kSec).has_value());
  cache.Offer(6, Attr(6, 10, /*valid_s=*/0), 0);  // the mount asked for no attribute caching
  EXPECT_EQ(cache.size(), 0u);
}

TEST(DirAttrCacheTest, OlderSnapshotNeverReplacesNewer) {
  DirAttrCache cache;
  cache.Offer(5, Attr(5, 20), 0);
  cache.Offer(5, Attr(5, 10), 1);  // a reply that overtook another on a different connection
  EXPECT_EQ(cache.Take(5, 2)->attr.ctime, 20u);
  cache.Offer(5, Attr(5, 20), 0);
  cache.Offer(5, Attr(5, 30), 1);
  EXPECT_EQ(cache.Take(5, 2)->attr.ctime, 30u);
}

TEST(DirAttrCacheTest, StaysBounded) {
  DirAttrCache cache(/*max_entries=*/8);
  for (uint64_t i = 0; i < 100; ++i) cache.Offer(i + 2, Attr(i + 2, 1), 0);
  EXPECT_LE(cache.size(), 8u);
}

// A listing's record changed nothing: arriving after this mount learned of anything newer about
// its directory (a change's record, a chmod sent, an invalidation, an answer given, a reset),
// it must not come back, even when nothing is left to compare its ctime with.
TEST(DirAttrCacheTest, AListingRecordNeverFollowsWhatWasLearnedAfterItWasSent) {
  DirAttrCache cache;
  auto late = [&](const std::function<void()>& learned) {
    const uint64_t ticket = cache.Ticket();
    learned();
    cache.OfferListing(5, Attr(5, 10, 60), ticket, 1);
    return cache.Take(5, 2).has_value();
  };
  EXPECT_TRUE(late([] {})) << "nothing learned meanwhile";
  EXPECT_FALSE(late([&] { cache.Drop(5); })) << "a chmod sent, or an invalidation";
  EXPECT_FALSE(late([&] { cache.Offer(5, Attr(5, 20, 60), 0), cache.Take(5, 1); }))
      << "a create's record, already answered";
  EXPECT_FALSE(late([&] { cache.Take(5, 1); })) << "a GETATTR that went to the server";
  EXPECT_FALSE(late([&] { cache.Reset(); })) << "a reset";
  EXPECT_FALSE(late([&] { cache.Offer(5, Attr(5, 20, /*valid_s=*/0), 0); }))
      << "a change's record, even one not kept";
  EXPECT_FALSE(late([&] { cache.Changed(5); })) << "a change answered without a record";
  EXPECT_TRUE(late([&] { cache.Drop(5 + 1); })) << "another directory (another stripe)";
  // Sent after: accepted, and an older ctime still never replaces a newer record.
  cache.Offer(5, Attr(5, 30, 60), 0);
  cache.OfferListing(5, Attr(5, 20, 60), cache.Ticket(), 1);
  EXPECT_EQ(cache.Take(5, 2)->attr.ctime, 30u);
  cache.OfferListing(5, Attr(5, 30, 60), cache.Ticket(), 1);
  EXPECT_TRUE(cache.Take(5, 2).has_value()) << "same ctime, later atime";
}

// The stat after a listing comes at once: an unused record goes after a second, while the
// answer keeps the attributes' own lifetime.
TEST(DirAttrCacheTest, AListingRecordIsKeptBrieflyAndAnswersForItsLifetime) {
  DirAttrCache cache;
  cache.OfferListing(5, Attr(5, 10, 60), cache.Ticket(), 0);
  auto answer = cache.Take(5, kSec / 2);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->attr_valid, 59u);
  cache.OfferListing(5, Attr(5, 10, 60), cache.Ticket(), 0);
  EXPECT_FALSE(cache.Take(5, kSec).has_value());
  cache.Offer(6, Attr(6, 10, 60), 0);
  EXPECT_TRUE(cache.Take(6, 2 * kSec).has_value()) << "a change's record lives its lifetime";
}

fuse_attr_out Written(uint64_t ino, uint64_t ctime, uint64_t size) {
  fuse_attr_out out = Attr(ino, ctime, 60);
  out.attr.size = size;
  return out;
}

// A write's record (write attrs): the file as the server saw it after that write. Writes of one
// file may be answered out of order; whatever else changes the file, or a name, goes first.
TEST(DirAttrCacheTest, AWriteRecordIsTheFilesLatestStateOrNothing) {
  DirAttrCache cache;
  // Two writes in flight, answered in the other order: the later state stays, also when the
  // change times tie (a coarse clock) and only the size tells.
  uint64_t ticket = cache.Ticket();
  cache.OfferWrite(7, Written(7, 20, 200), ticket, cache.Reads(7), 1);
  cache.OfferWrite(7, Written(7, 10, 100), ticket, cache.Reads(7), 1);
  EXPECT_EQ(cache.Take(7, 2)->attr.size, 200u);
  ticket = cache.Ticket();
  cache.OfferWrite(7, Written(7, 20, 300), ticket, cache.Reads(7), 3);
  cache.OfferWrite(7, Written(7, 20, 250), ticket, cache.Reads(7), 3);
  EXPECT_EQ(cache.Take(7, 4)->attr.size, 300u);
  // Times and sizes tie (an overwrite within a coarse clock tick): the one that filled a hole
  // has more blocks, and is the later.
  ticket = cache.Ticket();
  fuse_attr_out filled = Written(7, 20, 300), before = Written(7, 20, 300);
  filled.attr.blocks = 16;
  before.attr.blocks = 8;
  cache.OfferWrite(7, filled, ticket, cache.Reads(7), 3);
  cache.OfferWrite(7, before, ticket, cache.Reads(7), 3);
  EXPECT_EQ(cache.Take(7, 4)->attr.blocks, 16u);

  auto late = [&](const std::function<void()>& learned) {
    const uint64_t sent = cache.Ticket();
    const uint32_t reads = cache.Reads(7);
    learned();
    cache.OfferWrite(7, Written(7, 30, 400), sent, reads, 5);
    return cache.Take(7, 6).has_value();
  };
  EXPECT_TRUE(late([] {})) << "nothing learned meanwhile";
  EXPECT_FALSE(late([&] { cache.Drop(7); })) << "a truncate or chmod sent, an invalidation";
  EXPECT_FALSE(late([&] { cache.NamesChanged(); })) << "an unlink or rename of some name";
  EXPECT_FALSE(late([&] { cache.Take(7, 5); })) << "a GETATTR that went to the server";
  EXPECT_FALSE(late([&] { cache.Reset(); })) << "a reset";
  EXPECT_TRUE(late([&] { cache.Drop(7 + 1); })) << "another file (another stripe)";
  EXPECT_FALSE(late([&] { cache.Read(7); })) << "a READ sent: relatime may move the atime";
  EXPECT_TRUE(late([&] { cache.Read(7 + 1); })) << "another file read";
  EXPECT_FALSE(late([&] { cache.Apply({.dropped = 7}); })) << "a change of it sent or ended";
  EXPECT_FALSE(late([&] { cache.Apply({.read = 7}); }));
  EXPECT_FALSE(late([&] { cache.Apply({.names = true}); }));
  EXPECT_TRUE(late([&] { cache.Apply({}); })) << "a request that changes no file";
  // A change whose answer never came: nothing is kept until it settles, nor taken from a
  // request sent before it did.
  EXPECT_FALSE(late([&] { cache.Unsettle(); }));
  EXPECT_FALSE(late([] {})) << "still unsettled";
  EXPECT_FALSE(late([&] { cache.Settle(); })) << "sent before it settled";
  EXPECT_TRUE(late([] {})) << "settled";
  cache.OfferWrite(7, Written(7, 36, 460), cache.Ticket(), cache.Reads(7), 5);
  cache.Offer(2, Attr(2, 50, 60), 5);
  cache.Unsettle();
  EXPECT_EQ(cache.size(), 0u) << "what is held may be hidden by the change when it runs";
  cache.Unsettle();
  cache.Settle();
  EXPECT_FALSE(late([] {})) << "one of two still unsettled";
  cache.Settle();
  EXPECT_TRUE(late([] {}));
  // A READ sent after the record arrived: the record's atime is older than the file's.
  cache.OfferWrite(7, Written(7, 35, 450), cache.Ticket(), cache.Reads(7), 5);
  cache.Read(7);
  EXPECT_FALSE(cache.Take(7, 6).has_value());

  // Held records go with a name change; a directory's change record stays.
  cache.Offer(2, Attr(2, 50, 60), 5);
  cache.OfferWrite(7, Written(7, 40, 500), cache.Ticket(), cache.Reads(7), 5);
  cache.NamesChanged();
  EXPECT_FALSE(cache.Take(7, 6).has_value());
  EXPECT_TRUE(cache.Take(2, 6).has_value());
  // Kept a second at most, answered for the attributes' lifetime.
  cache.OfferWrite(7, Written(7, 40, 500), cache.Ticket(), cache.Reads(7), 0);
  EXPECT_FALSE(cache.Take(7, kSec).has_value());
}

// A tar leaves one write record per file that no stat takes: when the cache is full they go
// before the records of directories' changes.
TEST(DirAttrCacheTest, UnusedWriteRecordsMakeRoomBeforeChanges) {
  DirAttrCache cache(/*max_entries=*/8);
  cache.Offer(2, Attr(2, 10, 60), 0);
  for (uint64_t i = 0; i < 20; ++i)
    cache.OfferWrite(100 + i, Written(100 + i, 10, 1), cache.Ticket(), cache.Reads(100 + i), 0);
  EXPECT_LE(cache.size(), 8u);
  EXPECT_TRUE(cache.Take(2, 1).has_value());
  EXPECT_TRUE(cache.Take(119, 1).has_value()) << "the newest write record is there";
}

TEST(LocalAnswerTest, FlushIsRefusedSoTheKernelStopsSendingIt) {
  fuse_flush_in in{};
  char body[128];
  auto answer = AnswerLocally(FUSE_FLUSH, 9, &in, sizeof(in), {}, LocalCaches{}, body, 0);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->error, ENOSYS);
}

TEST(LocalAnswerTest, GetattrComesFromThePostOpSnapshotOnce) {
  DirAttrCache cache;
  cache.Offer(9, Attr(9, 77), 0);
  fuse_getattr_in in{};
  fuse_attr_out body{};
  auto answer = AnswerLocally(FUSE_GETATTR, 9, &in, sizeof(in), {}, LocalCaches{&cache}, &body, 1);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->error, 0);
  EXPECT_EQ(answer->body_size, sizeof(fuse_attr_out));
  EXPECT_EQ(body.attr.ctime, 77u);
  EXPECT_FALSE(AnswerLocally(FUSE_GETATTR, 9, &in, sizeof(in), {}, LocalCaches{&cache}, &body, 1).has_value());
}

// fstat() of a written file asks through its handle: the record is the node's all the same.
TEST(LocalAnswerTest, GetattrThroughAnOpenHandleIsAnsweredFromTheRecordToo) {
  DirAttrCache cache;
  cache.OfferWrite(9, Attr(9, 77, 60), cache.Ticket(), cache.Reads(9), 0);
  fuse_getattr_in in{};
  in.getattr_flags = FUSE_GETATTR_FH;
  fuse_attr_out body{};
  auto answer = AnswerLocally(FUSE_GETATTR, 9, &in, sizeof(in), {}, LocalCaches{&cache}, &body, 1);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(body.attr.ctime, 77u);
}

TEST(LocalAnswerTest, SetattrAndXattrChangesDropTheSnapshot) {
  for (uint32_t opcode : {FUSE_SETATTR, FUSE_SETXATTR, FUSE_REMOVEXATTR}) {
    DirAttrCache cache;
    cache.Offer(9, Attr(9, 77), 0);
    char in[128] = {};
    char body[128];
    EXPECT_FALSE(AnswerLocally(opcode, 9, in, sizeof(in), {}, LocalCaches{&cache}, body, 1).has_value());
    EXPECT_EQ(cache.size(), 0u) << opcode;
  }
}

TEST(LocalAnswerTest, EverythingElseGoesToTheServer) {
  DirAttrCache cache;
  char in[128] = {};
  char body[128];
  for (uint32_t opcode : {FUSE_LOOKUP, FUSE_READ, FUSE_WRITE, FUSE_CREATE, FUSE_UNLINK}) {
    EXPECT_FALSE(AnswerLocally(opcode, 9, in, sizeof(in), {}, LocalCaches{&cache}, body, 1).has_value());
  }
}

TEST(LocalAnswerTest, LookupOfANameAbsentFromACompleteDirectoryIsANegativeEntry) {
  CompleteDirs dirs(/*lifetime_ns=*/60 * kSec);
  dirs.RecordCreated(9, dirs.Ticket(), 0);
  dirs.AddName(9, "made");
  const LocalCaches caches{.dirs = &dirs};
  // The body overwrites the name, as it does in a ring entry's payload.
  char buffer[sizeof(fuse_entry_out)] = "absent";
  auto answer = AnswerLocally(FUSE_LOOKUP, 9, nullptr, 0, {buffer, 7}, caches, buffer, kSec);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->error, 0);
  ASSERT_EQ(answer->body_size, sizeof(fuse_entry_out));
  fuse_entry_out out;
  std::memcpy(&out, buffer, sizeof(out));
  EXPECT_EQ(out.nodeid, 0u);
  EXPECT_EQ(out.entry_valid, 59u);  // what is left of the 60 s, asked 1 s after the MKDIR
  EXPECT_EQ(out.entry_valid_nsec, 0u);
  // Never longer than the knowledge: at 59 s, one second is left.
  std::memcpy(buffer, "absent", 7);
  ASSERT_TRUE(AnswerLocally(FUSE_LOOKUP, 9, nullptr, 0, {buffer, 7}, caches, buffer, 59 * kSec));
  std::memcpy(&out, buffer, sizeof(out));
  EXPECT_EQ(out.entry_valid, 1u);
  EXPECT_EQ(out.entry_valid_nsec, 0u);
  // A name this mount made, a directory it did not make, and after the lifetime: the server.
  char made[] = "made";
  EXPECT_FALSE(AnswerLocally(FUSE_LOOKUP, 9, nullptr, 0, {made, 5}, caches, buffer, kSec));
  char other[] = "absent";
  EXPECT_FALSE(AnswerLocally(FUSE_LOOKUP, 10, nullptr, 0, {other, 7}, caches, buffer, kSec));
  EXPECT_FALSE(AnswerLocally(FUSE_LOOKUP, 9, nullptr, 0, {other, 7}, caches, buffer, 61 * kSec));
}

}  // namespace
}  // namespace ringfs::frontend
