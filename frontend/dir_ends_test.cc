#include "frontend/dir_ends.h"

#include <gtest/gtest.h>
#include <linux/fuse.h>

#include <cstring>
#include <string>
#include <vector>

namespace ringfs::frontend {
namespace {

// A READDIR(PLUS) answer with `names`, cookies first_cookie, first_cookie + 1, ...
std::vector<char> Listing(bool plus, const std::vector<std::string>& names, uint64_t first_cookie) {
  std::vector<char> out;
  uint64_t cookie = first_cookie;
  for (const std::string& name : names) {
    const size_t head = plus ? sizeof(fuse_entry_out) : 0;
    const size_t at = out.size();
    out.resize(at + FUSE_DIRENT_ALIGN(head + FUSE_NAME_OFFSET + name.size()), 0);
    fuse_dirent d{};
    d.ino = cookie;
    d.off = cookie++;
    d.namelen = static_cast<uint32_t>(name.size());
    std::memcpy(out.data() + at + head, &d, FUSE_NAME_OFFSET);
    std::memcpy(out.data() + at + head + FUSE_NAME_OFFSET, name.data(), name.size());
  }
  return out;
}

// The server's answer `reply` to a READDIR of `fh` at `offset` for `size` bytes.
void Answer(DirEnds& ends, uint64_t fh, uint64_t offset, uint32_t size, bool plus,
            const std::vector<char>& reply, int error = 0) {
  static uint64_t unique = 100;
  ++unique;
  ends.Asking(fh, unique, offset, size, plus);
  ends.Learn(fh, unique, error, reply);
}

TEST(DirEndsTest, AShortAnswerEndsTheListingAtItsLastCookie) {
  for (bool plus : {false, true}) {
    DirEnds ends;
    Answer(ends, 7, 0, 4096, plus, Listing(plus, {".", "..", "a", "b"}, 1));
    EXPECT_TRUE(ends.AtEnd(7, 4)) << plus;
    EXPECT_FALSE(ends.AtEnd(7, 3));  // a seek back into the listing goes to the server
    EXPECT_FALSE(ends.AtEnd(8, 4));  // another handle
    ends.Released(7);
    EXPECT_FALSE(ends.AtEnd(7, 4));
    EXPECT_EQ(ends.size(), 0u);
  }
}

TEST(DirEndsTest, AnAnswerThatCouldHaveBeenCutByItsSizeSaysNothing) {
  DirEnds ends;
  std::vector<char> reply = Listing(true, {"a", "b", "c"}, 1);
  // Less room left than the longest entry needs: the server may have stopped for room.
  const uint32_t size = static_cast<uint32_t>(reply.size()) + 1000;
  Answer(ends, 7, 0, size, true, reply);
  EXPECT_FALSE(ends.AtEnd(7, 3));
  // The same names with room for any entry left: the end.
  Answer(ends, 7, 0, size + 200, true, reply);
  EXPECT_TRUE(ends.AtEnd(7, 3));
}

TEST(DirEndsTest, AnEmptyAnswerIsTheEndAtItsOffset) {
  DirEnds ends;
  Answer(ends, 7, 12, 4096, false, {});
  EXPECT_TRUE(ends.AtEnd(7, 12));
  // Empty because the size had no room for the next entry: not the end.
  Answer(ends, 7, 12, 64, false, {});
  EXPECT_FALSE(ends.AtEnd(7, 12));
}

TEST(DirEndsTest, ANewSnapshotOrAFailureForgetsTheOldEnd) {
  DirEnds ends;
  Answer(ends, 7, 0, 4096, true, Listing(true, {"a", "b"}, 1));
  ASSERT_TRUE(ends.AtEnd(7, 2));
  // rewinddir: a READDIR at offset 0 whose answer fills the page (more entries now).
  std::vector<std::string> many(40, std::string(90, 'n'));
  std::vector<char> full = Listing(true, many, 1);
  Answer(ends, 7, 0, static_cast<uint32_t>(full.size() + 16), true, full);
  EXPECT_FALSE(ends.AtEnd(7, 2));
  EXPECT_FALSE(ends.AtEnd(7, 40));
  Answer(ends, 7, 0, 4096, false, Listing(false, {"a"}, 1));
  ASSERT_TRUE(ends.AtEnd(7, 1));
  Answer(ends, 7, 0, 4096, false, {}, EIO);
  EXPECT_FALSE(ends.AtEnd(7, 1));
}

// A killed caller's READDIR may still be out when the next of the same handle is sent: an
// answer is only read with the request it answers.
TEST(DirEndsTest, AnAnswerToAnEarlierRequestTeachesNothing) {
  DirEnds ends;
  ends.Asking(7, 1, 0, 4096, false);   // killed while out
  ends.Asking(7, 2, 30, 4096, false);  // the next, at another offset
  ends.Learn(7, 1, 0, {});             // an empty answer, but to offset 0
  EXPECT_FALSE(ends.AtEnd(7, 0));
  EXPECT_FALSE(ends.AtEnd(7, 30));
  ends.Learn(7, 2, 0, {});
  EXPECT_TRUE(ends.AtEnd(7, 30));
  ends.Learn(7, 3, 0, {});  // nothing was asked as 3
  EXPECT_FALSE(ends.AtEnd(7, 30));
}

TEST(DirEndsTest, AMalformedAnswerIsIgnored) {
  DirEnds ends;
  std::vector<char> reply = Listing(false, {"a", "b"}, 1);
  reply.resize(reply.size() - 4);  // the last record cut short
  Answer(ends, 7, 0, 4096, false, reply);
  EXPECT_FALSE(ends.AtEnd(7, 2));
  EXPECT_FALSE(ends.AtEnd(7, 1));
  std::vector<char> zero_name(FUSE_NAME_OFFSET, 0);  // namelen 0
  Answer(ends, 7, 0, 4096, false, zero_name);
  EXPECT_FALSE(ends.AtEnd(7, 0));
}

TEST(DirEndsTest, AnAnswerOfTheMountsOwnIsLearnedAsTheServersWouldBe) {
  DirEnds ends;
  ends.Asking(7, 1, 0, 4096, true);  // a killed caller's READDIR, still out
  ends.Answered(7, 0, 4096, true, Listing(true, {".", "..", "a"}, 1));
  EXPECT_TRUE(ends.AtEnd(7, 3));
  ends.Learn(7, 1, 0, {});  // its late answer: not the end at its offset, and the end forgotten
  EXPECT_FALSE(ends.AtEnd(7, 0));
  EXPECT_FALSE(ends.AtEnd(7, 3));
  std::vector<char> full = Listing(true, {"a", "b", "c"}, 1);
  ends.Answered(7, 0, static_cast<uint32_t>(full.size()) + 1000, true, full);
  EXPECT_FALSE(ends.AtEnd(7, 3)) << "no room left for the longest entry: maybe cut";
  ends.Answered(8, 0, 4096, false, {});
  EXPECT_TRUE(ends.AtEnd(8, 0)) << "a new handle";
}

TEST(DirEndsTest, ItHoldsAtMostItsBound) {
  DirEnds ends(2);
  Answer(ends, 1, 0, 4096, false, {});
  Answer(ends, 2, 0, 4096, false, {});
  Answer(ends, 3, 0, 4096, false, {});
  EXPECT_EQ(ends.size(), 2u);
  EXPECT_FALSE(ends.AtEnd(3, 0));
  Answer(ends, 2, 5, 4096, false, {});  // a known handle is still updated
  EXPECT_TRUE(ends.AtEnd(2, 5));
}

}  // namespace
}  // namespace ringfs::frontend
