// EntriesItRemoves: the names an UNLINK, RMDIR, RENAME or RENAME2 frame removes or moves; nothing
// for other opcodes or cut-short arguments.
#include "frontend/removed_entries.h"

#include <gtest/gtest.h>

#include <string>

namespace ringfs::frontend {
namespace {

using wire::Invalidation;
using wire::InvalidationKind;

Invalidation Entry(uint64_t dir, const std::string& name) {
  Invalidation record;
  record.kind = InvalidationKind::kEntry;
  record.nodeid = dir;
  record.name = name;
  return record;
}

// The frame as the channel keeps it: header, argument struct, then the names in a second part.
std::vector<Invalidation> Parse(uint32_t opcode, uint64_t nodeid, std::string fixed,
                                std::string names) {
  fuse_in_header header{};
  header.opcode = opcode;
  header.nodeid = nodeid;
  iovec iov[3] = {
      {&header, sizeof(header)}, {fixed.data(), fixed.size()}, {names.data(), names.size()}};
  return EntriesItRemoves(header, iov, 3);
}

template <typename T>
std::string Bytes(const T& value) {
  return std::string(reinterpret_cast<const char*>(&value), sizeof(value));
}

TEST(RemovedEntriesTest, UnlinkAndRmdirNameTheirEntry) {
  EXPECT_EQ(Parse(FUSE_UNLINK, 7, "", std::string("gone\0", 5)),
            std::vector<Invalidation>{Entry(7, "gone")});
  EXPECT_EQ(Parse(FUSE_RMDIR, 9, "", std::string("dir\0", 4)),
            std::vector<Invalidation>{Entry(9, "dir")});
}

TEST(RemovedEntriesTest, RenamesNameBothEntries) {
  fuse_rename_in rename{};
  rename.newdir = 12;
  EXPECT_EQ(Parse(FUSE_RENAME, 5, Bytes(rename), std::string("from\0to\0", 8)),
            (std::vector<Invalidation>{Entry(5, "from"), Entry(12, "to")}));
  fuse_rename2_in rename2{};
  rename2.newdir = 13;
  rename2.flags = RENAME_NOREPLACE;
  EXPECT_EQ(Parse(FUSE_RENAME2, 6, Bytes(rename2), std::string("a\0bb\0", 5)),
            (std::vector<Invalidation>{Entry(6, "a"), Entry(13, "bb")}));
}

TEST(RemovedEntriesTest, OtherOpcodesAndCutShortArgumentsGiveNothing) {
  EXPECT_TRUE(Parse(FUSE_LOOKUP, 1, "", std::string("x\0", 2)).empty());
  EXPECT_TRUE(Parse(FUSE_UNLINK, 1, "", "").empty());
  fuse_rename2_in rename2{};
  EXPECT_TRUE(Parse(FUSE_RENAME2, 1, Bytes(rename2), std::string("only\0", 5)).empty());
  EXPECT_TRUE(Parse(FUSE_RENAME2, 1, "", "").empty());
}

}  // namespace
}  // namespace ringfs::frontend
