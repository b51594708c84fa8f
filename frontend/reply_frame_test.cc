// The reply-frame checks BackendChannel runs on every frame from the server.
#include "frontend/reply_frame.h"

#include <gtest/gtest.h>

#include "common/dir_attrs.h"
#include "common/node_handle.h"
#include "common/wire.h"

namespace ringfs::frontend {
namespace {

fuse_out_header Header(size_t body, int32_t error = 0, uint64_t unique = 2) {
  return fuse_out_header{static_cast<uint32_t>(sizeof(fuse_out_header) + body), error, unique};
}

TEST(ReplyFrameTest, BodyLengthWithinHeaderAndFrameLimit) {
  EXPECT_EQ(ReplyBodyBytes(Header(0)), 0u);
  EXPECT_EQ(ReplyBodyBytes(Header(wire::kMaxFrameBytes)), wire::kMaxFrameBytes);
  EXPECT_FALSE(ReplyBodyBytes(Header(wire::kMaxFrameBytes + 1)));
  EXPECT_FALSE(ReplyBodyBytes(fuse_out_header{15, 0, 2}));
}

TEST(ReplyFrameTest, NotificationsAreWholeRecordsOnlyWhereNegotiated) {
  const size_t one = sizeof(wire::NodeHandleRecord);
  fuse_out_header notify = Header(2 * one, wire::kNotifyNodeHandles, 0);
  EXPECT_EQ(NotificationRecords(notify, 2 * one, true), 2u);
  EXPECT_EQ(NotificationRecords(notify, 2 * one, false), 0u);
  EXPECT_EQ(NotificationRecords(notify, one + 1, true), 0u);
  EXPECT_EQ(NotificationRecords(notify, 0, true), 0u);
  EXPECT_EQ(NotificationRecords(Header(one, 0, 0), one, true), 0u);
}

TEST(ReplyFrameTest, BodiesErrorsAndTrailers) {
  char buffer[1024];
  const size_t entry = sizeof(fuse_entry_out), trailer = sizeof(wire::DirAttrTrailer);
  PendingReply mkdir{0, FUSE_MKDIR, buffer, sizeof(buffer), entry, entry};
  EXPECT_TRUE(ValidReply(mkdir, Header(entry), entry, {}));
  EXPECT_FALSE(ValidReply(mkdir, Header(entry - 1), entry - 1, {}));
  EXPECT_TRUE(ValidReply(mkdir, Header(0, -ENOENT), 0, {}));
  EXPECT_FALSE(ValidReply(mkdir, Header(8, -ENOENT), 8, {}));
  EXPECT_FALSE(ValidReply(mkdir, Header(0, 1), 0, {}));
  EXPECT_FALSE(ValidReply(mkdir, Header(0, -512), 0, {}));
  // Trailers: only negotiated, whole, at most two, and within the buffer.
  EXPECT_EQ(DirAttrTrailerBytes(mkdir, entry + trailer, {.dir_attrs = true}),
            static_cast<long>(trailer));
  EXPECT_EQ(DirAttrTrailerBytes(mkdir, entry + trailer, {}), -1);
  EXPECT_EQ(DirAttrTrailerBytes(mkdir, entry + trailer + 1, {.dir_attrs = true}), -1);
  EXPECT_EQ(DirAttrTrailerBytes(mkdir, entry + 3 * trailer, {.dir_attrs = true}), -1);
  EXPECT_TRUE(
      ValidReply(mkdir, Header(entry + 2 * trailer), entry + 2 * trailer, {.dir_attrs = true}));
  PendingReply small = mkdir;
  small.capacity = entry + trailer;
  EXPECT_FALSE(
      ValidReply(small, Header(entry + 2 * trailer), entry + 2 * trailer, {.dir_attrs = true}));
  PendingReply read{0, FUSE_READ, buffer, sizeof(buffer), 0, 512};
  EXPECT_EQ(DirAttrTrailerBytes(read, 512 + trailer, {.dir_attrs = true}), -1);
  // A LOOKUP's one trailer (an empty directory) only where empty-dir hints were negotiated.
  PendingReply lookup{0, FUSE_LOOKUP, buffer, sizeof(buffer), entry, entry};
  EXPECT_EQ(DirAttrTrailerBytes(lookup, entry + trailer, {.dir_attrs = true}), -1);
  EXPECT_EQ(DirAttrTrailerBytes(lookup, entry + trailer, {.empty_dir_hints = true}), -1);
  EXPECT_EQ(
      DirAttrTrailerBytes(lookup, entry + trailer, {.dir_attrs = true, .empty_dir_hints = true}),
      static_cast<long>(trailer));
  EXPECT_EQ(DirAttrTrailerBytes(lookup, entry + 2 * trailer,
                                {.dir_attrs = true, .empty_dir_hints = true}),
            -1);
  EXPECT_TRUE(ValidReply(lookup, Header(entry + trailer), entry + trailer,
                         {.dir_attrs = true, .empty_dir_hints = true}));
}

// With listing attrs, a listing of any length up to the request's size ends with exactly one
// record; without them the same bytes are names.
TEST(ReplyFrameTest, AListingEndsWithItsDirectorysRecordOnlyWhereNegotiated) {
  char buffer[1024];
  const size_t trailer = sizeof(wire::DirAttrTrailer);
  for (uint32_t opcode : {FUSE_READDIR, FUSE_READDIRPLUS}) {
    PendingReply list{0, opcode, buffer, sizeof(buffer), 0, 600};
    EXPECT_EQ(DirAttrTrailerBytes(list, trailer, {.dir_attrs = true, .listing_attrs = true}),
              static_cast<long>(trailer));
    EXPECT_EQ(DirAttrTrailerBytes(list, 600 + trailer, {.dir_attrs = true, .listing_attrs = true}),
              static_cast<long>(trailer));
    EXPECT_EQ(DirAttrTrailerBytes(list, 601 + trailer, {.dir_attrs = true, .listing_attrs = true}),
              -1)
        << "too long";
    EXPECT_EQ(DirAttrTrailerBytes(list, trailer - 1, {.dir_attrs = true, .listing_attrs = true}),
              -1)
        << "no record";
    EXPECT_EQ(DirAttrTrailerBytes(list, 0, {.dir_attrs = true, .listing_attrs = true}), -1)
        << "the record is not optional";
    EXPECT_TRUE(ValidReply(list, Header(0, -EACCES), 0, {.dir_attrs = true, .listing_attrs = true}))
        << "errors carry none";
    EXPECT_TRUE(ValidReply(list, Header(100 + trailer), 100 + trailer,
                           {.dir_attrs = true, .listing_attrs = true}));
    // Not negotiated: a plain listing, whatever its length.
    EXPECT_EQ(DirAttrTrailerBytes(list, trailer, {.dir_attrs = true}), 0);
    EXPECT_EQ(DirAttrTrailerBytes(list, 600 + trailer, {.dir_attrs = true}), -1);
    // Within the buffer.
    PendingReply tight = list;
    tight.capacity = 600;
    EXPECT_FALSE(ValidReply(tight, Header(600 + trailer), 600 + trailer,
                            {.dir_attrs = true, .listing_attrs = true}));
  }
}

// With write attrs, a WRITE's success is its fuse_write_out and exactly one record; without
// them it is the fuse_write_out alone.
TEST(ReplyFrameTest, AWriteEndsWithItsFilesRecordOnlyWhereNegotiated) {
  char buffer[512];
  const size_t trailer = sizeof(wire::DirAttrTrailer);
  const size_t out = sizeof(fuse_write_out);
  PendingReply write{0, FUSE_WRITE, buffer, sizeof(buffer), out, out};
  const TrailerRules on{.dir_attrs = true, .write_attrs = true};
  EXPECT_EQ(DirAttrTrailerBytes(write, out + trailer, on), static_cast<long>(trailer));
  EXPECT_EQ(DirAttrTrailerBytes(write, out, on), -1) << "the record is not optional";
  EXPECT_EQ(DirAttrTrailerBytes(write, out + 2 * trailer, on), -1) << "one record only";
  EXPECT_EQ(DirAttrTrailerBytes(write, trailer, on), -1) << "no fuse_write_out";
  EXPECT_TRUE(ValidReply(write, Header(0, -ENOSPC), 0, on)) << "errors carry none";
  EXPECT_TRUE(ValidReply(write, Header(out + trailer), out + trailer, on));
  EXPECT_EQ(DirAttrTrailerBytes(write, out, {.dir_attrs = true}), 0);
  EXPECT_EQ(DirAttrTrailerBytes(write, out + trailer, {.dir_attrs = true}), -1);
  PendingReply tight = write;
  tight.capacity = out + trailer - 1;
  EXPECT_FALSE(ValidReply(tight, Header(out + trailer), out + trailer, on));
}

// With open attrs, an OPEN's success is its fuse_open_out and exactly one record; without them
// (or on a CREATE) it is the plain answer.
TEST(ReplyFrameTest, AnOpenEndsWithItsFilesRecordOnlyWhereNegotiated) {
  char buffer[512];
  const size_t trailer = sizeof(wire::DirAttrTrailer);
  const size_t out = sizeof(fuse_open_out);
  PendingReply open{0, FUSE_OPEN, buffer, sizeof(buffer), out, out};
  const TrailerRules on{.dir_attrs = true, .open_attrs = true};
  EXPECT_EQ(DirAttrTrailerBytes(open, out + trailer, on), static_cast<long>(trailer));
  EXPECT_EQ(DirAttrTrailerBytes(open, out, on), -1) << "the record is not optional";
  EXPECT_EQ(DirAttrTrailerBytes(open, out + 2 * trailer, on), -1) << "one record only";
  EXPECT_TRUE(ValidReply(open, Header(0, -EACCES), 0, on)) << "errors carry none";
  EXPECT_EQ(DirAttrTrailerBytes(open, out, {.dir_attrs = true}), 0);
  EXPECT_EQ(DirAttrTrailerBytes(open, out + trailer, {.dir_attrs = true}), -1);
  const size_t entry_open = sizeof(fuse_entry_out) + out;
  PendingReply create{0, FUSE_CREATE, buffer, sizeof(buffer), entry_open, entry_open};
  EXPECT_EQ(DirAttrTrailerBytes(create, entry_open, on), 0) << "a CREATE carries no open record";
}

}  // namespace
}  // namespace ringfs::frontend
