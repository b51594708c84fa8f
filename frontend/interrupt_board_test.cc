#include "frontend/interrupt_board.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace ringfs::frontend {
namespace {

constexpr uint64_t kSecond = 1'000'000'000ULL;
constexpr uint64_t kKeepNs = std::chrono::nanoseconds(InterruptBoard::kKeep).count();

TEST(InterruptBoardTest, APostedUniqueIsTakenOnce) {
  InterruptBoard board;
  EXPECT_TRUE(board.empty());
  board.Post(24, 100 * kSecond);
  EXPECT_FALSE(board.empty());
  EXPECT_FALSE(board.Take(26));
  EXPECT_TRUE(board.Take(24));
  EXPECT_FALSE(board.Take(24));
  EXPECT_TRUE(board.empty());
}

TEST(InterruptBoardTest, PendingListsWithoutTaking) {
  InterruptBoard board;
  board.Post(24, 100 * kSecond);
  board.Post(26, 100 * kSecond);
  EXPECT_EQ(board.Pending(100 * kSecond), (std::vector<uint64_t>{24, 26}));
  EXPECT_EQ(board.Pending(100 * kSecond).size(), 2u);
}

TEST(InterruptBoardTest, UnclaimedEntriesExpireAfterKeep) {
  InterruptBoard board;
  const uint64_t t = 100 * kSecond;
  board.Post(24, t);
  EXPECT_EQ(board.Pending(t + kKeepNs).size(), 1u);
  EXPECT_TRUE(board.Pending(t + kKeepNs + 1).empty());
  EXPECT_TRUE(board.empty());
}

// Two /dev/fuse readers (classic transport, one per CPU) read their clocks before taking the
// board's lock, so one may post with a `now` a little older than the other's entry. That entry
// used to count as expired (unsigned wrap-around) and its INTERRUPT was lost: the caller stayed
// blocked on a hard mount (it_faults HardMountTest.ABurstOfCallersOnOneCpuCanAllBeInterrupted).
TEST(InterruptBoardTest, AnEntryStampedAfterTheCallersClockIsKept) {
  InterruptBoard board;
  const uint64_t t = 100 * kSecond;
  board.Post(32, t + 1'000);                   // reader A
  board.Post(36, t);                           // reader B, clock read a microsecond earlier
  EXPECT_EQ(board.Pending(t - 1).size(), 2u);  // a tick whose `now` is older still
  EXPECT_TRUE(board.Take(32));
  EXPECT_TRUE(board.Take(36));
}

}  // namespace
}  // namespace ringfs::frontend
