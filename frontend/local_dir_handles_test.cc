// The mount's own directory handles (handle-less listings): what is ours, what reaches the
// server in its place, and the OPENDIR/RELEASEDIR answers.
#include "frontend/local_dir_handles.h"

#include <gtest/gtest.h>
#include <linux/fuse.h>

#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/wire.h"
#include "frontend/complete_dirs.h"
#include "frontend/dir_ends.h"
#include "frontend/local_answer.h"

namespace ringfs::frontend {
namespace {

constexpr uint64_t kServerFhWithBit63 = wire::kClientDirHandleBit | 0x1234'5678;

TEST(LocalDirHandlesTest, HandlesAreDistinctOursUntilReleasedAndHaveBit63) {
  LocalDirHandles handles;
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t fh = handles.Open();
    EXPECT_NE(fh & wire::kClientDirHandleBit, 0u);
    EXPECT_TRUE(seen.insert(fh).second) << "handed out twice";
    EXPECT_TRUE(handles.IsLocal(fh));
  }
  EXPECT_EQ(handles.open_count(), 1000u);
  const uint64_t first = *seen.begin();
  EXPECT_TRUE(handles.Release(first));
  EXPECT_FALSE(handles.IsLocal(first));
  EXPECT_FALSE(handles.Release(first)) << "released once";
  // A server's handle, bit 63 or not, is never ours.
  EXPECT_FALSE(handles.IsLocal(kServerFhWithBit63));
  EXPECT_FALSE(handles.Release(kServerFhWithBit63));
  EXPECT_FALSE(handles.IsLocal(17));
}

TEST(LocalDirHandlesTest, OnlyOurHandlesBecomeFhZeroOnTheirWayToTheServer) {
  LocalDirHandles handles;
  const uint64_t ours = handles.Open();
  for (uint32_t opcode : {FUSE_READDIR, FUSE_READDIRPLUS}) {
    for (uint64_t fh : {ours, kServerFhWithBit63, uint64_t{17}}) {
      fuse_read_in in{};
      in.fh = fh;
      in.offset = 99;
      in.size = 4096;
      handles.ForServer(opcode, reinterpret_cast<char*>(&in), sizeof(in));
      EXPECT_EQ(in.fh, fh == ours ? 0u : fh) << opcode;
      EXPECT_EQ(in.offset, 99u);
      EXPECT_EQ(in.size, 4096u);
    }
  }
  fuse_fsync_in sync{};
  sync.fh = ours;
  sync.fsync_flags = 1;
  handles.ForServer(FUSE_FSYNCDIR, reinterpret_cast<char*>(&sync), sizeof(sync));
  EXPECT_EQ(sync.fh, 0u);
  EXPECT_EQ(sync.fsync_flags, 1u);

  fuse_setattr_in setattr{};
  setattr.valid = FATTR_FH | FATTR_MODE;
  setattr.fh = ours;
  setattr.mode = 0700;
  handles.ForServer(FUSE_SETATTR, reinterpret_cast<char*>(&setattr), sizeof(setattr));
  EXPECT_EQ(setattr.valid, static_cast<uint32_t>(FATTR_MODE)) << "the node, not a handle";
  EXPECT_EQ(setattr.fh, 0u);
  EXPECT_EQ(setattr.mode, 0700u);
  setattr.valid = FATTR_FH | FATTR_SIZE;
  setattr.fh = kServerFhWithBit63;
  handles.ForServer(FUSE_SETATTR, reinterpret_cast<char*>(&setattr), sizeof(setattr));
  EXPECT_EQ(setattr.valid, static_cast<uint32_t>(FATTR_FH | FATTR_SIZE));
  EXPECT_EQ(setattr.fh, kServerFhWithBit63);

  // Anything else, and a truncated struct, is left alone.
  fuse_read_in read{};
  read.fh = ours;
  handles.ForServer(FUSE_READ, reinterpret_cast<char*>(&read), sizeof(read));
  EXPECT_EQ(read.fh, ours);
  handles.ForServer(FUSE_READDIR, reinterpret_cast<char*>(&read), offsetof(fuse_read_in, fh) + 4);
  EXPECT_EQ(read.fh, ours);
}

TEST(LocalDirHandlesTest, OpendirIsAnsweredOnlyWhileTheServerListsByNode) {
  LocalDirHandles handles;
  DirEnds ends;
  fuse_open_in in{};
  alignas(8) char body[sizeof(fuse_entry_out)];
  LocalCaches caches;
  caches.local_dirs = &handles;
  caches.dir_ends = &ends;
  EXPECT_FALSE(AnswerLocally(FUSE_OPENDIR, 5, &in, sizeof(in), {}, caches, body, 0).has_value())
      << "the server does not list by node";
  caches.open_dirs_locally = true;
  auto answer = AnswerLocally(FUSE_OPENDIR, 5, &in, sizeof(in), {}, caches, body, 0);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->error, 0);
  ASSERT_EQ(answer->body_size, sizeof(fuse_open_out));
  fuse_open_out out;
  std::memcpy(&out, body, sizeof(out));
  EXPECT_TRUE(handles.IsLocal(out.fh));
  EXPECT_EQ(out.open_flags, 0u) << "no cached listing: each opendir lists anew";
  EXPECT_FALSE(AnswerLocally(FUSE_OPENDIR, 5, &in, sizeof(in), {}, LocalCaches{}, body, 0))
      << "feature off";

