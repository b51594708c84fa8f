// HandleTable: fh never 0 and never reused, unknown fh is ESTALE, and two tables (two server
// instances) hand out unrelated fh, so an fh from one is unknown to the other.
#include "server/handle_table.h"

#include <gtest/gtest.h>

#include "absl/container/flat_hash_set.h"
#include "common/status.h"

namespace ringfs::server {
namespace {

HandleRef NewHandle(uint64_t nodeid = 2) {
  return std::make_shared<Handle>(UniqueFd(), nodeid, false);
}

TEST(HandleTableTest, AddGetRemove) {
  HandleTable table;
  const uint64_t fh = table.Add(NewHandle(7));
  EXPECT_NE(fh, 0u);
  auto handle = table.Get(fh);
  ASSERT_TRUE(handle.ok());
  EXPECT_EQ((*handle)->nodeid, 7u);
  EXPECT_EQ(table.FindByNode(7), *handle);
  EXPECT_TRUE(table.Remove(fh).ok());
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(ToErrno(table.Get(fh).status()), ESTALE);
  EXPECT_EQ(ToErrno(table.Remove(fh)), ESTALE);
}

TEST(HandleTableTest, CheckRoomIsEnfileAtTheCap) {
  HandleTable table(/*max_handles=*/2);
  EXPECT_TRUE(table.CheckRoom().ok());
  const uint64_t fh = table.Add(NewHandle());
  table.Add(NewHandle());
  EXPECT_EQ(ToErrno(table.CheckRoom()), ENFILE);
  ASSERT_TRUE(table.Remove(fh).ok());
  EXPECT_TRUE(table.CheckRoom().ok());
}

TEST(HandleTableTest, UnknownFhIsEstale) {
  HandleTable table;
  for (uint64_t fh : {0ull, 1ull, 2ull, 12345ull, ~0ull}) {
    EXPECT_EQ(ToErrno(table.Get(fh).status()), ESTALE) << fh;
  }
}

TEST(HandleTableTest, FhNeverReused) {
  HandleTable table;
  absl::flat_hash_set<uint64_t> seen;
  for (int i = 0; i < 10000; ++i) {
    const uint64_t fh = table.Add(NewHandle());
    ASSERT_NE(fh, 0u);
    ASSERT_TRUE(seen.insert(fh).second) << "fh " << fh << " handed out twice";
    ASSERT_TRUE(table.Remove(fh).ok());
  }
}

// Issue 10: a restarted server handed out fh 1, 2, 3 ... again, so a write through a descriptor
// opened before the restart went to a file opened after it.
TEST(HandleTableTest, AnotherInstancesFhAreUnknown) {
  HandleTable before_restart, after_restart;
  std::vector<uint64_t> old_fhs;
  for (int i = 0; i < 1000; ++i) old_fhs.push_back(before_restart.Add(NewHandle()));
  for (int i = 0; i < 1000; ++i) after_restart.Add(NewHandle());
  for (uint64_t fh : old_fhs) {
    EXPECT_EQ(ToErrno(after_restart.Get(fh).status()), ESTALE) << fh;
  }
}

}  // namespace
}  // namespace ringfs::server

namespace ringfs::server {
namespace {

HandleRef HandleOfNode(uint64_t nodeid, bool dir = false) {
  return std::make_shared<Handle>(UniqueFd(), nodeid, dir);
}

// Reclaim: an fh from another instance is registered as it is; a replay is harmless.
TEST(HandleTableTest, AdoptRegistersAnotherInstancesFhAndReplayIsHarmless) {
  HandleTable before_restart, after_restart;
  const uint64_t fh = before_restart.Add(HandleOfNode(7));
  ASSERT_TRUE(after_restart.Adopt(fh, HandleOfNode(7)).ok());
  auto got = after_restart.Get(fh);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)->nodeid, 7u);
  HandleRef first = *got;
  ASSERT_TRUE(after_restart.Adopt(fh, HandleOfNode(7)).ok());
  EXPECT_EQ(after_restart.Get(fh).value(), first) << "the replay keeps the first handle";
  EXPECT_EQ(after_restart.size(), 1u);
  // Later fh of this instance never collide with it.
  for (int i = 0; i < 1000; ++i) EXPECT_NE(after_restart.Add(HandleOfNode(8)), fh);
}

TEST(HandleTableTest, AdoptRefusesAnFhOfAnotherNodeOrKind) {
  HandleTable before_restart, after_restart;
  const uint64_t fh = before_restart.Add(HandleOfNode(7));
  ASSERT_TRUE(after_restart.Adopt(fh, HandleOfNode(7)).ok());
  EXPECT_EQ(ToErrno(after_restart.Adopt(fh, HandleOfNode(8))), ESTALE);
  EXPECT_EQ(ToErrno(after_restart.Adopt(fh, HandleOfNode(7, /*dir=*/true))), ESTALE);
}

TEST(HandleTableTest, AdoptRefusesAnFhThisInstanceCouldHaveHandedOut) {
  HandleTable table;
  const uint64_t fh = table.Add(HandleOfNode(7));
  ASSERT_TRUE(table.Remove(fh).ok());
  // Released here: adopting it again could make it name another file than the kernel thinks.
  EXPECT_EQ(ToErrno(table.Adopt(fh, HandleOfNode(7))), ESTALE);
  EXPECT_EQ(ToErrno(table.Adopt(0, HandleOfNode(7))), ESTALE);
}

TEST(HandleTableTest, AdoptIsCappedLikeOpen) {
  HandleTable before_restart;
  HandleTable after_restart(/*max_handles=*/1);
  const uint64_t a = before_restart.Add(HandleOfNode(7));
  const uint64_t b = before_restart.Add(HandleOfNode(8));
  ASSERT_TRUE(after_restart.Adopt(a, HandleOfNode(7)).ok());
  EXPECT_EQ(ToErrno(after_restart.Adopt(b, HandleOfNode(8))), ENFILE);
}

}  // namespace
}  // namespace ringfs::server
