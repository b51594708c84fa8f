// AdjustOpenReply: write-only opens get FOPEN_DIRECT_IO, read-only ones FOPEN_NOFLUSH, nothing
// else changes.
#include "frontend/open_reply.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fuse.h>

#include <cstring>

namespace ringfs::frontend {
namespace {

uint32_t OpenFlagsAfter(uint32_t opcode, uint32_t flags) {
  char body[sizeof(fuse_entry_out) + sizeof(fuse_open_out)] = {};
  const size_t at = opcode == FUSE_CREATE ? sizeof(fuse_entry_out) : 0;
  fuse_open_out out{};
  out.fh = 77;
  out.open_flags = FOPEN_KEEP_CACHE;  // whatever the server set stays
  std::memcpy(body + at, &out, sizeof(out));
  if (opcode == FUSE_CREATE) {
    fuse_create_in in{};
    in.flags = flags;
    AdjustOpenReply(opcode, &in, sizeof(in), body, sizeof(body));
  } else {
    fuse_open_in in{};
    in.flags = flags;
    AdjustOpenReply(opcode, &in, sizeof(in), body, at + sizeof(out));
  }
  std::memcpy(&out, body + at, sizeof(out));
  EXPECT_EQ(out.fh, 77u);
  return out.open_flags;
}

TEST(OpenReplyTest, WriteOnlyOpensBypassThePageCache) {
  for (uint32_t opcode : {FUSE_OPEN, FUSE_CREATE}) {
    EXPECT_EQ(OpenFlagsAfter(opcode, O_WRONLY | O_APPEND), FOPEN_KEEP_CACHE | FOPEN_DIRECT_IO);
    EXPECT_EQ(OpenFlagsAfter(opcode, O_RDWR | O_TRUNC), FOPEN_KEEP_CACHE);
  }
}

TEST(OpenReplyTest, ReadOnlyOpensAreNotFlushedAtClose) {
  for (uint32_t opcode : {FUSE_OPEN, FUSE_CREATE}) {
    EXPECT_EQ(OpenFlagsAfter(opcode, O_RDONLY), FOPEN_KEEP_CACHE | FOPEN_NOFLUSH);
    EXPECT_EQ(OpenFlagsAfter(opcode, O_RDONLY | O_NOATIME), FOPEN_KEEP_CACHE | FOPEN_NOFLUSH);
    // Writes through it may be answered early (async_write): its close must wait for them.
    EXPECT_EQ(OpenFlagsAfter(opcode, O_WRONLY) & FOPEN_NOFLUSH, 0u);
    EXPECT_EQ(OpenFlagsAfter(opcode, O_RDWR) & FOPEN_NOFLUSH, 0u);
  }
}

TEST(OpenReplyTest, ShortOrForeignRepliesAreLeftAlone) {
  fuse_open_in in{};
  in.flags = O_WRONLY;
  char body[sizeof(fuse_open_out)] = {};
  AdjustOpenReply(FUSE_OPEN, &in, sizeof(in), body, sizeof(body) - 1);
  AdjustOpenReply(FUSE_OPEN, &in, sizeof(in) - 1, body, sizeof(body));
  AdjustOpenReply(FUSE_OPENDIR, &in, sizeof(in), body, sizeof(body));
  for (char c : body) EXPECT_EQ(c, 0);
}

// With a writeback cache the server opens for reading too and never O_APPEND; other flags stay.
TEST(OpenReplyTest, WritebackOpensAskForReadingAndDropAppend) {
  auto after = [](uint32_t opcode, uint32_t flags) {
    if (opcode == FUSE_CREATE) {
      fuse_create_in in{};
      in.flags = flags;
      in.mode = 0644;
      AdjustOpenRequestForWriteback(opcode, &in, sizeof(in));
      EXPECT_EQ(in.mode, 0644u);
      return in.flags;
    }
    fuse_open_in in{};
    in.flags = flags;
    AdjustOpenRequestForWriteback(opcode, &in, sizeof(in));
    return in.flags;
  };
  for (uint32_t opcode : {FUSE_OPEN, FUSE_CREATE}) {
    EXPECT_EQ(after(opcode, O_WRONLY | O_APPEND | O_TRUNC),
              static_cast<uint32_t>(O_RDWR | O_TRUNC));
    EXPECT_EQ(after(opcode, O_RDWR | O_APPEND), static_cast<uint32_t>(O_RDWR));
    EXPECT_EQ(after(opcode, O_RDONLY | O_NOATIME), static_cast<uint32_t>(O_RDONLY | O_NOATIME));
  }
  fuse_open_in untouched{};
  untouched.flags = O_WRONLY | O_APPEND;
  AdjustOpenRequestForWriteback(FUSE_GETATTR, &untouched, sizeof(untouched));
  EXPECT_EQ(untouched.flags, static_cast<uint32_t>(O_WRONLY | O_APPEND));
}

}  // namespace
}  // namespace ringfs::frontend