  // RELEASEDIR: ours is answered here (also once the server no longer lists by node: it never
  // knew the handle), a server's goes to it; both forget the listing's end.
  caches.open_dirs_locally = false;
  fuse_release_in release{};
  release.fh = out.fh;
  ends.Asking(out.fh, 1, 0, 4096, false);
  answer = AnswerLocally(FUSE_RELEASEDIR, 5, &release, sizeof(release), {}, caches, body, 0);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->error, 0);
  EXPECT_EQ(answer->body_size, 0u);
  EXPECT_FALSE(handles.IsLocal(out.fh));
  EXPECT_EQ(ends.size(), 0u);
  release.fh = kServerFhWithBit63;
  EXPECT_FALSE(AnswerLocally(FUSE_RELEASEDIR, 5, &release, sizeof(release), {}, caches, body, 0));
}

// The first READDIRPLUS of an open of a directory whose page the mount kept (KeptListings): the
// page, but only at offset 0 of a handle of the mount's own while the server lists by node, for
// the caller it was read for, and not while an early unlink is outstanding.
TEST(LocalDirHandlesTest, AKeptPageAnswersOnlyTheFirstReaddirplusOfOurHandleForItsCaller) {
  constexpr uint64_t kSec = 1'000'000'000;
  LocalDirHandles handles;
  DirEnds ends;
  CompleteDirs dirs(60 * kSec, 4096, 1 << 18, /*listing_lifetime_ns=*/60 * kSec);
  // The server's answer to the look: ".", "..", "a", with node ids.
  std::vector<char> reply;
  uint64_t cookie = 1;
  for (std::string name : {".", "..", "a"}) {
    const size_t at = reply.size();
    reply.resize(at + FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET_DIRENTPLUS + name.size()), 0);
    fuse_direntplus e{};
    e.entry_out.nodeid = 40 + cookie;
    e.dirent.off = cookie++;
    e.dirent.namelen = static_cast<uint32_t>(name.size());
    std::memcpy(reply.data() + at, &e, FUSE_NAME_OFFSET_DIRENTPLUS);
    std::memcpy(reply.data() + at + FUSE_NAME_OFFSET_DIRENTPLUS, name.data(), name.size());
  }
  const uint64_t caller = CallerKey(1000, 100);
  const uint64_t ticket = dirs.ListingSent(5, kSec, caller);
  ASSERT_NE(ticket, 0u);
  dirs.ListingAnswered(5, ticket, kSec, 4096, reply);
  dirs.ListingEnded(5, kSec);

  LocalCaches caches;
  caches.local_dirs = &handles;
  caches.dir_ends = &ends;
  caches.dirs = &dirs;
  caches.open_dirs_locally = true;
  caches.caller = caller;
  fuse_read_in in{};
  in.fh = handles.Open();
  in.size = 4096;
  std::vector<char> body(4096);
  auto replay = [&](uint32_t opcode) {
    return AnswerLocally(opcode, 5, &in, sizeof(in), {}, caches, body.data(), 2 * kSec);
  };
  std::optional<LocalAnswer> answer = replay(FUSE_READDIRPLUS);
  ASSERT_TRUE(answer.has_value());
  ASSERT_EQ(answer->body_size, reply.size());
  fuse_direntplus first;
  std::memcpy(&first, body.data(), sizeof(first));
  EXPECT_EQ(first.entry_out.nodeid, 0u) << "names only";
  EXPECT_TRUE(ends.AtEnd(in.fh, 3)) << "the page held the end";

  EXPECT_FALSE(replay(FUSE_READDIR)) << "plain READDIR";
  caches.unlinks_outstanding = true;
  EXPECT_FALSE(replay(FUSE_READDIRPLUS)) << "an early unlink may not be in the page";
  caches.unlinks_outstanding = false;
  caches.caller = CallerKey(0, 0);
  EXPECT_FALSE(replay(FUSE_READDIRPLUS)) << "another caller";
  caches.caller = caller;
  caches.open_dirs_locally = false;
  EXPECT_FALSE(replay(FUSE_READDIRPLUS)) << "the server lists by handle now";
  caches.open_dirs_locally = true;
  in.offset = 2;
  EXPECT_FALSE(replay(FUSE_READDIRPLUS)) << "not at offset 0";
  in.offset = 0;
  in.fh = kServerFhWithBit63;
  EXPECT_FALSE(replay(FUSE_READDIRPLUS)) << "a server's handle";
}

}  // namespace
}  // namespace ringfs::frontend
